"""Gradient compression for allreduce, Horovod's interface: compress(tensor) -> (tensor, ctx),
decompress(tensor, ctx) -> tensor."""

import torch


class NoneCompressor:
    """No compression: the tensor is reduced as it is."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor:
    """Floating-point tensors travel as float16 (hcoll accumulates float16 in float32) and come
    back in their own dtype; other dtypes are left alone."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating_point and tensor.dtype != torch.float16:
            return tensor.to(torch.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tensor.to(ctx)


class Compression:
    """Compression.none and Compression.fp16, as in horovod.torch."""
    none = NoneCompressor
    fp16 = FP16Compressor
