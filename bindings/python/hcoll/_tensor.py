"""Turns numpy arrays and torch CPU tensors into hcoll_tensor_t descriptors and back.

A descriptor points at the array's own memory (no copy). The caller of a collective keeps the
array referenced until the request completes; Request does that for the user.
"""

import ctypes

import numpy as np

from . import _lib

_NUMPY_TO_HCOLL = {np.dtype(name): code for code, name in _lib.DTYPE_NAMES.items()
                   if name != "bfloat16"}
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


_TORCH_TO_HCOLL = None


def torch_dtypes():
    """torch dtype -> hcoll code, for the names of _lib.DTYPE_NAMES that this torch has (1.13 has
    no uint16)."""
    global _TORCH_TO_HCOLL
    if _TORCH_TO_HCOLL is None:
        t = _torch_module()
        _TORCH_TO_HCOLL = {getattr(t, name): code for code, name in _lib.DTYPE_NAMES.items()
                           if isinstance(getattr(t, name, None), t.dtype)}
    return _TORCH_TO_HCOLL


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
        dtype = torch_dtypes().get(x.dtype)
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
