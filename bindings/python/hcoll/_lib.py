"""Loads libhcoll.so.0 and declares the C ABI's types and function prototypes for ctypes.

Nothing here knows about numpy or torch; it mirrors include/hcoll/hcoll.h one to one. The numeric
values are part of the ABI and never change.
"""

import ctypes
import os
import re

from . import _mpi_check

# Every number below is checked against hcoll.h by tests/packaging/check_constants.py (CTest
# packaging.constants), so a drift fails CI.

# hcoll_status_t
SUCCESS = 0
IN_PROGRESS = 1
ERR_INVALID_ARGUMENT = -1
ERR_INVALID_HANDLE = -2
ERR_NOT_INITIALIZED = -3
ERR_MISMATCH = -4
ERR_DUPLICATE_NAME = -5
ERR_NOT_MEMBER = -6
ERR_UNSUPPORTED = -7
ERR_TIMEOUT = -8
ERR_SHUT_DOWN = -9
ERR_BACKEND = -10
ERR_NO_MEMORY = -11
ERR_INTERNAL = -12

STATUS_NAMES = {
    SUCCESS: "SUCCESS", IN_PROGRESS: "IN_PROGRESS",
    ERR_INVALID_ARGUMENT: "ERR_INVALID_ARGUMENT", ERR_INVALID_HANDLE: "ERR_INVALID_HANDLE",
    ERR_NOT_INITIALIZED: "ERR_NOT_INITIALIZED", ERR_MISMATCH: "ERR_MISMATCH",
    ERR_DUPLICATE_NAME: "ERR_DUPLICATE_NAME", ERR_NOT_MEMBER: "ERR_NOT_MEMBER",
    ERR_UNSUPPORTED: "ERR_UNSUPPORTED", ERR_TIMEOUT: "ERR_TIMEOUT",
    ERR_SHUT_DOWN: "ERR_SHUT_DOWN", ERR_BACKEND: "ERR_BACKEND",
    ERR_NO_MEMORY: "ERR_NO_MEMORY", ERR_INTERNAL: "ERR_INTERNAL",
}

# hcoll_dtype_t
UINT8, INT8, UINT16, INT16, INT32, INT64, FLOAT16, BFLOAT16, FLOAT32, FLOAT64, BOOL = range(11)
DTYPE_SIZES = {UINT8: 1, INT8: 1, UINT16: 2, INT16: 2, INT32: 4, INT64: 8, FLOAT16: 2,
               BFLOAT16: 2, FLOAT32: 4, FLOAT64: 8, BOOL: 1}
# The one dtype table of the binding: numpy's and torch's dtypes of these names map to the codes
# (_tensor.py, torch/_core.py); a name the framework lacks (numpy's bfloat16) is left out there.
DTYPE_NAMES = {UINT8: "uint8", INT8: "int8", UINT16: "uint16", INT16: "int16", INT32: "int32",
               INT64: "int64", FLOAT16: "float16", BFLOAT16: "bfloat16", FLOAT32: "float32",
               FLOAT64: "float64", BOOL: "bool"}

# hcoll_reduce_op_t
SUM, AVERAGE, MIN, MAX, PRODUCT, ADASUM = range(6)

DEVICE_HOST = -1
UNDEFINED = -32766
MAX_NDIM = 32

INIT_FIELD_MPI_COMM = 1 << 0
INIT_FIELD_ALLOCATOR = 1 << 1
INIT_FIELD_BACKEND = 1 << 2
COMM_STATS_FIELD_ALL = 0x1FF

comm_t = ctypes.c_void_p
request_t = ctypes.c_void_p
status_t = ctypes.c_int


class Tensor(ctypes.Structure):
    """hcoll_tensor_t."""
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("device", ctypes.c_int32),
        ("stream", ctypes.c_void_p),
    ]


alloc_fn = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p,
                            ctypes.c_size_t)
free_fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p)


class InitParams(ctypes.Structure):
    """hcoll_init_params_t."""
    _fields_ = [
        ("mask", ctypes.c_uint64),
        ("mpi_comm", ctypes.c_int),
        ("alloc", alloc_fn),
        ("free", free_fn),
        ("alloc_ctx", ctypes.c_void_p),
        ("backend", ctypes.c_char_p),
        ("local_ranks", ctypes.c_int32),
    ]


class OpOptions(ctypes.Structure):
    """hcoll_op_options_t (mask-first; no option is defined yet, the binding passes NULL)."""
    _fields_ = [("mask", ctypes.c_uint64)]


STATS_FIELDS = ("cycles", "slow_path_negotiations", "cache_hits", "backend_calls",
                "fused_tensors", "bytes", "queue_depth", "caller_rounds", "folded")


class CommStats(ctypes.Structure):
    """hcoll_comm_stats_t."""
    _fields_ = [("mask", ctypes.c_uint64)] + [(f, ctypes.c_uint64) for f in STATS_FIELDS]


_P = ctypes.POINTER
_TENSOR_P = _P(Tensor)
_REQ_P = _P(request_t)
_INT_P = _P(ctypes.c_int)
_c = ctypes.c_char_p
_d = ctypes.c_double
_i = ctypes.c_int

# name -> (restype, argtypes). Every function of hcoll.h is here; tests check the list is complete.
PROTOTYPES = {
    "hcoll_initialize": (status_t, [_P(InitParams)]),
    "hcoll_shutdown": (status_t, []),
    "hcoll_is_initialized": (_i, []),
    "hcoll_version": (status_t, [_INT_P, _INT_P, _INT_P]),
    "hcoll_version_string": (_c, []),
    "hcoll_status_string": (_c, [status_t]),
    "hcoll_last_error": (_c, []),
    "hcoll_nccl_built": (_i, []),
    "hcoll_nccl_version": (_i, []),
    "hcoll_start_timeline": (status_t, [_c]),
    "hcoll_stop_timeline": (status_t, []),
    "hcoll_mpi_version": (_c, []),
    "hcoll_abort": (None, [_c]),
    "hcoll_comm_world": (status_t, [_P(comm_t)]),
    "hcoll_comm_world_of": (status_t, [ctypes.c_int, _P(comm_t)]),
    "hcoll_comm_split": (status_t, [comm_t, _i, _i, _P(comm_t)]),
    "hcoll_comm_create": (status_t, [comm_t, _INT_P, _i, _P(comm_t)]),
    "hcoll_comm_from_mpi": (status_t, [_i, _P(comm_t)]),
    "hcoll_comm_destroy": (status_t, [comm_t]),
    "hcoll_comm_rank": (status_t, [comm_t, _INT_P]),
    "hcoll_comm_size": (status_t, [comm_t, _INT_P]),
    "hcoll_comm_local_rank": (status_t, [comm_t, _INT_P]),
    "hcoll_comm_local_size": (status_t, [comm_t, _INT_P]),
    "hcoll_comm_stats": (status_t, [comm_t, _P(CommStats)]),
    "hcoll_comm_set_timeout": (status_t, [comm_t, _d]),
    "hcoll_allreduce": (status_t, [comm_t, _c, _TENSOR_P, _TENSOR_P, _i, _d, _d, _REQ_P]),
    "hcoll_grouped_allreduce": (status_t,
                                [comm_t, _c, _i, _TENSOR_P, _TENSOR_P, _i, _d, _d, _REQ_P]),
    "hcoll_allgather": (status_t, [comm_t, _c, _TENSOR_P, _REQ_P]),
    "hcoll_grouped_allgather": (status_t, [comm_t, _c, _i, _TENSOR_P, _REQ_P]),
    "hcoll_broadcast": (status_t, [comm_t, _c, _TENSOR_P, _i, _REQ_P]),
    "hcoll_grouped_broadcast": (status_t, [comm_t, _c, _i, _TENSOR_P, _i, _REQ_P]),
    "hcoll_alltoall": (status_t, [comm_t, _c, _TENSOR_P, _P(ctypes.c_int64), _REQ_P]),
    "hcoll_reducescatter": (status_t, [comm_t, _c, _TENSOR_P, _i, _d, _d, _REQ_P]),
    "hcoll_grouped_reducescatter": (status_t, [comm_t, _c, _i, _TENSOR_P, _i, _d, _d, _REQ_P]),
    "hcoll_allgather_into": (status_t, [comm_t, _c, _TENSOR_P, _TENSOR_P, _P(OpOptions), _REQ_P]),
    "hcoll_grouped_allgather_into": (status_t, [comm_t, _c, _i, _TENSOR_P, _TENSOR_P,
                                                _P(OpOptions), _REQ_P]),
    "hcoll_alltoall_into": (status_t, [comm_t, _c, _TENSOR_P, _P(ctypes.c_int64), _TENSOR_P,
                                       _P(OpOptions), _REQ_P]),
    "hcoll_reducescatter_into": (status_t, [comm_t, _c, _TENSOR_P, _TENSOR_P, _i, _d, _d,
                                            _P(OpOptions), _REQ_P]),
    "hcoll_grouped_reducescatter_into": (status_t, [comm_t, _c, _i, _TENSOR_P, _TENSOR_P, _i, _d,
                                                    _d, _P(OpOptions), _REQ_P]),
    "hcoll_barrier": (status_t, [comm_t, _REQ_P]),
    "hcoll_join": (status_t, [comm_t, _REQ_P]),
    "hcoll_test": (status_t, [request_t]),
    "hcoll_wait": (status_t, [request_t, _d]),
    "hcoll_request_output": (status_t, [request_t, _i, _TENSOR_P]),
    "hcoll_request_received_splits": (status_t,
                                      [request_t, _i, _P(_P(ctypes.c_int64)), _INT_P]),
    "hcoll_request_error": (_c, [request_t]),
    "hcoll_request_free": (status_t, [request_t]),
}

LIBRARY_NAME = "libhcoll.so.0"
PACKAGED_DIR = "_native"  # an installed package's own library: hcoll/_native/libhcoll.so.0


def packaged_path():
    """Where an installed package (pip, or CMake's `python` install component) keeps its
    library."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), PACKAGED_DIR, LIBRARY_NAME)


def build_info():
    """The installed package's build record (_build_info.py, generated by CMake) as a module, or
    None in the source tree, which has none."""
    try:
        from . import _build_info
    except ImportError:
        return None
    return _build_info


def candidate_paths():
    """Where the library is looked for, in order: $HCOLL_LIBRARY, the installed package's own
    (hcoll/_native/), next to this package, in an install prefix above it
    (<prefix>/lib/pythonX/site-packages/hcoll -> <prefix>/lib), in the source tree's build
    directories, and finally the dynamic loader's own search path."""
    env = os.environ.get("HCOLL_LIBRARY")
    if env:
        return [env]  # an explicit choice is never second-guessed
    here = os.path.dirname(os.path.abspath(__file__))
    paths = [packaged_path(), os.path.join(here, LIBRARY_NAME)]
    up = here
    for _ in range(4):
        up = os.path.dirname(up)
        paths.append(os.path.join(up, LIBRARY_NAME))
        paths.append(os.path.join(up, "lib", LIBRARY_NAME))
    repo = os.path.dirname(os.path.dirname(here))  # bindings/python/hcoll -> repository root
    repo = os.path.dirname(repo)
    if os.path.isdir(repo):
        for entry in sorted(os.listdir(repo)):
            if entry.startswith("build"):
                paths.append(os.path.join(repo, entry, LIBRARY_NAME))
    paths.append(LIBRARY_NAME)
    return paths


# The MPI libraries hcoll may pull in: MPICH's libmpich, Open MPI's libmpi and its support layers.
_MPI_LIBRARY = re.compile(r"^lib(mpich|mpi|open-pal|open-rte)[.-].*so")


def _promote_mpi_to_global():
    """Makes the MPI library that libhcoll.so.0 pulled in global (RTLD_NOLOAD | RTLD_GLOBAL: the
    loaded copy is promoted, nothing new is loaded). This is the one part that must be global:
    Open MPI's dlopen()ed components (and mpi4py's expectations) resolve MPI symbols from the
    global scope, as when the application itself links MPI. Loading libhcoll RTLD_LOCAL would
    otherwise hide its MPI from them. The dependency of an already loaded library is found in
    /proc/self/maps (Linux)."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "/" in line}
    except OSError:
        return
    for path in sorted(paths):
        if _MPI_LIBRARY.match(os.path.basename(path)):
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL | os.RTLD_NOLOAD)
            except OSError:
                pass  # not loadable by that name (deleted file): leave it as it is


def _recorded_mpi(path):
    """What the build record says `path` links ("MPICH 4.0.2 (libmpich.so.12)"), when `path` is
    the installed package's own library and the record exists; else None."""
    info = build_info()
    if info is None or not info.MPI_FAMILY or path != packaged_path():
        return None
    built = f"{info.MPI_FAMILY} {info.MPI_VERSION}".strip()
    return f"{built} ({info.MPI_LIBRARY})" if info.MPI_LIBRARY else built


def load():
    errors = []
    for path in candidate_paths():
        if os.sep in path and not os.path.exists(path):
            continue
        # An installed package knows its MPI before loading: a process that already has another
        # MPI is refused before this library maps its own next to it.
        recorded = _recorded_mpi(path)
        if recorded is not None:
            _mpi_check.check_import(path, recorded)
        try:
            # RTLD_LOCAL: hcoll's own hcoll_* names stay out of the process's global scope, so
            # nothing loaded later (Open MPI's coll/hcoll looking for NVIDIA's libhcoll.so.1, or
            # another binding) can bind to them by accident; ctypes reaches them through `lib`.
            lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
        except OSError as e:
            errors.append(f"{path}: {e}")
            continue
        for name, (restype, argtypes) in PROTOTYPES.items():
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = argtypes
        built = lib.hcoll_mpi_version().decode(errors="replace")
        if recorded is not None and _mpi_check.family_of(built) != _mpi_check.family_of(recorded):
            raise ImportError(f"{path} links {built}, but this package's build record "
                              f"(_build_info.py) says {recorded}: a broken install; "
                              "reinstall hcoll")
        # Any library (a source tree's, $HCOLL_LIBRARY): checked by what it says it links, while
        # its MPI is still local to it, before that MPI is made global below.
        _mpi_check.check_import(path, built)
        _promote_mpi_to_global()
        lib.hcoll_path = path
        return lib
    raise OSError("cannot load " + LIBRARY_NAME + "; set HCOLL_LIBRARY to its path. Tried: " +
                  "; ".join(errors or candidate_paths()))


lib = load()
