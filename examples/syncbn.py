"""Synchronized batch normalization over hcoll, checked against torch's BatchNorm1d.

Each rank holds a slice of the batch. Forward: one grouped allgather of every rank's (count,
mean, mean of squares) gives the global statistics; backward: one grouped allreduce of the two
per-channel sums the input gradient needs. The output and the input gradient must equal
single-process BatchNorm1d on the concatenated batch (every rank rebuilds the full batch from the
same seed to check). The weight and bias gradients are this rank's own (its rows only): a
data-parallel optimizer averages them over ranks like every other gradient, so returning the
allreduced sums here would make them world-size times too large. Their sum over ranks is checked.
hcoll.torch.SyncBatchNorm is the ready-made module (docs/torch.md).

Run: mpiexec.mpich -n 2 /usr/bin/python3 examples/syncbn.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings",
                                "python"))
import hcoll  # noqa: E402

EPS = 1e-5
CHANNELS = 5


class SyncBatchNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, comm):
        n = torch.tensor([float(x.shape[0])], dtype=x.dtype)
        mean = x.mean(0, keepdim=True)
        meansq = (x * x).mean(0, keepdim=True)
        # One grouped call: count (1,), mean (1, C), mean of squares (1, C) from every rank.
        counts, means, meansqs = comm.grouped_allgather([n, mean, meansq], name="bn.fwd").result()
        total = counts.sum()
        g_mean = (counts[:, None] * means).sum(0) / total
        g_var = (counts[:, None] * meansqs).sum(0) / total - g_mean * g_mean  # biased, as BN
        invstd = torch.rsqrt(g_var + EPS)
        xhat = (x - g_mean) * invstd
        ctx.save_for_backward(xhat, weight, invstd)
        ctx.total, ctx.comm = total, comm
        return xhat * weight + bias

    @staticmethod
    def backward(ctx, dy):
        xhat, weight, invstd = ctx.saved_tensors
        local_dy = dy.sum(0).contiguous()
        local_dy_xhat = (dy * xhat).sum(0).contiguous()
        # One grouped call: both per-channel sums over the whole batch, into new tensors (the
        # local sums are the weight and bias gradients).
        sum_dy, sum_dy_xhat = torch.empty_like(local_dy), torch.empty_like(local_dy_xhat)
        ctx.comm.grouped_allreduce([local_dy, local_dy_xhat], outs=[sum_dy, sum_dy_xhat],
                                   op=hcoll.SUM, name="bn.bwd").wait()
        dx = weight * invstd * (dy - sum_dy / ctx.total - xhat * sum_dy_xhat / ctx.total)
        return dx, local_dy_xhat, local_dy, None


def batch(rank):
    """Rank r's slice: r + 3 rows (uneven on purpose), reproducible on every rank."""
    g = torch.Generator().manual_seed(1234 + rank)
    x = torch.randn(rank + 3, CHANNELS, generator=g, dtype=torch.float64) * 2 + rank
    dy = torch.randn(rank + 3, CHANNELS, generator=g, dtype=torch.float64)
    return x, dy


def main():
    hcoll.initialize()
    comm = hcoll.world()
    rank, size = comm.rank, comm.size
    weight = torch.linspace(0.5, 1.5, CHANNELS, dtype=torch.float64).requires_grad_()
    bias = torch.linspace(-1, 1, CHANNELS, dtype=torch.float64).requires_grad_()

    x, dy = batch(rank)
    x.requires_grad_()
    y = SyncBatchNorm.apply(x, weight, bias, comm)
    y.backward(dy)

    # Reference: one process, the whole batch.
    parts = [batch(r) for r in range(size)]
    full_x = torch.cat([p[0] for p in parts]).requires_grad_()
    full_dy = torch.cat([p[1] for p in parts])
    bn = torch.nn.BatchNorm1d(CHANNELS, eps=EPS, dtype=torch.float64)
    with torch.no_grad():
        bn.weight.copy_(weight)
        bn.bias.copy_(bias)
    ref_y = bn(full_x)
    ref_y.backward(full_dy)
    lo = sum(p[0].shape[0] for p in parts[:rank])
    hi = lo + x.shape[0]

    # Local weight/bias gradients: summed over ranks they are the full batch's.
    grad_weight = comm.allreduce(weight.grad.clone(), op=hcoll.SUM, name="gw").result()
    grad_bias = comm.allreduce(bias.grad.clone(), op=hcoll.SUM, name="gb").result()
    checks = {
        "output": (y, ref_y[lo:hi]),
        "grad_input": (x.grad, full_x.grad[lo:hi]),
        "sum grad_weight": (grad_weight, bn.weight.grad),
        "sum grad_bias": (grad_bias, bn.bias.grad),
    }
    ok = True
    for what, (got, want) in checks.items():
        err = (got - want).abs().max().item()
        good = torch.allclose(got, want, rtol=1e-9, atol=1e-10)
        ok = ok and good
        print(f"rank {rank}: {what:15s} max|diff| = {err:.2e} {'ok' if good else 'WRONG'}")
    hcoll.shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
