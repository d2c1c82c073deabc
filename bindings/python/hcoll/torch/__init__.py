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
                      grouped_reducescatter_async, join, reducescatter, reducescatter_async,
                      sparse_allreduce_async)
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


# ------------------------------------------------------------------------------------------------
# Build and controller queries, answered as Horovod answers them for an MPI build
# ------------------------------------------------------------------------------------------------

HorovodInternalError = HcollError  # what Horovod raises for a failed collective


def nccl_built():
    """NCCL's version code (e.g. 22809 for 2.28.9) if hcoll has the NCCL backend, else 0 (as
    Horovod's: usable both as a bool and in `nccl_built() >= 2700`)."""
    from .. import nccl_version
    return nccl_version()


def cuda_built():
    """CUDA tensors are supported exactly when the NCCL backend is built."""
    return nccl_built() != 0


def mpi_built():
    from .. import mpi_version
    return not mpi_version().startswith("none")


def mpi_enabled():
    """True: hcoll.torch's ranks are MPI processes (hcoll's MPI backend is its controller)."""
    return mpi_built()


def mpi_threads_supported():
    """True: hcoll initializes (or requires) MPI_THREAD_MULTIPLE."""
    return mpi_built()


def gloo_built():
    return False


def gloo_enabled():
    return False


def ccl_built():
    return False


def ddl_built():
    return False


def rocm_built():
    return False


def cross_rank():
    """This rank's index among the global set's ranks with the same local_rank (its node's
    index when every node runs the same number of ranks)."""
    return _State.topology()[0]


def cross_size():
    """How many ranks of the global set have this rank's local_rank (the number of nodes when
    every node runs the same number of ranks)."""
    return _State.topology()[1]


def is_homogeneous():
    """True when every node runs the same number of ranks of the global set."""
    return _State.topology()[2]


def start_timeline(file_path, mark_cycles=False):
    """Starts writing this process's timeline (Chrome-trace JSON, per-rank file names as
    HCOLL_TIMELINE) to `file_path`; a timeline being written is finished first. Negotiation
    cycles are always marked (mark_cycles is accepted for Horovod's signature)."""
    from .. import start_timeline as _start
    _or_global(None)
    _start(file_path)


def stop_timeline():
    """Finishes and closes the timeline file."""
    from .. import stop_timeline as _stop
    _or_global(None)
    _stop()


__all__ = [n for n in dir() if not n.startswith("_")]
