"""hcoll.torch.SyncBatchNorm against torch.nn.BatchNorm* on the concatenated batch (float64):
output, input/weight/bias gradients, running statistics, eval mode, uneven and empty shards.
Run: mpiexec.mpich -n 3 /usr/bin/python3 tests/python/test_torch_syncbn.py (any size >= 2)"""

import torch

import harness  # noqa: F401  (puts bindings/python on sys.path)

import hcoll
import hcoll.torch as hvd

R = N = 0
TOL = dict(rtol=1e-10, atol=1e-10)


def setup():
    global R, N
    hvd.init()
    R, N = hvd.rank(), hvd.size()
    return hvd.global_process_set().comm


def rows_of(rank, sizes):
    return sizes[rank % len(sizes)]


def shards(sizes, tail, seed):
    """Every rank's (x, dy), rebuilt identically on every rank from the seed."""
    out = []
    for r in range(N):
        g = torch.Generator().manual_seed(seed + r)
        n = rows_of(r, sizes)
        x = torch.randn((n,) + tail, generator=g, dtype=torch.float64) * (1.5 + r) + r
        dy = torch.randn((n,) + tail, generator=g, dtype=torch.float64)
        out.append((x, dy))
    return out


def reference(bn_cls, channels, **kw):
    bn = bn_cls(channels, dtype=torch.float64, **kw)
    if bn.affine:
        with torch.no_grad():
            bn.weight.copy_(torch.linspace(0.5, 1.5, channels, dtype=torch.float64))
            bn.bias.copy_(torch.linspace(-1, 1, channels, dtype=torch.float64))
    return bn


def close(got, want, what):
    assert got.shape == want.shape, (what, got.shape, want.shape)
    err = (got - want).abs().max().item() if got.numel() else 0.0
    assert torch.allclose(got, want, **TOL), f"{what}: max |diff| {err:.3e}"


def check_against_torch(bn_cls, tail, sizes, steps=2, **kw):
    channels = tail[0]
    ref = reference(bn_cls, channels, **kw)
    sync = hvd.SyncBatchNorm.convert_sync_batchnorm(reference(bn_cls, channels, **kw))
    assert isinstance(sync, hvd.SyncBatchNorm)
    for step in range(steps):
        parts = shards(sizes, tail, seed=100 * step + channels)
        x, dy = parts[R]
        x = x.clone().requires_grad_()
        sync.zero_grad()
        y = sync(x)
        y.backward(dy)

        full_x = torch.cat([p[0] for p in parts]).requires_grad_()
        full_dy = torch.cat([p[1] for p in parts])
        ref.zero_grad()
        ref_y = ref(full_x)
        ref_y.backward(full_dy)
        lo = sum(p[0].shape[0] for p in parts[:R])
        hi = lo + x.shape[0]
        what = f"{bn_cls.__name__}{tail} sizes={sizes} step {step} {kw}"
        close(y, ref_y[lo:hi], what + " output")
        close(x.grad, full_x.grad[lo:hi], what + " input grad")
        if sync.affine:
            # Local gradients: their sum over ranks is the full-batch gradient.
            gw = hvd.allreduce(sync.weight.grad, op=hvd.Sum, name="t.gw")
            gb = hvd.allreduce(sync.bias.grad, op=hvd.Sum, name="t.gb")
            close(gw, ref.weight.grad, what + " weight grad (sum over ranks)")
            close(gb, ref.bias.grad, what + " bias grad (sum over ranks)")
        if ref.track_running_stats:
            close(sync.running_mean, ref.running_mean, what + " running_mean")
            close(sync.running_var, ref.running_var, what + " running_var")
            assert int(sync.num_batches_tracked) == int(ref.num_batches_tracked) == step + 1

    # Eval: the running statistics, no communication at all.
    sync.eval()
    ref.eval()
    world = hvd.global_process_set().comm
    before = world.stats()["backend_calls"]
    x, _ = shards(sizes, tail, seed=7)[R]
    with torch.no_grad():
        close(sync(x), ref(x), what + " eval output")
    assert world.stats()["backend_calls"] == before, "eval mode communicated"


def test_batchnorm1d_uneven_with_empty_rank():
    # Rank 1 holds no rows at all (size 3: rows 3, 0, 5).
    check_against_torch(torch.nn.BatchNorm1d, (4,), [3, 0, 5])


def test_batchnorm1d_3d_input():
    check_against_torch(torch.nn.BatchNorm1d, (3, 5), [2, 1, 4])


def test_batchnorm2d():
    check_against_torch(torch.nn.BatchNorm2d, (3, 4, 2), [2, 3])


def test_batchnorm3d():
    check_against_torch(torch.nn.BatchNorm3d, (2, 2, 3, 2), [1, 2])


def test_momentum_none_and_no_affine():
    check_against_torch(torch.nn.BatchNorm1d, (4,), [3, 2, 1], steps=3, momentum=None)
    check_against_torch(torch.nn.BatchNorm2d, (2, 2, 2), [2, 1], affine=False, momentum=0.3)


def test_no_running_stats():
    check_against_torch(torch.nn.BatchNorm1d, (3,), [4, 2], track_running_stats=False)


def test_single_value_raises_everywhere():
    # One row over all ranks: torch refuses to train on it, and so does every rank here.
    bn = hvd.SyncBatchNorm(3, dtype=torch.float64)
    x = torch.randn(1 if R == 0 else 0, 3, dtype=torch.float64)
    try:
        bn(x)
    except ValueError as e:
        assert "more than 1 value" in str(e), e
    else:
        raise AssertionError("a global batch of one row was accepted")


def test_channel_mismatch_raises_everywhere():
    bn = hvd.SyncBatchNorm(3 + (R == 0), dtype=torch.float64)
    try:
        bn(torch.randn(4, 3 + (R == 0), dtype=torch.float64))
    except hcoll.HcollError as e:
        assert e.status == hcoll.ERR_MISMATCH, e
    else:
        raise AssertionError("ranks with different channel counts were not refused")


def test_float32_close():
    ref = torch.nn.BatchNorm2d(3)
    sync = hvd.SyncBatchNorm.convert_sync_batchnorm(torch.nn.BatchNorm2d(3))
    parts = [(x.float(), dy.float()) for x, dy in shards([2, 3], (3, 2, 2), seed=5)]
    x, dy = parts[R]
    x = x.clone().requires_grad_()
    sync(x).backward(dy)
    full_x = torch.cat([p[0] for p in parts]).requires_grad_()
    ref(full_x).backward(torch.cat([p[1] for p in parts]))
    lo = sum(p[0].shape[0] for p in parts[:R])
    assert torch.allclose(x.grad, full_x.grad[lo:lo + x.shape[0]], rtol=1e-4, atol=1e-5)
    assert torch.allclose(sync.running_var, ref.running_var, rtol=1e-5, atol=1e-6)


def test_copy_and_pickle():
    # The per-module exchange caches buffers and ctypes descriptors: a copy must build its own
    # (never write through the original's), and a model with SyncBatchNorm must still pickle.
    import copy
    import pickle
    bn = hvd.SyncBatchNorm(3, dtype=torch.float64)
    x = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(R))
    y = bn(x)
    for twin in (copy.deepcopy(bn), pickle.loads(pickle.dumps(bn))):
        assert twin._hcoll_exchange is not bn._hcoll_exchange
        bn.running_mean.copy_(twin.running_mean)
        bn.running_var.copy_(twin.running_var)
        close(twin(x), y, "copy output")
        close(bn(x), y, "original after copy")
        close(twin.running_mean, bn.running_mean, "copy running_mean")


if __name__ == "__main__":
    harness.run(globals(), setup, teardown=hvd.shutdown)
