"""hcoll as a torch.distributed backend.

    import torch.distributed as dist
    import hcoll.torch.distributed            # registers backend "hcoll"
    dist.init_process_group("hcoll", init_method=..., rank=r, world_size=n)
    model = torch.nn.parallel.DistributedDataParallel(model)

or, under mpiexec, `hcoll.torch.distributed.init_process_group()` (rank, size and the c10d store
come from hcoll's MPI world). hcoll bootstraps from MPI: the job is started by mpiexec and
init_process_group's world_size must be the MPI world's (checked; a clear error otherwise).
Every group is one hcoll communicator with its own negotiation thread; new_group creates one
from the parent (collective over all ranks, as torch requires new_group to be called).
See docs/torch_distributed.md.
"""

import os
import socket
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as _torch_c10d

from .. import _api as _hcoll_api
from . import _c10d_loader

_ext = _c10d_loader.load()

BACKEND = "hcoll"
ProcessGroupHcoll = _ext.ProcessGroupHcoll

_library = None
_pending_group_comm = None   # the communicator the next creator call (a new_group) takes
_fallback_world = None       # (default group, world communicator) when the default isn't hcoll


def _load_library():
    """libhcoll, the same file the ctypes binding loaded; initializes hcoll if nobody did."""
    global _library
    if not _hcoll_api.is_initialized():
        _hcoll_api.initialize()
    if _library is None:
        from .. import library_path
        _library = _ext.Library.load(library_path)
    return _library


def _create_process_group(store, rank, size, timeout):
    """The creator torch.distributed calls (Backend.register_backend): the default group gets
    hcoll's world reordered by torch rank, a new_group the communicator prepared for it."""
    global _pending_group_comm
    comm, _pending_group_comm = _pending_group_comm, None
    if comm is None:
        comm = _ext.Communicator.world(_load_library(), rank, size, timeout)
    return ProcessGroupHcoll(comm, rank, size)


def _parent_communicator(timeout):
    """The torch-ordered world to create new_group communicators from."""
    global _fallback_world
    default = _torch_c10d._get_default_group()
    if isinstance(default, ProcessGroupHcoll):
        return default._communicator
    if _fallback_world is None or _fallback_world[0] is not default:
        comm = _ext.Communicator.world(_load_library(), dist.get_rank(), dist.get_world_size(),
                                       timeout)
        _fallback_world = (default, comm)
    return _fallback_world[1]


_torch_new_process_group_helper = _torch_c10d._new_process_group_helper


def _new_process_group_helper(group_size, group_rank, global_ranks_in_group, backend, store,
                              *args, **kwargs):
    """torch 1.13 calls a plugin's creator on a new group's members only, but an hcoll
    communicator is created collectively over its parent: every rank (new_group runs on all of
    them) takes part here first, then torch's helper runs as before."""
    global _pending_group_comm
    if not global_ranks_in_group or str(backend).lower() != BACKEND:
        return _torch_new_process_group_helper(group_size, group_rank, global_ranks_in_group,
                                               backend, store, *args, **kwargs)
    timeout = kwargs.get("timeout", _torch_c10d.default_pg_timeout)
    comm = _parent_communicator(timeout).subset(sorted(global_ranks_in_group), timeout)
    _pending_group_comm = comm if comm.is_member else None
    try:
        return _torch_new_process_group_helper(group_size, group_rank, global_ranks_in_group,
                                               backend, store, *args, **kwargs)
    finally:
        _pending_group_comm = None


def _register():
    if BACKEND.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND, _create_process_group)
    if _torch_c10d._new_process_group_helper is not _new_process_group_helper:
        _torch_c10d._new_process_group_helper = _new_process_group_helper


_register()


def init_process_group(timeout=_torch_c10d.default_pg_timeout, **kwargs):
    """init_process_group("hcoll") under mpiexec with nothing to configure: rank and world size
    are hcoll's MPI world's; the c10d store (torch needs one) is a TCPStore on rank 0's host,
    whose port is chosen there and broadcast over hcoll, unless `init_method`/`store` or
    MASTER_ADDR say otherwise. Other keywords go to torch.distributed.init_process_group."""
    _load_library()
    world = _hcoll_api.world()
    kwargs.setdefault("rank", world.rank)
    kwargs.setdefault("world_size", world.size)
    if "init_method" not in kwargs and "store" not in kwargs and "MASTER_ADDR" not in os.environ:
        kwargs["store"] = _tcp_store(world, kwargs["rank"], kwargs["world_size"], timeout)
    dist.init_process_group(BACKEND, timeout=timeout, **kwargs)


def _tcp_store(world, rank, size, timeout):
    address = torch.zeros(256, dtype=torch.uint8)
    store = None
    if world.rank == 0:
        store = dist.TCPStore(socket.gethostname(), 0, size, True, timeout,
                              wait_for_workers=False)
        text = f"{socket.gethostname()}:{store.port}".encode()
        address[:len(text)] = torch.tensor(list(text), dtype=torch.uint8)
    world.broadcast(address, root=0, name="hcoll.c10d.store").wait()
    if world.rank != 0:
        host, port = bytes(address[address != 0].tolist()).decode().rsplit(":", 1)
        store = dist.TCPStore(host, int(port), size, False, timeout)
    return store


def allreduce_hook(process_group, bucket):
    """A DDP comm hook (`ddp.register_comm_hook(pg, allreduce_hook)`, pg a ProcessGroupHcoll):
    each gradient bucket is one grouped allreduce named after the bucket ("ddp.bucket.<i>"), its
    average computed by hcoll (no separate division)."""
    work = process_group.grouped_allreduce([bucket.buffer()], name=f"ddp.bucket.{bucket.index()}",
                                           op="average")
    return work.get_future().then(lambda fut: fut.value()[0])


__all__ = ["BACKEND", "ProcessGroupHcoll", "allreduce_hook", "init_process_group"]
