"""hcoll.torch: Horovod's PyTorch API on hcoll.

    import hcoll.torch as hvd
    hvd.init()
    model = hvd.SyncBatchNorm.convert_sync_batchnorm(model)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)

Collectives take and return torch tensors (CPU; CUDA with the NCCL backend), default to Average
for allreduce/reducescatter, and raise hcoll.HcollError on failure (every rank). See
docs/torch.md.
"""

from .. import HcollError
from ._core import (Handle, ProcessSet, add_process_set, init, is_initialized, poll,
                    process_sets, remove_process_set, shutdown, synchronize)
from ._core import comm_rank as _comm_rank
from ._core import comm_size as _comm_size
from ._core import _State
from .compression import Compression
from .mpi_ops import (Adasum, Average, Max, Min, Product, Sum, allgather, allgather_async, allreduce,
                      allreduce_, allreduce_async, allreduce_async_, alltoall, alltoall_async,
                      barrier, broadcast, broadcast_, broadcast_async, broadcast_async_,
                      grouped_allgather, grouped_allgather_async, grouped_allreduce,
                      grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_,
                      grouped_broadcast_, grouped_broadcast_async_, grouped_reducescatter,
                      grouped_reducescatter_async, join, reducescatter, reducescatter_async)
from .optimizer import (DistributedOptimizer, allgather_object, broadcast_object,
                        broadcast_optimizer_state, broadcast_parameters)
from .sync_batch_norm import SyncBatchNorm


def global_process_set():
    """The process set init() made the default (the world unless init() was given ranks)."""
    return _State.global_set


def rank(process_set=None):
    return _comm_rank(process_set)


def size(process_set=None):
    return _comm_size(process_set)


def _or_global(process_set):
    ps = process_set if process_set is not None else global_process_set()
    if ps is None:
        raise ValueError("hcoll.torch is not initialized: call hcoll.torch.init() first")
    return ps


def local_rank(process_set=None):
    ps = _or_global(process_set)
    return ps.local_rank() if isinstance(ps, ProcessSet) else ps.local_rank


def local_size(process_set=None):
    ps = _or_global(process_set)
    return ps.local_size() if isinstance(ps, ProcessSet) else ps.local_size


def nccl_built():
    from .. import nccl_built as _nccl_built
    return _nccl_built()


__all__ = [n for n in dir() if not n.startswith("_")]
