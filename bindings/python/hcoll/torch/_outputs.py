"""The output allocator hcoll.torch gives the runtime (hcoll_init_params_t's alloc/free).

Outputs whose size only the negotiation decides (allgather's dim 0 depends on every rank) are
allocated by the runtime. With this allocator each such output IS the storage of a torch tensor,
allocated once the negotiated size is known, and the result is handed to the caller as that
tensor: the runtime writes straight into it and nothing is copied afterwards.

The allocator is called from hcoll's threads (ctypes takes the GIL for the call); the runtime
never calls it while this process's Python code waits for it with the GIL held, since every C
call releases the GIL. Buffers nobody adopted (a request freed without reading its outputs) are
dropped when the request is freed through the Python layer (hcoll._api._free_request), or by
the runtime's `free` for outputs it could not hand out. (Code that calls the raw C functions
through ctypes in the same process must free its requests with _free_request too.)
"""

import ctypes
import math
import threading
import weakref

import torch

from .. import _lib

lib = _lib.lib

# A ctypes callback entered on a thread Python has never seen creates a Python thread state and
# destroys it on return: ~8 us per call here, more than the rest of an allocating 512 KiB
# allgather's Python overhead. The runtime calls the allocator from its negotiation/progress
# threads, so on its first call on a thread the allocator takes one more GIL-state reference
# and never gives it back: that thread's state then lives until the interpreter ends (a few
# hundred bytes per runtime thread), and each later call only swaps the GIL (~0.1 us).
# threading.local is per thread state, so a new thread reusing an old thread's id is still
# seen as new.
_thread_state_kept = threading.local()
_CPU = torch.device("cpu")
_gil_state_ensure = ctypes.pythonapi.PyGILState_Ensure


def _keep_thread_state():
    if not getattr(_thread_state_kept, "kept", False):
        _gil_state_ensure()
        _thread_state_kept.kept = True


class TorchOutputs:
    """Runtime outputs as torch tensors' storage. `live`: data pointer -> uint8 tensor, for
    every buffer handed to the runtime and not yet adopted or dropped."""

    def __init__(self):
        self.live = {}
        # size -> weak references to host buffers their callers allocated for an output of that
        # size (expect()); the caller's operation holds each strongly while it is in flight.
        self.expected = {}
        # The ctypes callbacks must outlive every call the runtime makes: this object is kept
        # for the life of the process (hcoll.torch._core._OUTPUTS).
        self.c_alloc = _lib.alloc_fn(self._alloc)
        self.c_free = _lib.free_fn(self._free)

    def _alloc(self, ctx, device, stream, nbytes):
        try:
            _keep_thread_state()
            buf = self._take_expected(nbytes) if device < 0 and self.expected else None
            if buf is None:
                where = _CPU if device < 0 else torch.device("cuda", device)
                buf = torch.empty(nbytes or 1, dtype=torch.uint8, device=where)
        except BaseException:  # noqa: B902 (nothing may escape into C): the op fails NO_MEMORY
            return None
        ptr = buf.data_ptr()
        self.live[ptr] = buf
        return ptr

    def expect(self, buf):
        """`buf`, a host uint8 tensor its caller keeps alive while its operation is in flight, may
        become the output of the next host allocation of exactly its size.

        Allocated by the caller before it submits, an output comes from the caller's thread and
        before the runtime's own allocations for the operation, like any tensor the caller
        allocates. Allocated when the runtime asks, inside the wait, it came after them: glibc
        could then not put a freed output back in place (a 64-byte-aligned block needs more than
        the block just freed), the heap grew, and every 4 MiB output was page-faulted in afresh
        (1024 faults, allgather 1.5x the C call at 2 MiB per rank); from the runtime's thread
        (operations above the caller-progress size) it came from that thread's arena, which gives
        freed memory back to the kernel. A buffer the runtime does not take (the ranks' sizes
        differed) is simply dropped with its operation."""
        refs = self.expected.setdefault(buf.numel(), [])
        refs[:] = [r for r in refs if r() is not None]
        refs.append(weakref.ref(buf))

    def _take_expected(self, nbytes):
        refs = self.expected.get(nbytes)
        while refs:
            try:
                buf = refs.pop()()  # atomic under the GIL; another thread may empty it first
            except IndexError:
                break
            if buf is not None:
                return buf
        return None

    def _free(self, ctx, device, ptr):
        _keep_thread_state()
        self.live.pop(ptr, None)

    def adopt(self, t, dtype, element_size):
        """The torch tensor of output descriptor `t` (dtype `dtype`, `element_size` bytes per
        element), if this allocator made its memory; None otherwise. The buffer is no longer
        tracked: the caller owns it. (Called once per output on every allocating call: kept to
        the few torch calls it needs.)"""
        buf = self.live.pop(t.data, None) if t.data else None
        if buf is None:
            return None
        ndim = t.ndim
        shape = t.shape[:ndim]
        nbytes = math.prod(shape) * element_size
        if nbytes != buf.numel():  # the allocation is never smaller; larger only when empty
            buf = buf[:nbytes]
        out = buf.view(dtype)
        return out if ndim == 1 else out.view(shape)

    def release(self, req):
        """Drops the buffers of `req`'s outputs that nobody adopted (before the request is
        freed: its outputs are then unreachable)."""
        i = 0
        t = _lib.Tensor()
        while lib.hcoll_request_output(req, i, ctypes.byref(t)) == _lib.SUCCESS:
            if t.data:
                self.live.pop(t.data, None)
            i += 1
