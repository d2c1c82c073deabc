"""The Python face of the C ABI: HcollError, lifecycle, Comm and Request."""

import atexit
import ctypes
import os
import sys
import time

from . import _lib
from . import _mpi_check
from . import _tensor

lib = _lib.lib


class HcollError(RuntimeError):
    """A failed hcoll call. `status` is the hcoll_status_t value (negative), `status_name` its
    name ("ERR_MISMATCH", ...), `message` the library's detailed message.

    A call refused for its arguments (ERR_INVALID_ARGUMENT, ERR_DUPLICATE_NAME) raises
    HcollArgumentError, which is also a ValueError: what Horovod raises for the same mistakes."""

    def __new__(cls, status=None, message="", *args):
        if cls is HcollError and status in _ARGUMENT_STATUSES:
            cls = HcollArgumentError
        return super().__new__(cls, status, message, *args)

    def __init__(self, status, message):
        self.status = status
        self.status_name = _lib.STATUS_NAMES.get(status, str(status))
        self.message = message
        super().__init__(f"{self.status_name} ({status}): {message}")


class HcollArgumentError(HcollError, ValueError):
    """An HcollError for a call refused for its arguments (bad value, duplicate name)."""


_ARGUMENT_STATUSES = (_lib.ERR_INVALID_ARGUMENT, _lib.ERR_DUPLICATE_NAME)


def _check(status, message=None):
    """Raises HcollError for a negative status; returns the status otherwise."""
    if status < 0:
        if message is None:
            message = (lib.hcoll_last_error() or b"").decode(errors="replace")
        raise HcollError(status, message)
    return status


def _name(name):
    """The C string for an operation name. A NUL would end it early in C, so two different
    Python names could reach the runtime as one (a false DUPLICATE_NAME, or a cross-rank match of
    operations the caller kept apart): refused here, where the full name is still known."""
    if name is None:
        return None
    b = name if isinstance(name, bytes) else name.encode()
    if b"\0" in b:
        raise ValueError(f"operation name {name!r} contains a NUL byte")
    return b


def _fint(mpi_comm):
    """An mpi4py communicator (anything with py2f()) or a Fortran handle int."""
    return int(mpi_comm.py2f()) if hasattr(mpi_comm, "py2f") else int(mpi_comm)


# ------------------------------------------------------------------------------------------------
# Lifecycle and information
# ------------------------------------------------------------------------------------------------

def _check_single_mpi():
    """Raises before any MPI call when the process has loaded another MPI than the one this
    hcoll was built against since hcoll was imported (the import itself checked what was loaded
    before it: _lib, _mpi_check): their symbols would mix and MPI would crash."""
    built = mpi_version()
    other = _mpi_check.foreign_mpi(_mpi_check.family_of(built))
    if other is not None:
        raise HcollError(_lib.ERR_UNSUPPORTED,
                         _mpi_check.mixed_message(lib.hcoll_path, built, *other))


def mpi_version():
    """The MPI this library was built against, e.g. "MPICH 4.0.2"."""
    return lib.hcoll_mpi_version().decode()


def abort(reason=""):
    """Ends the whole job (hcoll_abort): logs `reason`, tells the peers, MPI_Abort. Never
    returns."""
    sys.stdout.flush()
    sys.stderr.flush()
    lib.hcoll_abort(str(reason).encode(errors="replace"))


def abort_on_exception():
    """Opt-in: an uncaught exception in this process aborts the whole job at once (through
    hcoll_abort, after printing the traceback), as `python -m mpi4py` does, instead of leaving
    the peers to notice that this rank left. Returns the previous sys.excepthook."""
    previous = sys.excepthook

    def hook(kind, value, tb):
        previous(kind, value, tb)
        if issubclass(kind, (KeyboardInterrupt, SystemExit)) and not is_initialized():
            return
        abort(f"uncaught {kind.__name__}: {value}")

    sys.excepthook = hook
    return previous


def initialize(mpi_comm=None, backend=None, local_ranks=0, allocator=None):
    """Initializes hcoll (collective). `mpi_comm`: the world as an mpi4py communicator or a
    Fortran handle; None = MPI_COMM_WORLD. Initializes MPI unless it (or mpi4py) already did.
    Raises HcollError(ERR_UNSUPPORTED) before touching MPI if the process has loaded a different
    MPI than the one this hcoll was built against.
    `backend`: "mpi" or "loopback" (None: HCOLL_BACKEND, else "mpi"); `local_ranks`: how many
    ranks this process hosts (loopback: one thread per rank, each using `world(rank)`).
    `allocator`: an object with `c_alloc`/`c_free` (ctypes alloc_fn/free_fn), `live` (the
    buffers it handed out and nobody took) and `release(req)`; the runtime allocates every
    output through it (hcoll.torch passes one so its outputs are torch tensors)."""
    global _allocator
    _check_single_mpi()
    params = _lib.InitParams()
    if mpi_comm is not None:
        params.mask |= _lib.INIT_FIELD_MPI_COMM
        params.mpi_comm = _fint(mpi_comm)
    if backend is not None or local_ranks:
        params.mask |= _lib.INIT_FIELD_BACKEND
        params.backend = backend.encode() if backend is not None else None
        params.local_ranks = int(local_ranks)
    if allocator is not None:
        params.mask |= _lib.INIT_FIELD_ALLOCATOR
        params.alloc, params.free = allocator.c_alloc, allocator.c_free
    _check(lib.hcoll_initialize(ctypes.byref(params)))
    _allocator = allocator
    if allocator is not None and not _shutdown_at_exit.registered:
        # The runtime calls the allocator (Python) from its threads: shut it down while the
        # interpreter still runs, not only from the library's own exit handler after it.
        atexit.register(_shutdown_at_exit)
        _shutdown_at_exit.registered = True


def _shutdown_at_exit():
    if _allocator is not None and lib.hcoll_is_initialized():
        try:
            shutdown()
        except Exception:  # noqa: BLE001 (exit goes on; the library's handler runs later anyway)
            pass


_shutdown_at_exit.registered = False


def shutdown():
    """Shuts hcoll down. Comm handles become invalid; requests stay valid (an operation still
    pending reports SHUT_DOWN from wait()/test())."""
    _check(lib.hcoll_shutdown())
    _reap_orphans()  # every operation has ended (SHUT_DOWN at worst): free the dropped ones


def is_initialized():
    return bool(lib.hcoll_is_initialized())


def version():
    v = [ctypes.c_int() for _ in range(3)]
    _check(lib.hcoll_version(*[ctypes.byref(x) for x in v]))
    return tuple(x.value for x in v)


def version_string():
    """The loaded library's version, "major.minor.patch"."""
    return lib.hcoll_version_string().decode()


def status_string(status):
    return lib.hcoll_status_string(status).decode()


def last_error():
    return lib.hcoll_last_error().decode(errors="replace")


def nccl_built():
    return bool(lib.hcoll_nccl_built())


def nccl_version():
    """NCCL's version code this library was built against (e.g. 22809 for 2.28.9), else 0."""
    return int(lib.hcoll_nccl_version())


def start_timeline(path):
    """Starts writing this process's timeline to `path` (HCOLL_TIMELINE's file names); a timeline
    being written is finished first. Local to this process."""
    _check(lib.hcoll_start_timeline(os.fsencode(path)))


def stop_timeline():
    """Finishes and closes the timeline file (nothing happens if none is being written)."""
    _check(lib.hcoll_stop_timeline())


# ------------------------------------------------------------------------------------------------
# Requests
# ------------------------------------------------------------------------------------------------

# Requests dropped while still in flight: (handle, arrays) kept until the operation completes,
# because the runtime still reads and writes those arrays. Reaped on every submission/shutdown.
_orphans = []

# The output allocator given to initialize() (hcoll.torch's), or None.
_allocator = None


def _free_request(handle):
    """hcoll_request_free, first dropping the request's outputs that a Python allocator made and
    nobody took (with a user allocator the runtime never frees outputs it handed out)."""
    a = _allocator
    if a is not None and a.live:
        a.release(handle)
    lib.hcoll_request_free(handle)


def _reap_orphans():
    # Only the entries there now: hcoll_test releases the GIL, and a __del__ elsewhere (or on the
    # runtime's thread, in the output allocator) may append meanwhile; those must not be dropped.
    n = len(_orphans)
    still = []
    for handle, keep in _orphans[:n]:
        if lib.hcoll_test(handle) == _lib.IN_PROGRESS:
            still.append((handle, keep))
        else:
            _free_request(handle)
    _orphans[:n] = still


def _release(handle, keep):
    """Frees request `handle` that nothing in Python refers to any more: at once if its operation
    ended, else once it does (_orphans, reaped later), `keep` (what it reads and writes) staying
    referenced until then. Called from __del__ (the Request's, torch's Handle's)."""
    try:
        if lib.hcoll_test(handle) == _lib.IN_PROGRESS:
            _orphans.append((handle, keep))
        else:
            _free_request(handle)
    except Exception:  # interpreter teardown: the library may already be gone
        pass


# hcoll_wait blocks in C for at most this long at a time, so that Ctrl-C (KeyboardInterrupt,
# raised by Python between two slices) interrupts a wait promptly.
_WAIT_SLICE_S = 0.05


def _wait_sliced(handle, deadline=None):
    """hcoll_wait on `handle` in slices until the operation ended or time.monotonic() passed
    `deadline` (None: never). Returns the final status, IN_PROGRESS if the deadline came first."""
    if deadline is None:  # the common case, first slice: no clock reads
        s = lib.hcoll_wait(handle, _WAIT_SLICE_S)
        if s != _lib.IN_PROGRESS and s != _lib.ERR_TIMEOUT:
            return s
    while True:
        left = _WAIT_SLICE_S if deadline is None else min(
            _WAIT_SLICE_S, max(0.0, deadline - time.monotonic()))
        s = lib.hcoll_wait(handle, left)
        # A slice that ran out: IN_PROGRESS (or TIMEOUT from libraries older than the
        # IN_PROGRESS contract, told apart by hcoll_test).
        if s == _lib.IN_PROGRESS or (s == _lib.ERR_TIMEOUT and
                                     lib.hcoll_test(handle) == _lib.IN_PROGRESS):
            if deadline is not None and time.monotonic() >= deadline:
                return _lib.IN_PROGRESS
            continue
        return s


class _Handle:
    """Owns one hcoll_request_t and the arrays its operation uses. Released when the last holder
    (the Request, or a numpy view of one of its outputs) goes away, so a view never outlives the
    memory it shows and an in-flight operation never loses its arrays."""

    def __init__(self, value, keep):
        self.value = value
        self.keep = keep

    def __del__(self):
        _release(self.value, self.keep)


class Request:
    """One in-flight operation. Holds references to every array the operation reads or writes
    until it is freed, so the memory cannot go away under the runtime. Freed by free(), by a
    `with` block or by garbage collection (if still in flight, the operation finishes in the
    background and its outputs are discarded)."""

    def __init__(self, handle, keep, torch_outputs, in_place=None):
        self._owner = _Handle(handle, keep)  # keep: descriptors (arrays, shapes) in use
        self._handle = handle
        self._torch = torch_outputs      # outputs come back as torch tensors
        self._in_place = in_place        # what wait() returns for allreduce/broadcast

    def _h(self):
        if self._handle is None:
            raise HcollError(_lib.ERR_INVALID_HANDLE, "request was freed")
        return self._handle

    def test(self):
        """True once complete (raises HcollError if the operation failed), False while in flight."""
        return _check(lib.hcoll_test(self._h()), self._message()) == _lib.SUCCESS

    def wait(self, timeout=None):
        """Blocks until complete (timeout None = forever). Returns True when complete, False when
        `timeout` seconds passed first (the request stays valid); raises HcollError on failure.
        Interruptible: KeyboardInterrupt arrives within ~50 ms of SIGINT, the request still
        valid."""
        h = self._h()
        deadline = None if timeout is None else time.monotonic() + max(0.0, float(timeout))
        s = _wait_sliced(h, deadline)
        if s == _lib.IN_PROGRESS:
            return False
        _check(s, self._message() if s < 0 else None)
        return True

    def _message(self):
        m = lib.hcoll_request_error(self._h()) if self._handle is not None else None
        return None if not m else m.decode(errors="replace")

    @property
    def error(self):
        """The operation's error message ("" while in flight or on success)."""
        return self._message() or ""

    def output(self, i=0, copy=True):
        """Output i of a completed allgather/alltoall/reducescatter/join as a numpy array (or a
        torch tensor when the inputs were torch tensors). copy=True (default) returns an array
        the caller owns. copy=False returns a numpy view of the runtime's memory that keeps this
        request alive (its free() is then deferred until the view is gone); no torch view."""
        t = _lib.Tensor()
        _check(lib.hcoll_request_output(self._h(), i, ctypes.byref(t)))
        if self._torch:
            return _tensor.to_torch(t)
        return _tensor.to_numpy(t, owner=None if copy else self._owner)

    def outputs(self, copy=True):
        """Every output: the group's outputs in member order (waits first)."""
        self.wait()
        result = []
        i = 0
        while True:
            t = _lib.Tensor()
            s = lib.hcoll_request_output(self._h(), i, ctypes.byref(t))
            if s == _lib.ERR_INVALID_ARGUMENT:
                return result
            _check(s)
            result.append(self.output(i, copy))
            i += 1

    def received_splits(self, i=0):
        """Rows received from each rank by a completed alltoall, as a list of ints."""
        p = ctypes.POINTER(ctypes.c_int64)()
        n = ctypes.c_int()
        _check(lib.hcoll_request_received_splits(self._h(), i, ctypes.byref(p), ctypes.byref(n)))
        return [p[k] for k in range(n.value)]

    def result(self):
        """Waits, then returns what the operation produced: the in-place tensor(s) for
        allreduce/broadcast, output 0 (or the list for a group) otherwise, () for barrier."""
        self.wait()
        if self._in_place is not None:
            return self._in_place
        outs = self.outputs()
        return outs[0] if len(outs) == 1 and not getattr(self, "_grouped", False) else outs

    def free(self):
        """Releases the request. Deferred while a copy=False output view is alive; an in-flight
        operation finishes in the background, its arrays kept referenced until it has."""
        self._handle = None
        self._owner = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()


# ------------------------------------------------------------------------------------------------
# Communicators
# ------------------------------------------------------------------------------------------------

def _any_torch(xs):
    return any(_tensor.is_torch(x) for x in xs)


class Comm:
    """A communicator handle. Creation and destroy() are collective over the parent's members.
    Comm objects are not destroyed by garbage collection (that would need every rank to agree);
    call destroy() or let shutdown() release them."""

    def __init__(self, handle, owned=True):
        self._handle = handle
        self._owned = owned

    @staticmethod
    def _make(fn, *args):
        out = _lib.comm_t()
        _check(fn(*args, ctypes.byref(out)))
        return Comm(out.value) if out.value else None

    def _h(self):
        if self._handle is None:
            raise HcollError(_lib.ERR_INVALID_HANDLE, "communicator was destroyed")
        return self._handle

    def _int(self, fn):
        v = ctypes.c_int()
        _check(fn(self._h(), ctypes.byref(v)))
        return v.value

    rank = property(lambda self: self._int(lib.hcoll_comm_rank))
    size = property(lambda self: self._int(lib.hcoll_comm_size))
    local_rank = property(lambda self: self._int(lib.hcoll_comm_local_rank))
    local_size = property(lambda self: self._int(lib.hcoll_comm_local_size))

    def stats(self):
        """This rank's counters as a dict (see hcoll_comm_stats_t)."""
        s = _lib.CommStats(mask=_lib.COMM_STATS_FIELD_ALL)
        _check(lib.hcoll_comm_stats(self._h(), ctypes.byref(s)))
        return {f: getattr(s, f) for f in _lib.STATS_FIELDS}

    def set_timeout(self, seconds):
        """Collective: this communicator's stall shutdown time (0 = never). An operation some
        members never submit, or a collective that does not complete, within it fails with
        ERR_TIMEOUT on every member. All members must pass the same value (else ERR_MISMATCH)."""
        _check(lib.hcoll_comm_set_timeout(self._h(), float(seconds)))

    def split(self, color, key=0):
        """MPI_Comm_split semantics; color None/UNDEFINED (or negative) returns None."""
        return Comm._make(lib.hcoll_comm_split, self._h(),
                          _lib.UNDEFINED if color is None else int(color), int(key))

    def create(self, ranks):
        """A communicator of these parent ranks (same list on every rank); None for non-members."""
        ranks = [int(r) for r in ranks]
        arr = (ctypes.c_int * max(len(ranks), 1))(*ranks)
        return Comm._make(lib.hcoll_comm_create, self._h(), arr, len(ranks))

    @staticmethod
    def from_mpi(mpi_comm):
        """Wraps a duplicate of an mpi4py communicator (or a Fortran handle). Collective."""
        return Comm._make(lib.hcoll_comm_from_mpi, _fint(mpi_comm))

    def destroy(self):
        """Drains and destroys the communicator (collective)."""
        _check(lib.hcoll_comm_destroy(self._h()))
        self._handle = None

    # -------------------------------------------------------------------------------------------
    # Collectives: each returns a Request at once. Arrays are referenced by the request until it
    # is freed; do not modify them before it completes.
    # -------------------------------------------------------------------------------------------

    def _submit(self, fn, args, keep, torch_outputs, in_place=None, grouped=False):
        if _orphans:
            _reap_orphans()
        req = _lib.request_t()
        _check(fn(self._h(), *args, ctypes.byref(req)))
        r = Request(req.value, keep, torch_outputs, in_place)
        r._grouped = grouped
        return r

    def allreduce(self, x, out=None, op=_lib.SUM, name=None, prescale=1.0, postscale=1.0):
        """Reduces x over all ranks into out (default: in place into x)."""
        din = _tensor.describe(x, "x", written=out is None)
        dout = din if out is None else _tensor.describe(out, "out", written=True)
        return self._submit(lib.hcoll_allreduce,
                            [_name(name), ctypes.byref(din.c), ctypes.byref(dout.c), op,
                             prescale, postscale],
                            [din, dout], False, x if out is None else out)

    def grouped_allreduce(self, xs, outs=None, op=_lib.SUM, name=None, prescale=1.0,
                          postscale=1.0):
        xs = list(xs)
        din, ain = _tensor.describe_all(xs, "xs", written=outs is None)
        dout, aout = ((din, ain) if outs is None
                      else _tensor.describe_all(list(outs), "outs", written=True))
        return self._submit(lib.hcoll_grouped_allreduce,
                            [_name(name), len(xs), ain, aout, op, prescale, postscale],
                            [din, ain, dout, aout], False, xs if outs is None else list(outs),
                            grouped=True)

    # out=/outs=: the caller's array(s) receive the result through the C *_into calls (no copy,
    # no runtime-owned output); result() then returns them. Their dim 0 is checked by the
    # negotiation: a wrong one raises ERR_MISMATCH from wait() on every rank.

    def allgather(self, x, name=None, out=None):
        d = _tensor.describe(x, "x")
        if out is not None:
            do = _tensor.describe(out, "out", written=True)
            return self._submit(lib.hcoll_allgather_into,
                                [_name(name), ctypes.byref(d.c), ctypes.byref(do.c), None],
                                [d, do], False, out)
        return self._submit(lib.hcoll_allgather, [_name(name), ctypes.byref(d.c)], [d],
                            _tensor.is_torch(x))

    def grouped_allgather(self, xs, name=None, outs=None):
        xs = list(xs)
        d, a = _tensor.describe_all(xs, "xs")
        if outs is not None:
            outs = list(outs)
            do, ao = _tensor.describe_all(outs, "outs", written=True)
            return self._submit(lib.hcoll_grouped_allgather_into,
                                [_name(name), len(xs), a, ao, None], [d, a, do, ao], False, outs,
                                grouped=True)
        return self._submit(lib.hcoll_grouped_allgather, [_name(name), len(xs), a], [d, a],
                            _any_torch(xs), grouped=True)

    def broadcast(self, x, root=0, name=None):
        """Replaces x with root's x, in place."""
        d = _tensor.describe(x, "x", written=True)
        return self._submit(lib.hcoll_broadcast, [_name(name), ctypes.byref(d.c), int(root)],
                            [d], False, x)

    def grouped_broadcast(self, xs, root=0, name=None):
        xs = list(xs)
        d, a = _tensor.describe_all(xs, "xs", written=True)
        return self._submit(lib.hcoll_grouped_broadcast, [_name(name), len(xs), a, int(root)],
                            [d, a], False, xs, grouped=True)

    def alltoall(self, x, splits=None, name=None, out=None):
        """Sends splits[i] rows of x to rank i (None = even); output 0 is what arrived. With
        `out`, the rows arrive in out (dim 0 >= the rows received; the rest is untouched) and
        result() returns out; received_splits() says how many came from each rank."""
        d = _tensor.describe(x, "x")
        sp = None
        if splits is not None:
            splits = [int(s) for s in splits]
            # The C API reads exactly `size` entries and cannot see the array's length.
            size = self.size
            if len(splits) != size:
                raise ValueError(f"splits has {len(splits)} entries; the communicator has "
                                 f"{size} ranks and needs one entry per rank")
            sp = (ctypes.c_int64 * size)(*splits)
        if out is not None:
            do = _tensor.describe(out, "out", written=True)
            return self._submit(lib.hcoll_alltoall_into,
                                [_name(name), ctypes.byref(d.c), sp, ctypes.byref(do.c), None],
                                [d, sp, do], False, out)
        return self._submit(lib.hcoll_alltoall, [_name(name), ctypes.byref(d.c), sp], [d, sp],
                            _tensor.is_torch(x))

    def reducescatter(self, x, op=_lib.SUM, name=None, prescale=1.0, postscale=1.0, out=None):
        d = _tensor.describe(x, "x")
        if out is not None:
            do = _tensor.describe(out, "out", written=True)
            return self._submit(lib.hcoll_reducescatter_into,
                                [_name(name), ctypes.byref(d.c), ctypes.byref(do.c), op,
                                 prescale, postscale, None], [d, do], False, out)
        return self._submit(lib.hcoll_reducescatter,
                            [_name(name), ctypes.byref(d.c), op, prescale, postscale], [d],
                            _tensor.is_torch(x))

    def grouped_reducescatter(self, xs, op=_lib.SUM, name=None, prescale=1.0, postscale=1.0,
                              outs=None):
        xs = list(xs)
        d, a = _tensor.describe_all(xs, "xs")
        if outs is not None:
            outs = list(outs)
            do, ao = _tensor.describe_all(outs, "outs", written=True)
            return self._submit(lib.hcoll_grouped_reducescatter_into,
                                [_name(name), len(xs), a, ao, op, prescale, postscale, None],
                                [d, a, do, ao], False, outs, grouped=True)
        return self._submit(lib.hcoll_grouped_reducescatter,
                            [_name(name), len(xs), a, op, prescale, postscale], [d, a],
                            _any_torch(xs), grouped=True)

    def barrier(self):
        r = self._submit(lib.hcoll_barrier, [], [], False)
        r._in_place = ()
        return r

    def join(self):
        """Completes when every rank joined; result() is the rank that joined last."""
        return self._submit(lib.hcoll_join, [], [], False)


def world(rank=None):
    """The world communicator (owned by the runtime; not destroyable). `rank`: the world as seen
    by that rank, which this process must host (loopback hosts every rank, one thread each)."""
    out = _lib.comm_t()
    if rank is None:
        _check(lib.hcoll_comm_world(ctypes.byref(out)))
    else:
        _check(lib.hcoll_comm_world_of(int(rank), ctypes.byref(out)))
    return Comm(out.value, owned=False)
