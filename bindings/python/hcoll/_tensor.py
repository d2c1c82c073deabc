"""Turns numpy arrays and torch CPU tensors into hcoll_tensor_t descriptors and back.

A descriptor points at the array's own memory (no copy). The caller of a collective keeps the
array referenced until the request completes; Request does that for the user.
"""

import ctypes

import numpy as np

from . import _lib

_NUMPY_TO_HCOLL = {
    np.dtype(np.uint8): _lib.UINT8, np.dtype(np.int8): _lib.INT8,
    np.dtype(np.uint16): _lib.UINT16, np.dtype(np.int16): _lib.INT16,
    np.dtype(np.int32): _lib.INT32, np.dtype(np.int64): _lib.INT64,
    np.dtype(np.float16): _lib.FLOAT16, np.dtype(np.float32): _lib.FLOAT32,
    np.dtype(np.float64): _lib.FLOAT64, np.dtype(np.bool_): _lib.BOOL,
}
# numpy has no bfloat16: bfloat16 outputs come back as uint16 bit patterns (torch gets the type).
_HCOLL_TO_NUMPY = {v: k for k, v in _NUMPY_TO_HCOLL.items()}
_HCOLL_TO_NUMPY[_lib.BFLOAT16] = np.dtype(np.uint16)

_torch = None


def _torch_module():
    """torch is optional: imported only when a torch tensor is seen."""
    global _torch
    if _torch is None:
        import torch
        _torch = torch
    return _torch


def is_torch(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def _torch_dtypes():
    t = _torch_module()
    return {t.uint8: _lib.UINT8, t.int8: _lib.INT8, t.int16: _lib.INT16, t.int32: _lib.INT32,
            t.int64: _lib.INT64, t.float16: _lib.FLOAT16, t.bfloat16: _lib.BFLOAT16,
            t.float32: _lib.FLOAT32, t.float64: _lib.FLOAT64, t.bool: _lib.BOOL}


class Descriptor:
    """An hcoll_tensor_t plus the objects that must outlive it (the array, the shape array)."""

    def __init__(self, obj, data, dtype, shape):
        self.obj = obj
        self.shape = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        self.c = _lib.Tensor(data, dtype, len(shape), self.shape, _lib.DEVICE_HOST, None)


def describe(x, what="tensor", written=False):
    """Returns a Descriptor for a C-contiguous numpy array or torch CPU tensor. Anything else,
    a non-contiguous array or a dtype hcoll has no code for raises TypeError/ValueError:
    silently copying would break in-place semantics. `written`: hcoll writes the result into x
    (allreduce output, broadcast buffer), so a read-only numpy array is a ValueError, raised
    before anything is submitted (ctypes would otherwise hand its memory to C to overwrite)."""
    if is_torch(x):
        if x.device.type != "cpu":
            raise ValueError(f"{what}: only CPU torch tensors are supported, got {x.device}")
        if not x.is_contiguous():
            raise ValueError(f"{what}: torch tensor must be contiguous")
        dtype = _torch_dtypes().get(x.dtype)
        if dtype is None:
            raise TypeError(f"{what}: unsupported torch dtype {x.dtype}")
        data = x.data_ptr() if x.numel() > 0 else None
        return Descriptor(x, data, dtype, tuple(x.shape))
    if isinstance(x, np.ndarray):
        if not x.flags.c_contiguous:
            raise ValueError(f"{what}: numpy array must be C-contiguous")
        if written and not x.flags.writeable:
            raise ValueError(f"{what}: numpy array is read-only, but the result is written "
                             "into it")
        dtype = _NUMPY_TO_HCOLL.get(x.dtype)
        if dtype is None:
            raise TypeError(f"{what}: unsupported numpy dtype {x.dtype}")
        data = x.ctypes.data if x.size > 0 else None
        return Descriptor(x, data, dtype, x.shape)
    raise TypeError(f"{what}: expected a numpy.ndarray or torch.Tensor, got {type(x).__name__}")


def describe_all(xs, what="tensors", written=False):
    descs = [describe(x, f"{what}[{i}]", written) for i, x in enumerate(xs)]
    arr = (_lib.Tensor * max(len(descs), 1))(*[d.c for d in descs])
    return descs, arr


def to_numpy(t, owner=None):
    """An hcoll_tensor_t (runtime-owned memory) as a numpy array. With `owner` set the array is a
    view that keeps `owner` (the Request) alive, so the memory is not freed under it; without,
    the data are copied."""
    dtype = _HCOLL_TO_NUMPY[t.dtype]
    shape = tuple(t.shape[i] for i in range(t.ndim))
    count = 1
    for d in shape:
        count *= d
    nbytes = count * _lib.DTYPE_SIZES[t.dtype]
    if nbytes == 0 or not t.data:
        return np.zeros(shape, dtype=dtype)
    buf = (ctypes.c_uint8 * nbytes).from_address(t.data)
    arr = np.frombuffer(buf, dtype=dtype, count=count).reshape(shape)
    if owner is None:
        return arr.copy()
    buf._hcoll_owner = owner  # the numpy view's base chain now holds the request
    return arr


def to_torch(t):
    """A copy of an hcoll_tensor_t as a torch tensor of the matching dtype."""
    torch = _torch_module()
    arr = to_numpy(t)
    if t.dtype == _lib.BFLOAT16:
        return torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(arr)
