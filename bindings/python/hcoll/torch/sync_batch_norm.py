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


def _fused(x, weight):
    """Whether the fused torch kernels apply: a float32/float64 input of a matching weight."""
    return x.dtype in (torch.float32, torch.float64) and x.numel() > 0 and (
        weight is None or weight.dtype == x.dtype)


class _Exchange:
    """One SyncBatchNorm module's two collectives, on buffers and descriptors built once per
    (process set, channels, dtype, device) and reused every step, so that a step costs a copy
    into the input rows, one C call and one wait:

      forward:  ONE grouped allgather (count, mean, biased variance) into caller-owned outputs
                (hcoll_grouped_allgather_into; the runtime writes straight into them);
      backward: ONE grouped allreduce (SUM) of (sum dy, sum dy*(x - mean)), in place.

    The outputs are overwritten by the next step: callers consume them before returning. CUDA
    descriptors carry the current stream, so they are rebuilt per call there."""

    __slots__ = ("name", "gather_name", "reduce_name", "key", "row", "count", "stats",
                 "members", "outs", "din", "dout", "red", "sums", "dred")

    def __init__(self, name):
        self.name = name
        self.gather_name = (name + ".stats").encode()
        self.reduce_name = (name + ".grads").encode()
        self.key = None

    def __reduce__(self):
        # Copies (copy.deepcopy, pickling a model) start afresh: descriptors point at this
        # object's buffers, and ctypes arrays do not pickle.
        return (_Exchange, (self.name,))

    def _setup(self, key, size, channels, dtype, device):
        # Inputs: one row [count | mean | var] whose three pieces are the group's members.
        self.row = torch.empty(1 + 2 * channels, dtype=dtype, device=device)
        self.count = self.row[:1]
        self.stats = self.row[1:]
        members = [self.count, self.row[1:1 + channels].view(1, channels),
                   self.row[1 + channels:].view(1, channels)]
        self.outs = [torch.empty(size, dtype=dtype, device=device),
                     torch.empty(size, channels, dtype=dtype, device=device),
                     torch.empty(size, channels, dtype=dtype, device=device)]
        self.red = torch.empty(2 * channels, dtype=dtype, device=device)
        self.sums = [self.red[:channels], self.red[channels:]]
        self.din = _core.describe_all(members)
        self.dout = _core.describe_all(self.outs)
        self.dred = _core.describe_all(self.sums)
        self.members = members
        self.key = key

    def gather(self, process_set, local, mean, var):
        """Every rank's (count, mean, var): (counts (size,), means (size, C), vars (size, C))."""
        handle = _core.resolve(process_set)
        size = _core.comm_size(process_set)
        channels = mean.shape[0]
        key = (handle, size, channels, mean.dtype, mean.device)
        if key != self.key:
            self._setup(key, size, channels, mean.dtype, mean.device)
        self.count.fill_(local)
        torch.cat((mean, var), out=self.stats)
        din, dout = self.din, self.dout
        if self.row.is_cuda:
            din = _core.describe_all(self.members)
            dout = _core.describe_all(self.outs)
        _core.run(_core.lib.hcoll_grouped_allgather_into, handle,
                  (self.gather_name, 3, din, dout, None), (self.row, self.outs))
        return self.outs

    def allreduce(self, process_set, sum_dy, sum_dy_xmu):
        """(sum dy, sum dy*(x - mean)) summed over the process set (views of one buffer)."""
        handle = _core.resolve(process_set)
        size = _core.comm_size(process_set)
        key = (handle, size, sum_dy.shape[0], sum_dy.dtype, sum_dy.device)
        if key != self.key:
            self._setup(key, size, sum_dy.shape[0], sum_dy.dtype, sum_dy.device)
        torch.cat((sum_dy, sum_dy_xmu), out=self.red)
        dred = self.dred if not self.red.is_cuda else _core.describe_all(self.sums)
        _core.run(_core.lib.hcoll_grouped_allreduce, handle,
                  (self.reduce_name, 2, dred, dred, ops.Sum, 1.0, 1.0), self.red)
        return self.sums


def _local_stats(x, xs, channels, sdt):
    """This rank's per-channel (mean, biased variance) in stats dtype `sdt`."""
    if x.numel() == 0:  # an empty shard contributes count 0 (and finite zeros, never NaN)
        z = torch.zeros(channels, dtype=sdt, device=x.device)
        return z, z
    if xs.dtype in (torch.float32, torch.float64) and not xs.is_cuda:
        # torch's own batch-norm statistics kernel: one fused pass (var_mean over dims (0, 2, ...)
        # is ~4x slower on CPU). CUDA keeps var_mean (fast there, and this path is CPU-tested).
        return torch.batch_norm_update_stats(xs, None, None, 0.0)
    var, mean = torch.var_mean(xs, dim=[0] + list(range(2, x.dim())), unbiased=False)
    return mean, var


class _SyncBatchNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps, factor, process_set, ex):
        channels = x.shape[1]
        sdt = _stat_dtype(x.dtype)
        xs = x if x.dtype == sdt else x.to(sdt)
        local = x.numel() // channels if channels else 0
        mean_l, var_l = _local_stats(x, xs, channels, sdt)
        counts, means, vars_ = ex.gather(process_set, float(local), mean_l, var_l)
        n = float(counts.sum())
        if n <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input "
                             f"size {list(x.shape)} and {int(n)} values over all ranks")
        # Chan's parallel combination: weights count_r / n.
        w = counts / n
        mean = w @ means
        var = w @ (vars_ + (means - mean) ** 2)  # biased, as normalization uses
        if running_mean is not None:
            with torch.no_grad():
                running_mean.mul_(1 - factor).add_(mean.to(running_mean.dtype), alpha=factor)
                running_var.mul_(1 - factor).add_((var * (n / (n - 1))).to(running_var.dtype),
                                                  alpha=factor)
        if _fused(x, weight) and (bias is None or bias.dtype == x.dtype):
            # torch's own normalization kernel, with the global statistics as "running" ones.
            y = torch.batch_norm(x, weight, bias, mean, var, False, 0.0, eps, False)
        else:
            shape = [1, channels] + [1] * (x.dim() - 2)
            invstd = torch.rsqrt(var + eps)
            scale = invstd if weight is None else invstd * weight.to(sdt)
            y = (xs - mean.view(shape)) * scale.view(shape)
            if bias is not None:
                y = y + bias.to(sdt).view(shape)
            y = y.to(x.dtype)
        ctx.save_for_backward(x, weight, mean, var)
        ctx.info = (n, eps, process_set, ex, bias is not None)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, mean, var = ctx.saved_tensors
        n, eps, process_set, ex, has_bias = ctx.info
        invstd = torch.rsqrt(var + eps)
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
            g_dy, g_dy_xmu = ex.allreduce(process_set, sum_dy, sum_dy_xmu)
            scale = invstd if weight is None else invstd * weight.to(sdt)
            if fused:
                # dx = scale * (dy - g_dy/n - (x - mean) * invstd^2 * g_dy_xmu/n), as
                # x * p + q (one fused pass: batch norm's eval kernel) plus dy * scale.
                p = scale * invstd * invstd * g_dy_xmu * (-1.0 / n)
                q = scale * g_dy * (-1.0 / n) - p * mean
                grad_x = torch.batch_norm(x, p, q, _zeros(mean), _ones(mean), False, 0.0, 0.0,
                                          False).addcmul_(dy, scale.view(shape))
            else:
                grad_x = (dys - (g_dy / n).view(shape)
                          - xmu * (invstd * invstd * g_dy_xmu / n).view(shape)) * scale.view(shape)
                grad_x = grad_x.to(x.dtype)
        return grad_x, grad_w, grad_b, None, None, None, None, None, None


_consts = {}


def _const(value, like):
    key = (value, like.shape[0], like.dtype, like.device)
    t = _consts.get(key)
    if t is None:
        t = _consts[key] = torch.full((like.shape[0],), value, dtype=like.dtype,
                                      device=like.device)
    return t


def _zeros(like):
    return _const(0.0, like)


def _ones(like):
    return _const(1.0, like)


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
        self._hcoll_exchange = _Exchange(self._hcoll_name)

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
                                      self.eps, factor, self.process_set, self._hcoll_exchange)

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
