"""hcoll.torch with CUDA tensors (the NCCL backend): every collective and its variants (in place,
async, grouped, prescale/postscale, every reduction op, 16-bit floats), a tensor produced on a
side stream, CPU and CUDA operations interleaved on one communicator, SyncBatchNorm and
DistributedOptimizer on the GPU against the same code on the CPU. Any number of ranks, one GPU
each; without a GPU (or without NCCL in the library) every test says why it skips and passes.
HCOLL_TEST_TORCH_DEVICE=cpu runs the same checks on CPU tensors (the MPI backend; CI does, so
that the expected values themselves are tested where there is no GPU).
Run: mpiexec.mpich -n 1 python3 tests/python/test_torch_cuda.py (tests/gpu/run.sh does)"""

import copy
import os

import torch
import torch.nn as nn

import harness  # noqa: F401  (puts bindings/python on sys.path)

import hcoll.torch as hvd

R = N = 0
SKIP = None  # why the tests skip, or None
DEV = None


def setup():
    global R, N, SKIP, DEV
    hvd.init()
    R, N = hvd.rank(), hvd.size()
    if os.environ.get("HCOLL_TEST_TORCH_DEVICE") == "cpu":
        DEV = torch.device("cpu")
    elif not torch.cuda.is_available():
        SKIP = "no CUDA device visible to torch"
    elif not hvd.nccl_built():
        SKIP = "hcoll was built without NCCL"
    elif torch.cuda.device_count() < hvd.local_size():
        SKIP = f"{hvd.local_size()} ranks on this node, {torch.cuda.device_count()} GPU(s)"
    else:
        torch.cuda.set_device(hvd.local_rank())
        DEV = torch.device("cuda", hvd.local_rank())
    if SKIP:
        print(f"[rank {R}] SKIPPED: {SKIP}", flush=True)
    return hvd.global_process_set().comm


def gpu(fn):
    """Runs the test only where there is a GPU per rank (and says so once otherwise)."""
    def wrapped():
        if SKIP is None:
            fn()
    wrapped.__name__ = fn.__name__
    wrapped.__wrapped__ = fn
    return wrapped


def tri(n):
    return n * (n + 1) // 2


def on_device(t):
    return t.device.type == DEV.type


def same(got, want, what):
    assert on_device(got), f"{what}: result on {got.device}, not on {DEV}"
    assert got.shape == want.shape, (what, got.shape, want.shape)
    assert torch.equal(got.cpu(), want.cpu()), f"{what}: {got.flatten()[:8]} != {want.flatten()[:8]}"


@gpu
def test_allreduce_every_op_and_dtype():
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
                  torch.int64, torch.uint8):
        base = torch.arange(1000, device=DEV) % 7
        x = (base + R).to(dtype)
        what = f"allreduce {dtype}"
        same(hvd.allreduce(x, op=hvd.Sum, name=f"s.{dtype}"), (N * base + tri(N - 1)).to(dtype),
             what + " sum")
        same(hvd.allreduce(x, op=hvd.Min, name=f"mn.{dtype}"), base.to(dtype), what + " min")
        same(hvd.allreduce(x, op=hvd.Max, name=f"mx.{dtype}"), (base + N - 1).to(dtype),
             what + " max")
        if dtype.is_floating_point:
            same(hvd.allreduce(x * 0 + 2, op=hvd.Product, name=f"p.{dtype}"),
                 torch.full_like(x, 2.0 ** N), what + " product")
            avg = hvd.allreduce(x, name=f"a.{dtype}")  # Average
            tol = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-6
            assert torch.allclose(avg.double().cpu(), (base + (N - 1) / 2).double().cpu(),
                                  atol=tol), what + " average"


@gpu
def test_in_place_async_and_scaling():
    x = torch.full((4096,), float(R + 1), device=DEV)
    h = hvd.allreduce_async_(x, op=hvd.Sum, name="c.ip")
    while not hvd.poll(h):
        pass
    assert hvd.synchronize(h) is x
    same(x, torch.full((4096,), float(tri(N)), device=DEV), "in-place async allreduce")
    # prescale/postscale run the scale kernels on the device (float32 and float16).
    for dtype in (torch.float32, torch.float16):
        y = hvd.allreduce(torch.ones(3000, device=DEV, dtype=dtype), op=hvd.Sum,
                          prescale_factor=2.0, postscale_factor=0.25, name=f"c.sc.{dtype}")
        same(y, torch.full((3000,), N * 0.5, device=DEV, dtype=dtype), f"scaled allreduce {dtype}")


@gpu
def test_grouped_allreduce_fuses_on_the_device():
    shapes = [(17,), (3, 5), (1000,), (2, 2, 2), (1,)]
    xs = [torch.full(s, float(i + R), device=DEV) for i, s in enumerate(shapes)]
    ys = hvd.grouped_allreduce(xs, op=hvd.Sum, name="c.grp")
    for i, (s, y) in enumerate(zip(shapes, ys)):
        same(y, torch.full(s, float(N * i + tri(N - 1)), device=DEV), f"grouped member {i}")
    hvd.grouped_allreduce_(xs, op=hvd.Max, name="c.grp_")
    for i, (s, x) in enumerate(zip(shapes, xs)):
        same(x, torch.full(s, float(i + N - 1), device=DEV), f"grouped in-place member {i}")


@gpu
def test_allgather_broadcast_alltoall_reducescatter():
    g = hvd.allgather(torch.full((R + 1, 3), float(R), device=DEV), name="c.ag")
    want = torch.cat([torch.full((r + 1, 3), float(r)) for r in range(N)])
    same(g, want.to(DEV), "allgather (uneven rows)")
    gs = hvd.grouped_allgather([torch.full((2,), float(R), device=DEV),
                                torch.full((R + 1, 2), 1.0, device=DEV, dtype=torch.float64)],
                               name="c.gag")
    same(gs[0], torch.arange(N, device=DEV).repeat_interleave(2).float(), "grouped allgather 0")
    same(gs[1], torch.ones(tri(N), 2, device=DEV, dtype=torch.float64), "grouped allgather 1")

    b = torch.full((5, 5), float(R), device=DEV)
    hvd.broadcast_(b, root_rank=N - 1, name="c.bc_")
    same(b, torch.full((5, 5), float(N - 1), device=DEV), "broadcast_")
    b2 = hvd.broadcast(torch.arange(10, device=DEV) * (R + 1), root_rank=0, name="c.bc")
    same(b2, torch.arange(10, device=DEV), "broadcast")

    # alltoall: rank r sends j + 1 rows of value 100 r + j to rank j.
    splits = [j + 1 for j in range(N)]
    rows = torch.cat([torch.full((j + 1, 2), float(100 * R + j)) for j in range(N)]).to(DEV)
    out, rsplits = hvd.alltoall(rows, splits=splits, name="c.a2a")
    same(out, torch.cat([torch.full((R + 1, 2), float(100 * r + R)) for r in range(N)]).to(DEV),
         "alltoall with splits")
    assert rsplits.tolist() == [R + 1] * N, rsplits
    even = hvd.alltoall(torch.arange(2 * N, device=DEV) + 10 * R, name="c.a2a.even")
    same(even, torch.tensor([10 * r + 2 * R + k for r in range(N) for k in range(2)]).to(DEV),
         "alltoall even")

    rs = hvd.reducescatter(torch.ones(2 * N + 1, 4, device=DEV) * (R + 1), op=hvd.Sum,
                           name="c.rs")
    same(rs, torch.full((2 + (R < 1), 4), float(tri(N)), device=DEV), "reducescatter")
    grs = hvd.grouped_reducescatter([torch.ones(N, device=DEV), torch.ones(3 * N, 2, device=DEV)],
                                    op=hvd.Sum, name="c.grs")
    same(grs[0], torch.full((1,), float(N), device=DEV), "grouped reducescatter 0")
    same(grs[1], torch.full((3, 2), float(N), device=DEV), "grouped reducescatter 1")


@gpu
def test_tensor_written_on_a_side_stream():
    """The input is produced on a non-default stream right before the call: hcoll must order its
    work after it (the caller's current stream), never read the old contents."""
    if DEV.type != "cuda":
        return
    side = torch.cuda.Stream()
    x = torch.zeros(8 << 20, device=DEV)  # 32 MiB: the fill takes a while
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        for _ in range(4):
            x.add_(1.0)
        y = hvd.allreduce(x, op=hvd.Sum, name="c.side")
        x.add_(1.0)  # after the call was queued: must not change y
    side.synchronize()
    same(y[:1024], torch.full((1024,), 4.0 * N, device=DEV), "allreduce after a side-stream fill")
    assert torch.all(y == 4.0 * N).item(), "allreduce saw a partly written input"


@gpu
def test_cpu_and_cuda_operations_interleave():
    for i in range(4):
        c = hvd.allreduce(torch.full((100,), float(R + i)), op=hvd.Sum, name="c.mix.cpu")
        g = hvd.allreduce(torch.full((100,), float(R + i), device=DEV), op=hvd.Sum,
                          name="c.mix.gpu")
        assert not c.is_cuda and torch.all(c == N * i + tri(N - 1)).item()
        same(g, c.to(DEV), f"CUDA result equals CPU result, round {i}")
    big = hvd.allreduce(torch.ones(16 << 20, device=DEV), op=hvd.Sum, name="c.big")  # 64 MiB
    assert torch.all(big == float(N)).item(), "64 MiB allreduce"


@gpu
def test_syncbatchnorm_cuda_matches_cpu():
    torch.manual_seed(5)
    cpu_bn = hvd.SyncBatchNorm(4).double()
    gpu_bn = copy.deepcopy(cpu_bn).to(DEV)
    for step in range(2):
        g = torch.Generator().manual_seed(10 * step + R)
        x = torch.randn(3 + R, 4, 5, generator=g, dtype=torch.float64) * (R + 1)
        dy = torch.randn(x.shape, generator=g, dtype=torch.float64)
        xc, xg = x.clone().requires_grad_(), x.to(DEV).requires_grad_()
        yc, yg = cpu_bn(xc), gpu_bn(xg)
        yc.backward(dy)
        yg.backward(dy.to(DEV))
        for what, a, b in (("output", yg, yc), ("input grad", xg.grad, xc.grad),
                           ("weight grad", gpu_bn.weight.grad, cpu_bn.weight.grad),
                           ("running_var", gpu_bn.running_var, cpu_bn.running_var)):
            assert on_device(a) and torch.allclose(a.cpu(), b, rtol=1e-10, atol=1e-10), \
                f"SyncBatchNorm step {step} {what}: max diff {(a.cpu() - b).abs().max():.3e}"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.bn = nn.BatchNorm1d(8)
        self.fc2 = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(torch.relu(self.bn(self.fc1(x))))


@gpu
def test_distributed_optimizer_cuda_matches_cpu():
    for bucket_bytes in (0, 256):  # per parameter; buckets of a few parameters
        torch.manual_seed(0)
        cpu_model = hvd.SyncBatchNorm.convert_sync_batchnorm(Net().double())
        gpu_model = copy.deepcopy(cpu_model).to(DEV)
        opts = [hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
                                         named_parameters=m.named_parameters(),
                                         bucket_bytes=bucket_bytes)
                for m in (cpu_model, gpu_model)]
        for step in range(3):
            g = torch.Generator().manual_seed(100 * step + R)
            x = torch.randn(4, 6, generator=g, dtype=torch.float64)
            t = torch.randn(4, 2, generator=g, dtype=torch.float64)
            for model, opt, dev in ((cpu_model, opts[0], "cpu"), (gpu_model, opts[1], DEV)):
                opt.zero_grad()
                ((model(x.to(dev)) - t.to(dev)) ** 2).mean().backward()
                opt.step()
        for (k, want), got in zip(cpu_model.state_dict().items(),
                                  gpu_model.state_dict().values()):
            assert on_device(got), k
            if got.dtype.is_floating_point:
                err = (got.cpu() - want).abs().max().item()
                assert err <= 1e-10, f"bucket_bytes={bucket_bytes} {k}: GPU vs CPU {err:.3e}"


if __name__ == "__main__":
    harness.run(globals(), setup, teardown=hvd.shutdown)
