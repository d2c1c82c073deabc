"""The machinery under hcoll.torch: process sets, tensor descriptors, handles, results.

Speed matters here (a training step submits one call per bucket or parameter), so this file calls
the C functions directly instead of going through hcoll.Comm: it builds hcoll_tensor_t structs
from torch tensors with cached shape arrays, does none of the checks libhcoll repeats (dtype
agreement, shapes, names), and keeps only what the runtime reads or writes referenced until the
operation completed.

Results: operations with outputs (allgather, alltoall, reducescatter) are submitted and turned
into torch tensors by `submit_with_outputs` alone: into caller-allocated tensors through the
`hcoll_*_into` entry points when the library has them and the output shapes are known, else
copied out of runtime-owned memory.
"""

import ctypes

import torch

from .. import _api
from .. import _lib
from .. import _tensor
from ._outputs import TorchOutputs

_OUTPUTS = TorchOutputs()  # the runtime's output allocator when init() initializes hcoll

lib = _lib.lib
HcollError = _api.HcollError
_check = _api._check

_TO_HCOLL = _tensor.torch_dtypes()
_TO_TORCH = {v: k for k, v in _TO_HCOLL.items()}
_ELEMENT_SIZE = {k: torch.empty((), dtype=k).element_size() for k in _TO_HCOLL}

# Shape arrays are immutable once built, so one per distinct shape is shared by every descriptor
# (a Tensor struct keeps the array it points at alive through ctypes' _objects).
_shapes = {}
_MAX_SHAPES = 4096


def _shape_array(shape):
    a = _shapes.get(shape)
    if a is None:
        if len(_shapes) >= _MAX_SHAPES:
            _shapes.clear()
        a = _shapes[shape] = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    return a


def describe(t):
    """An hcoll_tensor_t for a contiguous torch tensor (CPU, or CUDA with its ordinal and the
    current stream). Unsupported dtypes raise TypeError; contiguity is the caller's job."""
    dtype = _TO_HCOLL.get(t.dtype)
    if dtype is None:
        raise TypeError(f"hcoll.torch: unsupported dtype {t.dtype}")
    shape = tuple(t.shape)
    data = t.data_ptr() if t.numel() else None
    if t.is_cuda:
        stream = torch.cuda.current_stream(t.device).cuda_stream
        return _lib.Tensor(data, dtype, len(shape), _shape_array(shape), t.device.index,
                           stream or None)
    return _lib.Tensor(data, dtype, len(shape), _shape_array(shape), _lib.DEVICE_HOST, None)


# Descriptors of recently used tensors, keyed by what a descriptor holds (address, shape, dtype,
# device), so a tensor submitted again (a gradient every step, a buffer) costs one dict lookup.
# A stale entry is harmless: a new tensor with the same key gets the same, correct descriptor.
_descs = {}
_MAX_DESCS = 4096


def describe_cached(t):
    """ctypes pointer to a (shared, read-only) descriptor of contiguous CPU tensor `t`."""
    key = (t.data_ptr(), t.shape, t.dtype)
    p = _descs.get(key)
    if p is None:
        if t.is_cuda:  # the stream is current-state: never cached
            return ctypes.pointer(describe(t))
        if len(_descs) >= _MAX_DESCS:
            _descs.clear()
        p = _descs[key] = ctypes.pointer(describe(t))
    return p


def describe_all(ts):
    return (_lib.Tensor * max(len(ts), 1))(*[describe(t) for t in ts])


# ------------------------------------------------------------------------------------------------
# Process sets
# ------------------------------------------------------------------------------------------------

class ProcessSet:
    """A group of ranks with its own hcoll communicator (Horovod's process set). `comm` is the
    hcoll.Comm, None on ranks that are not members."""

    def __init__(self, comm, ranks=None):
        self.comm = comm
        self.handle = comm._handle if comm is not None else None
        self.ranks = None if ranks is None else list(ranks)  # global ranks of the members

    def included(self):
        return self.comm is not None

    def rank(self):
        return self.comm.rank if self.comm is not None else -1

    def size(self):
        return self.comm.size if self.comm is not None else 0

    def local_rank(self):
        return self.comm.local_rank

    def local_size(self):
        return self.comm.local_size

    def __repr__(self):
        return f"ProcessSet(rank={self.rank()}, size={self.size()})"


class _State:
    owns_runtime = False     # init() initialized hcoll (and shutdown() shuts it down)
    global_set = None        # the default process set
    sets = []                # every set init() or add_process_set() made
    cross = None             # (cross_rank, cross_size, homogeneous), gathered by init()

    @staticmethod
    def topology():
        if _State.cross is None:
            raise ValueError("hcoll.torch is not initialized: call hcoll.torch.init() first")
        return _State.cross


def _gather_topology(comm):
    """(cross_rank, cross_size, homogeneous) of this rank of `comm`: one allgather of every
    rank's (local_rank, local_size), at init() where every member takes part."""
    mine = torch.tensor([[comm.local_rank, comm.local_size]], dtype=torch.int64)
    h = submit_with_outputs("allgather", comm._h(), b"hcoll.torch.init.topology", [mine], (),
                            mine.device, lambda req, outs: outs[0])
    everyone = synchronize(h).tolist()
    local_rank = comm.local_rank
    same = [r for r, (lr, _) in enumerate(everyone) if lr == local_rank]
    return (same.index(comm.rank), len(same), len({ls for _, ls in everyone}) == 1)


def _require_init():
    if _State.global_set is None:
        raise ValueError("hcoll.torch is not initialized: call hcoll.torch.init() first")
    return _State.global_set


def resolve(comm):
    """None -> the global set; a ProcessSet or hcoll.Comm -> its handle, checked for membership."""
    if comm is None:
        ps = _require_init()
    elif isinstance(comm, ProcessSet):
        ps = comm
    elif isinstance(comm, _api.Comm):
        return comm._h()
    else:
        raise TypeError(f"comm: expected a ProcessSet or hcoll.Comm, got {type(comm).__name__}")
    if ps.handle is None:
        raise HcollError(_lib.ERR_NOT_MEMBER, "this rank is not a member of the process set "
                         "(or the set was removed)")
    return ps.handle


def global_rank():
    """This rank in the global process set (what Horovod's rank() and root_rank mean)."""
    return _require_init().comm.rank


def is_root(process_set, root_rank):
    """Whether this rank is `root_rank` (global; an hcoll.Comm's own rank for a Comm)."""
    if isinstance(process_set, _api.Comm):
        return process_set.rank == int(root_rank)
    return global_rank() == int(root_rank)


def root_in(process_set, root_rank):
    """The communicator rank of global rank `root_rank` in `process_set` (Horovod's root_rank is
    a global rank also when a process set is given). An hcoll.Comm keeps its own numbering."""
    root_rank = int(root_rank)
    if process_set is None or isinstance(process_set, _api.Comm):
        return root_rank
    ranks = process_set.ranks
    if ranks is None or process_set is _State.global_set:
        return root_rank
    if root_rank not in ranks:
        raise ValueError(f"root_rank {root_rank} is not a member of the process set {ranks}")
    return ranks.index(root_rank)


def comm_size(comm):
    if comm is None:
        return _require_init().comm.size
    return comm.size() if isinstance(comm, ProcessSet) else comm.size


def comm_rank(comm):
    if comm is None:
        return _require_init().comm.rank
    return comm.rank() if isinstance(comm, ProcessSet) else comm.rank


def init(comm=None):
    """Initializes hcoll (collective) and returns the global process set.

    comm: None (MPI_COMM_WORLD); an mpi4py communicator (becomes the world); a list of ranks of
    MPI_COMM_WORLD (the global set is a communicator of those ranks); or a list of mpi4py
    communicators (hcoll is initialized on MPI_COMM_WORLD and each becomes a ProcessSet, returned
    by process_sets(); the global set stays the world)."""
    if _State.global_set is not None:
        return _State.global_set
    extra = []
    if isinstance(comm, (list, tuple)) and comm and all(hasattr(c, "py2f") for c in comm):
        extra, comm = list(comm), None
    if not _api.is_initialized():
        # hcoll.torch initializes hcoll: the runtime allocates its outputs as torch tensors
        if comm is not None and hasattr(comm, "py2f"):
            _api.initialize(comm, allocator=_OUTPUTS)
        elif extra:
            from mpi4py import MPI  # a list of mpi4py communicators: mpi4py is loaded already
            _api.initialize(MPI.COMM_WORLD, allocator=_OUTPUTS)
        else:
            _api.initialize(allocator=_OUTPUTS)
        _State.owns_runtime = True
    world = _api.world()
    if isinstance(comm, (list, tuple)):
        _State.global_set = ProcessSet(world.create([int(r) for r in comm]))
    else:
        _State.global_set = ProcessSet(world)
    if _State.global_set.comm is not None:
        _State.global_set.ranks = list(range(_State.global_set.comm.size))
    _State.sets = [_State.global_set]
    if _State.global_set.comm is not None:
        _State.cross = _gather_topology(_State.global_set.comm)
    for c in extra:
        null = getattr(type(c), "__module__", "").startswith("mpi4py") and not c
        ps = ProcessSet(None if null else _api.Comm.from_mpi(c))
        if ps.comm is not None and _State.global_set.comm is not None:
            ps.ranks = _members(ps.comm, _State.global_set.comm.rank)
        _State.sets.append(ps)
    return _State.global_set


def _members(comm, my_global_rank):
    """The global ranks of `comm`'s members in its rank order (collective over `comm`)."""
    mine = torch.tensor([my_global_rank], dtype=torch.int64)
    h = submit_with_outputs("allgather", comm._h(), b"hcoll.torch.process_set.ranks", [mine], (),
                            mine.device, lambda req, outs: outs[0])
    return synchronize(h).tolist()


def add_process_set(ranks):
    """A ProcessSet of these ranks of the global set (collective over the global set)."""
    if hasattr(ranks, "ranks"):  # Horovod also takes a ProcessSet object
        ranks = ranks.ranks
    ranks = [int(r) for r in ranks]
    ps = ProcessSet(_require_init().comm.create(ranks), ranks)
    _State.sets.append(ps)
    return ps


def remove_process_set(process_set):
    """Destroys the set's communicator (collective over the global set's members that are in
    it: every member must call it). Returns True if it was registered."""
    if process_set is _State.global_set:
        raise ValueError("the global process set is removed by shutdown()")
    if process_set.comm is not None:
        process_set.comm.destroy()
        process_set.comm = None
        process_set.handle = None
    if process_set in _State.sets:
        _State.sets.remove(process_set)
        return True
    return False


def process_sets():
    return list(_State.sets)


def shutdown():
    """Releases what init() made; shuts hcoll down if init() initialized it."""
    _State.global_set = None
    _State.sets = []
    _State.cross = None
    if _State.owns_runtime and _api.is_initialized():
        _api.shutdown()
    _State.owns_runtime = False


def is_initialized():
    return _State.global_set is not None


# ------------------------------------------------------------------------------------------------
# Handles and results
# ------------------------------------------------------------------------------------------------

class Handle:
    """One in-flight operation (what *_async returns; give it to synchronize() or poll()).
    `keep` holds every tensor and descriptor the runtime reads or writes; `finish(req)` turns
    the completed request into the result. A handle dropped unsynchronized is freed once its
    operation completed (its tensors stay referenced until then)."""

    __slots__ = ("req", "keep", "finish", "result")

    def __init__(self, req, keep, finish, result=None):
        self.req = req
        self.keep = keep
        self.finish = finish  # None: the result is `result` as it is
        self.result = result

    def __del__(self):
        if self.req is not None:
            _api._release(self.req, self.keep)


def _error(req, status):
    m = lib.hcoll_request_error(req)
    return HcollError(status, m.decode(errors="replace") if m else _lib.STATUS_NAMES[status])


def wait(req):
    """Blocks until `req` completed; raises HcollError for a failed operation."""
    s = _api._wait_sliced(req)
    if s != _lib.SUCCESS:
        raise _error(req, s)


def synchronize(handle):
    """Waits for the handle's operation and returns its result (the request is then freed)."""
    req = handle.req
    if req is None:
        raise ValueError("handle was already synchronized")
    try:
        wait(req)
        return handle.finish(req) if handle.finish is not None else handle.result
    finally:
        handle.req = None
        handle.keep = None
        _api._free_request(req)


def poll(handle):
    """True once the operation completed (synchronize() then returns at once); raises
    HcollError if it failed."""
    if handle.req is None:
        return True
    s = lib.hcoll_test(handle.req)
    if s < 0:
        raise _error(handle.req, s)
    return s == _lib.SUCCESS


_cudart = None


def _copy_from_device(dst, src_ptr, nbytes):
    """Device-to-device copy of a runtime-owned CUDA output into a torch tensor, ordered on the
    current stream (cudaMemcpyAsync from the CUDA runtime torch loaded)."""
    global _cudart
    if _cudart is None:
        import glob
        import os
        libdir = os.path.join(os.path.dirname(torch.__file__), "lib")
        names = sorted(glob.glob(os.path.join(libdir, "libcudart*.so*")))
        names += ["libcudart.so.12", "libcudart.so.11.0", "libcudart.so"]
        for name in names:  # the one torch loaded is found first, then the system's
            try:
                _cudart = ctypes.CDLL(name)
                break
            except OSError:
                continue
        else:
            raise HcollError(_lib.ERR_UNSUPPORTED, "no CUDA runtime library (libcudart) to "
                             "copy a CUDA output with; tried " + ", ".join(names))
    stream = torch.cuda.current_stream(dst.device).cuda_stream
    rc = _cudart.cudaMemcpyAsync(ctypes.c_void_p(dst.data_ptr()), ctypes.c_void_p(src_ptr),
                                 ctypes.c_size_t(nbytes), 3, ctypes.c_void_p(stream))
    if rc != 0:
        raise HcollError(_lib.ERR_BACKEND, f"cudaMemcpyAsync failed ({rc})")
    torch.cuda.current_stream(dst.device).synchronize()  # the request frees src next


def _take_output(req, i, device):
    """Output i as a torch tensor: the tensor the runtime wrote into when hcoll.torch's
    allocator made it (no copy), else a copy of runtime-owned memory."""
    t = _lib.Tensor()
    s = lib.hcoll_request_output(req, i, ctypes.byref(t))
    if s != _lib.SUCCESS:
        _check(s)
    dtype = _TO_TORCH[t.dtype]
    outputs = _api._allocator
    if outputs is _OUTPUTS:
        out = outputs.adopt(t, dtype, _ELEMENT_SIZE[dtype])
        if out is not None:
            return out
    shape = tuple(t.shape[k] for k in range(t.ndim))
    out = torch.empty(shape, dtype=dtype, device=device)
    nbytes = out.numel() * _ELEMENT_SIZE[dtype]
    if nbytes:
        if out.is_cuda:
            _copy_from_device(out, t.data, nbytes)
        else:
            ctypes.memmove(out.data_ptr(), t.data, nbytes)
    return out


def _take_outputs(req, n, device):
    return [_take_output(req, i, device) for i in range(n)]


# The collectives whose outputs the runtime can allocate: C entry point, its caller-output
# (*_into) variant, and whether it takes (n, array) instead of one descriptor.
_OUTPUT_OPS = {
    "allgather": ("hcoll_allgather", "hcoll_allgather_into", False),
    "grouped_allgather": ("hcoll_grouped_allgather", "hcoll_grouped_allgather_into", True),
    "alltoall": ("hcoll_alltoall", None, False),
    "reducescatter": ("hcoll_reducescatter", "hcoll_reducescatter_into", False),
    "grouped_reducescatter": ("hcoll_grouped_reducescatter", "hcoll_grouped_reducescatter_into",
                              True),
}


def _has_into(fn_name):
    """True when this libhcoll and its binding (_lib.PROTOTYPES) have the *_into entry point."""
    return fn_name is not None and fn_name in _lib.PROTOTYPES and hasattr(lib, fn_name)


def submit_with_outputs(kind, comm_handle, name, srcs, extra, device, post=None,
                        out_shapes=None, gathered=False):
    """THE place where operations with outputs are submitted and their results fetched:
    `srcs` (contiguous tensors) go in, the outputs come back from synchronize() as a list of
    torch tensors on `device` (passed through `post(req, outs)` when given). `extra`: the C
    arguments after the input(s) (splits; op, prescale, postscale).

    When the caller knows every output's shape (`out_shapes`) and the library has caller-output
    collectives (hcoll_*_into), the outputs are allocated here and the runtime writes straight
    into them. Otherwise the runtime allocates them (through hcoll.torch's allocator: no copy;
    else they are copied out of its memory when the request completes). `gathered`: each output
    is most likely every rank's input stacked (allgather with equal dim 0 everywhere): host
    buffers of that size are allocated here first for the allocator to use (_outputs.expect)."""
    fn_name, into_name, grouped = _OUTPUT_OPS[kind]
    n = len(srcs)
    if out_shapes is not None and _has_into(into_name):
        outs = [torch.empty(shape, dtype=t.dtype, device=device)
                for t, shape in zip(srcs, out_shapes)]
        if grouped:
            din, dout = describe_all(srcs), describe_all(outs)
            args = (name, n, din, dout) + tuple(extra) + (None,)
        else:
            din, dout = ctypes.pointer(describe(srcs[0])), ctypes.pointer(describe(outs[0]))
            args = (name, din, dout) + tuple(extra) + (None,)
        return submit(getattr(lib, into_name), comm_handle, args, (srcs, outs, din, dout, extra),
                      None if post is None else (lambda req: post(req, outs)), outs)
    if grouped:
        descs = describe_all(srcs)
        args = (name, n, descs) + tuple(extra)
    else:
        descs = describe_cached(srcs[0])
        args = (name, descs) + tuple(extra)
    guesses = _expect_gathered(comm_handle, srcs) if gathered and device.type == "cpu" else None

    def finish(req):
        outs = _take_outputs(req, n, device)
        return outs if post is None else post(req, outs)
    return submit(getattr(lib, fn_name), comm_handle, args, (srcs, descs, extra, guesses), finish)


# From this size an allgather output is allocated before submitting (_outputs.expect): below it
# the guess (~1.5 us) cost more than it saved (2 ranks, 1 MiB outputs: 1.17x the C call either
# way; 512 KiB per rank went from 1.18-1.28x to 1.27-1.30x with it).
_EXPECT_FROM_BYTES = 2 << 20
_comm_sizes = {}  # communicator handle -> size (a communicator's size never changes)


def _expect_gathered(comm_handle, srcs):
    """Host buffers for outputs of size(comm) x each input, offered to the output allocator."""
    if _api._allocator is not _OUTPUTS:
        return None
    size = _comm_sizes.get(comm_handle)
    if size is None:
        out = ctypes.c_int()
        if lib.hcoll_comm_size(comm_handle, ctypes.byref(out)) != _lib.SUCCESS:
            return None
        size = _comm_sizes[comm_handle] = out.value
    guesses = []
    for t in srcs:
        nbytes = t.numel() * _ELEMENT_SIZE[t.dtype] * size
        if nbytes >= _EXPECT_FROM_BYTES:
            g = torch.empty(nbytes, dtype=torch.uint8)
            _OUTPUTS.expect(g)
            guesses.append(g)
    return guesses


def received_splits(req, i=0):
    p = ctypes.POINTER(ctypes.c_int64)()
    n = ctypes.c_int()
    _check(lib.hcoll_request_received_splits(req, i, ctypes.byref(p), ctypes.byref(n)))
    return [p[k] for k in range(n.value)]


def _start(fn, comm_handle, args):
    """Calls one collective entry point; returns its request. Synchronous errors raise."""
    if _api._orphans:
        _api._reap_orphans()
    req = _lib.request_t()
    s = fn(comm_handle, *args, ctypes.byref(req))
    if s < 0:
        _check(s)
    return req.value


def submit(fn, comm_handle, args, keep, finish, result=None):
    """Calls one collective entry point and wraps its request. Synchronous errors raise."""
    return Handle(_start(fn, comm_handle, args), keep, finish, result)


def run(fn, comm_handle, args, keep):
    """Submits one collective and waits for it (the blocking fast path: no Handle). `keep`: the
    tensors the descriptors in `args` point into. If the wait is interrupted (KeyboardInterrupt),
    the request is freed once its operation ended, `args` and `keep` referenced until then."""
    r = _start(fn, comm_handle, args)
    done = False
    try:
        wait(r)
        done = True
    finally:
        if done or lib.hcoll_test(r) != _lib.IN_PROGRESS:
            _api._free_request(r)
        else:
            _api._orphans.append((r, (args, keep)))
