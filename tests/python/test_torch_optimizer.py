"""hcoll.torch.DistributedOptimizer + SyncBatchNorm training against one process training on
the concatenated batch with plain BatchNorm (float64): after a few steps every parameter and
running statistic equals the reference (<= 1e-10; fp16 compression looser) and is identical on
every rank. Per-parameter, bucketed and single-bucket modes, gradient accumulation, fp16,
synchronize()/skip_synchronize(), broadcasts of parameters, optimizer state and objects.
Run: mpiexec.mpich -n 2 /usr/bin/python3 tests/python/test_torch_optimizer.py"""

import copy

import torch
import torch.nn as nn

import harness  # noqa: F401  (puts bindings/python on sys.path)

import hcoll
import hcoll.torch as hvd

R = N = 0
BATCH = 4  # rows per rank per micro-batch


def setup():
    global R, N
    hvd.init()
    R, N = hvd.rank(), hvd.size()
    return hvd.global_process_set().comm


class Net(nn.Module):
    """Conv + BatchNorm2d + MLP with BatchNorm1d: every kind of layer a gradient passes."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(3)
        self.fc1 = nn.Linear(3 * 4 * 4, 8)
        self.bn1 = nn.BatchNorm1d(8, momentum=None)
        self.fc2 = nn.Linear(8, 2)
        self.unused = nn.Linear(2, 2)  # never in the graph: still averaged (as zeros)

    def forward(self, x):
        x = torch.relu(self.bn2(self.conv(x)))
        x = torch.relu(self.bn1(self.fc1(x.flatten(1))))
        return self.fc2(x)


def make_model():
    torch.manual_seed(0)
    return Net().double()


def full_batch(step, micro):
    g = torch.Generator().manual_seed(1000 * step + micro)
    x = torch.randn(N * BATCH, 2, 4, 4, generator=g, dtype=torch.float64)
    t = torch.randn(N * BATCH, 2, generator=g, dtype=torch.float64)
    return x, t


def loss_fn(out, t):
    return ((out - t) ** 2).mean()


def train(steps=3, passes=1, grads_to_none=False, set_to_none=False, **opt_kwargs):
    ref = make_model()
    dist = hvd.SyncBatchNorm.convert_sync_batchnorm(make_model())
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(dist.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=dist.named_parameters(),
                                   backward_passes_per_step=passes, **opt_kwargs)
    for step in range(steps):
        ref_opt.zero_grad(set_to_none=set_to_none)
        opt.zero_grad(set_to_none=set_to_none)
        if grads_to_none:  # gradients replaced behind the optimizer's back: still reduced
            for p in dist.parameters():
                p.grad = None
        for micro in range(passes):
            x, t = full_batch(step, micro)
            loss_fn(ref(x), t).backward()
            rows = slice(R * BATCH, (R + 1) * BATCH)
            loss_fn(dist(x[rows]), t[rows]).backward()
        ref_opt.step()
        opt.step()
    return ref, dist


def check(ref, dist, tol, what):
    ref_state, dist_state = ref.state_dict(), dist.state_dict()
    assert ref_state.keys() == dist_state.keys()
    for k, want in ref_state.items():
        got = dist_state[k]
        if got.dtype.is_floating_point:
            err = (got - want).abs().max().item()
            assert err <= tol, f"{what}: {k} differs from the single-process run by {err:.3e}"
        else:
            assert torch.equal(got, want), (what, k)
        # Identical on every rank, bit for bit.
        gathered = hvd.allgather(got.reshape(1, -1).contiguous(), name=f"chk.{k}")
        assert all(torch.equal(gathered[0], gathered[i]) for i in range(N)), (what, k)


def test_per_parameter_mode():
    check(*train(bucket_bytes=0), 1e-10, "per-parameter")


def test_bucketed_mode():
    # ~300 bytes: several buckets of a few parameters each.
    opt_ref, dist = train(bucket_bytes=300)
    check(opt_ref, dist, 1e-10, "bucketed")
    check(*train(bucket_bytes=300, grads_to_none=True), 1e-10, "bucketed, grads set to None")
    check(*train(bucket_bytes=0, grads_to_none=True), 1e-10, "per-parameter, grads set to None")
    check(*train(bucket_bytes=300, set_to_none=True), 1e-10, "bucketed, zero_grad(set_to_none)")
    check(*train(bucket_bytes=0, set_to_none=True), 1e-10,
          "per-parameter, zero_grad(set_to_none)")


def test_single_bucket_with_accumulation():
    check(*train(passes=3), 1e-10, "one bucket, 3 passes")
    check(*train(passes=2, bucket_bytes=0), 1e-10, "per-parameter, 2 passes")


def test_fp16_compression():
    check(*train(compression=hvd.Compression.fp16, bucket_bytes=300), 5e-3, "fp16 bucketed")
    check(*train(compression=hvd.Compression.fp16, bucket_bytes=0), 5e-3, "fp16 per-parameter")


class TwoBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 3)

    def forward(self, x, flip):
        # The same function either way; the order of the terms decides the order in which
        # backward reaches a's and b's parameters (flip=False: b first; flip=True: a first).
        return (2 * self.b(x) + self.a(x)) if flip else (self.a(x) + 2 * self.b(x))


def test_hooks_in_different_orders_on_different_ranks():
    for bucket_bytes in (0, 1):  # per parameter; one bucket per parameter
        torch.manual_seed(0)
        ref = TwoBranch().double()
        dist = copy.deepcopy(ref)
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
        opt = hvd.DistributedOptimizer(torch.optim.SGD(dist.parameters(), lr=0.1),
                                       named_parameters=dist.named_parameters(),
                                       bucket_bytes=bucket_bytes)
        for step in range(3):
            g = torch.Generator().manual_seed(step)
            x = torch.randn(N * 2, 3, generator=g, dtype=torch.float64)
            ref_opt.zero_grad()
            ref(x, False).pow(2).mean().backward()
            ref_opt.step()
            opt.zero_grad()
            dist(x[2 * R:2 * R + 2], R % 2 == 1).pow(2).mean().backward()
            opt.step()
        for (k, want), got in zip(ref.state_dict().items(), dist.state_dict().values()):
            assert (got - want).abs().max().item() <= 1e-12, (bucket_bytes, k)


def test_synchronize_then_skip():
    model = make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), bucket_bytes=0)
    x, t = full_batch(0, 0)
    rows = slice(R * BATCH, (R + 1) * BATCH)
    model.train()
    loss_fn(model(x[rows]), t[rows] * (R + 1)).backward()
    opt.synchronize()
    grads = [p.grad.clone() for p in model.parameters()]
    for g in grads:  # averaged: identical on every rank
        gathered = hvd.allgather(g.reshape(1, -1), name="sync.g")
        assert torch.equal(gathered[0], gathered[-1])
    with opt.skip_synchronize():
        opt.step()
    try:  # a second backward before step() without accumulation is refused
        loss_fn(model(x[rows]), t[rows]).backward()
        loss_fn(model(x[rows]), t[rows]).backward()
        raise AssertionError("a second backward pass before step() was accepted")
    except AssertionError as e:
        assert "backward_passes_per_step" in str(e), e
    opt.synchronize()
    opt.zero_grad()


def test_broadcast_parameters_and_optimizer_state():
    torch.manual_seed(R)  # different on every rank
    model = Net().double()
    opt = torch.optim.Adam(model.parameters(), lr=0.01 * (R + 1))
    model(torch.randn(3, 2, 4, 4, dtype=torch.float64)).sum().backward()
    opt.step()  # state (exp_avg, exp_avg_sq, step) differs per rank
    hvd.broadcast_parameters(model.state_dict(), root_rank=N - 1)
    hvd.broadcast_optimizer_state(opt, root_rank=N - 1)
    for k, v in model.state_dict().items():
        g = hvd.allgather(v.reshape(1, -1).contiguous(), name=f"bp.{k}")
        assert torch.equal(g[0], g[-1]), k
    assert opt.param_groups[0]["lr"] == 0.01 * N
    assert len(opt.state) == 10  # every parameter but the unused layer's two
    for p in opt.state:
        for k in ("exp_avg", "exp_avg_sq"):
            g = hvd.allgather(opt.state[p][k].reshape(1, -1).contiguous(), name="os")
            assert torch.equal(g[0], g[-1]), k
    hvd.broadcast_parameters(list(model.named_parameters()), root_rank=0)
    obj = hvd.broadcast_object({"rank": R, "data": list(range(R + 3))}, root_rank=1)
    assert obj == {"rank": 1, "data": [0, 1, 2, 3]}, obj
    assert hvd.allgather_object(("r", R)) == [("r", r) for r in range(N)]


def test_mismatched_models_raise_everywhere():
    # Rank 0's model has a wider layer: the grouped allreduce of that bucket fails on every rank.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4 + (R == 0)), nn.Linear(4 + (R == 0), 1)).double()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    model(torch.ones(2, 3, dtype=torch.float64)).sum().backward()
    try:
        opt.step()
    except hcoll.HcollError as e:
        assert e.status == hcoll.ERR_MISMATCH, e
    else:
        raise AssertionError("mismatched gradients were reduced")
    opt.zero_grad()  # nothing left in flight after the failure


if __name__ == "__main__":
    harness.run(globals(), setup, teardown=hvd.shutdown)
