"""SyncBatchNorm: batch normalization over the whole batch of every rank of a process set.

Training forward: each rank computes its (count, mean, biased variance) per channel and ONE
grouped allgather brings every rank's to every rank; the global mean and variance are combined
from them (Chan's parallel formula, stable in float32). Training backward: ONE grouped allreduce
(SUM) of the two per-channel sums the input gradient needs (sum dy, sum dy*(x - mean)). The input
gradient is the exact gradient of the sum of every rank's loss; the weight and bias gradients stay
local (this rank's rows), so that averaging them over ranks (DistributedOptimizer) gives the same
update as one process on the concatenated batch. Running statistics follow torch exactly
(momentum, or a cumulative average when momentum is None; unbiased variance over the global
count; num_batches_tracked). Eval mode uses the running statistics without communication.
A rank may hold zero rows; the global count must exceed 1, as in torch.
"""

import itertools

import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from . import _core
from . import mpi_ops as ops

_ids = itertools.count()


def _stat_dtype(dtype):
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _affine(x, scale, shift):
    """x * scale + shift per channel in ONE pass: torch's fused eval-mode batch_norm kernel with
    mean 0, variance 1 and eps 0 (torch offers no CPU kernels for SyncBN's pieces)."""
    c = x.shape[1]
    return torch.batch_norm(x, scale, shift, torch.zeros(c, dtype=x.dtype, device=x.device),
                            torch.ones(c, dtype=x.dtype, device=x.device), False, 0.0, 0.0,
                            False)


def _fused(x, weight):
    """Whether the fused torch kernels apply: a float32/float64 input of a matching weight."""
    return x.dtype in (torch.float32, torch.float64) and x.numel() > 0 and (
        weight is None or weight.dtype == x.dtype)


class _SyncBatchNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps, factor, process_set, name):
        channels = x.shape[1]
        dims = [0] + list(range(2, x.dim()))
        shape = [1, channels] + [1] * (x.dim() - 2)
        sdt = _stat_dtype(x.dtype)
        xs = x if x.dtype == sdt else x.to(sdt)
        local = x.numel() // channels if channels else 0
        if local > 0:
            var_l, mean_l = torch.var_mean(xs, dim=dims, unbiased=False)
        else:  # an empty shard contributes count 0 (and finite zeros, never NaN)
            var_l = mean_l = torch.zeros(channels, dtype=sdt, device=x.device)
        count = torch.full((1,), float(local), dtype=sdt, device=x.device)
        size = _core.comm_size(process_set)
        # One row per rank: the output shapes are known, so the runtime may write into tensors
        # allocated here (caller-output collectives) instead of its own memory.
        counts, means, vars_ = _core.synchronize(_core.submit_with_outputs(
            "grouped_allgather", _core.resolve(process_set), (name + ".stats").encode(),
            [count, mean_l.view(1, channels).contiguous(), var_l.view(1, channels).contiguous()],
            (), x.device, None, [(size,), (size, channels), (size, channels)]))
        n = float(counts.sum())
        if n <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input "
                             f"size {list(x.shape)} and {int(n)} values over all ranks")
        w = (counts / n)[:, None]
        mean = (w * means).sum(0)
        var = (w * (vars_ + (means - mean) ** 2)).sum(0)  # biased, as normalization uses
        invstd = torch.rsqrt(var + eps)
        if running_mean is not None:
            with torch.no_grad():
                running_mean.mul_(1 - factor).add_(mean.to(running_mean.dtype), alpha=factor)
                running_var.mul_(1 - factor).add_((var * (n / (n - 1))).to(running_var.dtype),
                                                  alpha=factor)
        if _fused(x, weight) and (bias is None or bias.dtype == x.dtype):
            # torch's own normalization kernel, with the global statistics as "running" ones.
            y = torch.batch_norm(x, weight, bias, mean, var, False, 0.0, eps, False)
        else:
            scale = invstd if weight is None else invstd * weight.to(sdt)
            y = (xs - mean.view(shape)) * scale.view(shape)
            if bias is not None:
                y = y + bias.to(sdt).view(shape)
            y = y.to(x.dtype)
        ctx.save_for_backward(x, weight, mean, invstd)
        ctx.info = (n, process_set, name, bias is not None)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, mean, invstd = ctx.saved_tensors
        n, process_set, name, has_bias = ctx.info
        channels = x.shape[1]
        dims = [0] + list(range(2, x.dim()))
        shape = [1, channels] + [1] * (x.dim() - 2)
        sdt = _stat_dtype(x.dtype)
        fused = _fused(x, weight) and dy.dtype == x.dtype
        if fused:
            # One pass for both sums: batch norm's own backward reduction, with the global mean
            # and an invstd of 1 (its grad_weight is then sum(dy * (x - mean))).
            _, sum_dy_xmu, sum_dy = torch.ops.aten.native_batch_norm_backward(
                dy, x, weight, None, None, mean, torch.ones_like(invstd), True, 0.0,
                [False, True, True])
        else:
            xs = x if x.dtype == sdt else x.to(sdt)
            dys = dy if dy.dtype == sdt else dy.to(sdt)
            xmu = xs - mean.view(shape)
            sum_dy = dys.sum(dims)
            sum_dy_xmu = (dys * xmu).sum(dims)
        grad_x = grad_w = grad_b = None
        if weight is not None and ctx.needs_input_grad[1]:
            grad_w = (sum_dy_xmu * invstd).to(weight.dtype)
        if has_bias and ctx.needs_input_grad[2]:
            grad_b = sum_dy.to(weight.dtype if weight is not None else x.dtype)
        if ctx.needs_input_grad[0]:
            g_dy, g_dy_xmu = _core.synchronize(ops.grouped_allreduce_async(
                [sum_dy, sum_dy_xmu], None, name + ".grads", ops.Sum, 1.0, 1.0, process_set))
            scale = invstd if weight is None else invstd * weight.to(sdt)
            if fused:
                # dx = scale * (dy - g_dy/n - (x - mean) * invstd^2 * g_dy_xmu/n), as
                # x * p + q (one fused pass) plus dy * scale (one more).
                p = -scale * invstd * invstd * g_dy_xmu / n
                q = -scale * g_dy / n - p * mean
                grad_x = _affine(x, p, q).addcmul_(dy, scale.view(shape))
            else:
                grad_x = (dys - (g_dy / n).view(shape)
                          - xmu * (invstd * invstd * g_dy_xmu / n).view(shape)) * scale.view(shape)
                grad_x = grad_x.to(x.dtype)
        return grad_x, grad_w, grad_b, None, None, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """A drop-in for nn.BatchNorm1d/2d/3d (input (N, C), (N, C, L), (N, C, H, W) or
    (N, C, D, H, W)) whose training statistics span every rank of `comm` (a ProcessSet or
    hcoll.Comm; None = the global set). Operations are named per module (construction order),
    so every rank must build its SyncBatchNorm modules in the same order."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, comm=None,
                 process_set=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.process_set = process_set if process_set is not None else comm
        self._hcoll_name = f"syncbn.{next(_ids)}"

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            factor = (1.0 / float(self.num_batches_tracked) if self.momentum is None
                      else self.momentum)
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        if not (use_batch and self.training):
            # Eval (or eval without running stats, like torch's SyncBatchNorm): no communication.
            return F.batch_norm(input, self.running_mean if not use_batch else None,
                                self.running_var if not use_batch else None, self.weight,
                                self.bias, use_batch, factor, self.eps)
        track = self.track_running_stats
        return _SyncBatchNormFn.apply(input, self.weight, self.bias,
                                      self.running_mean if track else None,
                                      self.running_var if track else None,
                                      self.eps, factor, self.process_set, self._hcoll_name)

    @classmethod
    def convert_sync_batchnorm(cls, module, comm=None, process_set=None):
        """Returns `module` with every BatchNorm1d/2d/3d replaced by a SyncBatchNorm over
        `comm` (parameters, buffers, training flag and requires_grad carried over)."""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, cls):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, comm=comm, process_set=process_set)
            if module.affine:
                with torch.no_grad():
                    out.weight = module.weight
                    out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
            if hasattr(module, "qconfig"):
                out.qconfig = module.qconfig
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, comm, process_set))
        return out
