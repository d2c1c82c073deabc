"""hcoll: a thin ctypes binding of libhcoll.so.0 for numpy arrays and torch CPU tensors.

    import numpy as np, hcoll
    hcoll.initialize()
    x = np.ones(4, np.float32)
    hcoll.world().allreduce(x, op=hcoll.AVERAGE, name="x").wait()   # in place
    hcoll.shutdown()

The library is found through $HCOLL_LIBRARY, inside this package when installed (pip:
hcoll/_native/), next to it, or in the source tree's build*/ directories (see
_lib.candidate_paths). See docs/python.md.
"""

from ._lib import (ADASUM, AVERAGE, BFLOAT16, BOOL, FLOAT16, FLOAT32, FLOAT64, INT8, INT16, INT32, INT64,
                   MAX, MIN, PRODUCT, SUM, UINT8, UINT16, UNDEFINED)
from ._lib import (ERR_BACKEND, ERR_DUPLICATE_NAME, ERR_INTERNAL, ERR_INVALID_ARGUMENT,
                   ERR_INVALID_HANDLE, ERR_MISMATCH, ERR_NO_MEMORY, ERR_NOT_INITIALIZED,
                   ERR_NOT_MEMBER, ERR_SHUT_DOWN, ERR_TIMEOUT, ERR_UNSUPPORTED, IN_PROGRESS,
                   SUCCESS)
from ._api import (Comm, HcollArgumentError, HcollError, Request, abort, abort_on_exception,
                   initialize, is_initialized, last_error, mpi_version, nccl_built, nccl_version,
                   shutdown, start_timeline, status_string, stop_timeline, version,
                   version_string, world)
from ._mpi_check import MixedMpiError

library_path = _lib.lib.hcoll_path
__version__ = version_string()  # the loaded library's; an installed package's wheel has the same
# What the loaded library was built with (version, MPI, NCCL) when it is an installed package's
# own (_build_info.py), as a dict; None in the source tree or with $HCOLL_LIBRARY elsewhere.
_info = _lib.build_info() if library_path == _lib.packaged_path() else None
build_info = {k: v for k, v in vars(_info).items() if k.isupper()} if _info else None
del _info

__all__ = [
    "Comm", "HcollArgumentError", "HcollError", "Request", "abort", "abort_on_exception",
    "initialize", "is_initialized", "last_error", "mpi_version", "nccl_built", "nccl_version",
    "start_timeline", "stop_timeline",
    "shutdown", "status_string", "version", "version_string", "world", "library_path",
    "build_info", "MixedMpiError",
    "allreduce", "grouped_allreduce", "allgather", "grouped_allgather", "broadcast",
    "grouped_broadcast", "alltoall", "reducescatter", "grouped_reducescatter", "barrier", "join",
]


def _on_world(method):
    def call(*args, comm=None, **kwargs):
        return getattr(comm or world(), method)(*args, **kwargs)
    call.__name__ = method
    call.__doc__ = f"Comm.{method} on `comm` (default: the world communicator)."
    return call


allreduce = _on_world("allreduce")
grouped_allreduce = _on_world("grouped_allreduce")
allgather = _on_world("allgather")
grouped_allgather = _on_world("grouped_allgather")
broadcast = _on_world("broadcast")
grouped_broadcast = _on_world("grouped_broadcast")
alltoall = _on_world("alltoall")
reducescatter = _on_world("reducescatter")
grouped_reducescatter = _on_world("grouped_reducescatter")
barrier = _on_world("barrier")
join = _on_world("join")
