"""hcoll.ADASUM and hcoll.torch.Adasum against a NumPy reference of the same tree (written here,
apart from the C++): every float dtype, grouped calls of tensors with different norms and
directions (per-tensor dot products), zero vectors, in place / out of place / async, and
DistributedOptimizer(op=Adasum) (Horovod's delta optimizer) against the update computed here.
Run: mpiexec.mpich -n 3 /usr/bin/python3 tests/python/test_adasum.py"""

import numpy as np
import torch

import harness
from harness import done

import hcoll
import hcoll.torch as hvd

R = N = 0
WORLD = None


def setup():
    global R, N, WORLD
    hvd.init()
    WORLD = hcoll.world()
    R, N = WORLD.rank, WORLD.size
    return WORLD


# ---- the reference: whole vectors in float64 -------------------------------------------------

def pairwise(a, b):
    dot, aa, bb = float(a @ b), float(a @ a), float(b @ b)
    tiny = np.sqrt(np.finfo(np.float64).tiny)  # Horovod: a zero vector's coefficient is 1
    ca = 1 - dot / (2 * aa) if aa >= tiny else 1.0
    cb = 1 - dot / (2 * bb) if bb >= tiny else 1.0
    return ca * a + cb * b


def tree(vectors):
    """Ranks P+i fold into i (left operand: i); then pairs (r, r+d), d = 1, 2, ..., P/2."""
    v = [np.asarray(x, np.float64).ravel() for x in vectors]
    p = 1
    while p * 2 <= len(v):
        p *= 2
    for e in range(p, len(v)):
        v[e - p] = pairwise(v[e - p], v[e])
    d = 1
    while d < p:
        for r in range(0, p, 2 * d):
            v[r] = pairwise(v[r], v[r + d])
        d *= 2
    return v[0]


TOL = {np.float16: 4e-3, "bfloat16": 3e-2, np.float32: 2e-6, np.float64: 1e-12}


def check(got, want, tol, what):
    got = np.asarray(got, np.float64).ravel()
    scale = max(1e-300, float(np.max(np.abs(want)))) if want.size else 1.0
    err = float(np.max(np.abs(got - want))) if want.size else 0.0
    assert err <= tol * scale, f"{what}: max error {err} > {tol} * {scale}"


def member_inputs(rank, shapes_kinds, seed):
    """Tensor values of `rank`: kinds 'same' (equal on every rank), 'rand', 'zero', 'tiny',
    'opposed' (anti-correlated across ranks)."""
    out = []
    for m, (shape, kind) in enumerate(shapes_kinds):
        common = np.random.default_rng(seed + 100 * m).standard_normal(shape)
        mine = np.random.default_rng(seed + 100 * m + 1 + rank).standard_normal(shape)
        if kind == "same":
            x = common
        elif kind == "rand":
            x = 50 * mine
        elif kind == "zero":
            x = np.zeros(shape)
        elif kind == "tiny":
            x = 1e-3 * mine
        else:
            x = (1.0 if rank % 2 == 0 else -0.8) * (common + 2) + 0.1 * mine
        out.append(x)
    return out


MEMBERS = [((33,), "same"), ((500,), "rand"), ((17,), "zero"), ((4, 6), "tiny"),
           ((64,), "opposed"), ((1,), "rand")]


def expected(inputs_of_ranks, m):
    return tree([inputs[m] for inputs in inputs_of_ranks])


# ---- numpy arrays through the ctypes binding -------------------------------------------------

def test_numpy_grouped_every_dtype():
    for dtype in (np.float16, np.float32, np.float64):
        per_rank = [[x.astype(dtype) for x in member_inputs(r, MEMBERS, 7)] for r in range(N)]
        xs = [x.copy() for x in per_rank[R]]
        done(WORLD.grouped_allreduce(xs, op=hcoll.ADASUM, name=f"np.{np.dtype(dtype).name}"))
        for m, x in enumerate(xs):
            check(x, expected(per_rank, m), TOL[dtype], f"{np.dtype(dtype).name} member {m}")
        assert np.all(xs[2] == 0)  # 0/0: zero, not NaN
        # Out of place: the inputs stay as they were.
        ins = [x.copy() for x in per_rank[R]]
        outs = [np.empty_like(x) for x in ins]
        done(WORLD.grouped_allreduce(ins, outs=outs, op=hcoll.ADASUM,
                                     name=f"np.out.{np.dtype(dtype).name}"))
        for m in range(len(ins)):
            assert np.array_equal(ins[m], per_rank[R][m])
            assert np.array_equal(outs[m], xs[m])  # the same tree, the same bits


def test_numpy_rejects_integers():
    x = np.arange(4, dtype=np.int32)
    try:
        WORLD.allreduce(x, op=hcoll.ADASUM, name="np.int")
    except hcoll.HcollError as e:
        assert e.status == hcoll.ERR_INVALID_ARGUMENT, e
        assert "floating dtype" in str(e), e
    else:
        raise AssertionError("ADASUM on int32 was accepted")


# ---- hcoll.torch ----------------------------------------------------------------------------

def member_inputs_all(seed):
    return [member_inputs(r, MEMBERS, seed) for r in range(N)]


def stored(per_rank, dtype):
    """The inputs as the dtype stores them, for the reference."""
    return [[torch.tensor(x).to(dtype).double().numpy() for x in inputs] for inputs in per_rank]


def test_torch_ops_every_dtype():
    for dtype, tol in ((torch.float16, TOL[np.float16]), (torch.bfloat16, TOL["bfloat16"]),
                       (torch.float32, TOL[np.float32]), (torch.float64, TOL[np.float64])):
        per_rank = stored(member_inputs_all(11), dtype)
        ts = [torch.tensor(x).to(dtype) for x in per_rank[R]]
        name = str(dtype).split(".")[1]
        outs = hvd.grouped_allreduce(ts, op=hvd.Adasum, name="t.grouped." + name)
        for m, out in enumerate(outs):
            assert out.dtype == dtype
            check(out.double().numpy(), expected(per_rank, m), tol, f"{name} member {m}")
        one = hvd.allreduce(ts[1], op=hvd.Adasum, name="t.one." + name)
        check(one.double().numpy(), expected(per_rank, 1), tol, f"{name} allreduce")
        copy = ts[4].clone()
        hvd.synchronize(hvd.allreduce_async_(copy, op=hvd.Adasum, name="t.async_." + name))
        check(copy.double().numpy(), expected(per_rank, 4), tol, f"{name} allreduce_async_")
        inplace = [t.clone() for t in ts]
        hvd.grouped_allreduce_(inplace, op=hvd.Adasum, name="t.grouped_." + name)
        for m in range(len(ts)):
            assert torch.equal(inplace[m], outs[m])  # bitwise the same as the allocating call


def horovod_close(dtype, want, got):
    """Horovod's test_adasum_pytorch.py criterion: relative norm error / 100 < eps."""
    err = np.linalg.norm(want - got) / np.linalg.norm(want) / 100.0
    return err < np.finfo(dtype).eps, err


def test_horovod_properties():
    """The properties Horovod's own Adasum tests check (on CPU here): orthogonal vectors add
    up; parallel vectors average (power-of-two rank counts: the fold of a third rank weighs the
    ranks unevenly); also at the smallest normal magnitudes and across magnitudes from tiny to
    sqrt(max) of the dtype."""
    rng = np.random.default_rng(2)
    power_of_two = N & (N - 1) == 0
    for dtype in (np.float32, np.float16):
        cases = []
        for n in (N * 20 - 17, N * 2 + 1, N + 2, 4096):
            q, _ = np.linalg.qr(rng.standard_normal((n, N)))
            cases.append(("orthogonal", q.astype(dtype).astype(np.float64), 1.0))
            if power_of_two:
                q = rng.standard_normal((n, 1)) @ rng.standard_normal((N, 1)).T
                cases.append(("parallel", q.astype(dtype).astype(np.float64), 1.0 / N))
        if power_of_two:
            tiny = rng.normal(0, np.finfo(dtype).tiny, (1024, 1)) @ rng.standard_normal((N, 1)).T
            cases.append(("tiny", tiny.astype(dtype).astype(np.float64), 1.0 / N))
            lo, hi = float(np.finfo(dtype).tiny), float(np.sqrt(np.finfo(dtype).max))
            scales = np.array([hi ** ((i + 1) / N) * lo ** ((N - i - 1) / N) for i in range(N)])
            rng.shuffle(scales)
            wide = rng.standard_normal((1024, 1)) @ scales.reshape(1, N)
            cases.append(("wide", wide.astype(dtype).astype(np.float64), 1.0 / N))
        for k, (kind, q, factor) in enumerate(cases):
            t = torch.from_numpy(q[:, R].astype(dtype))
            hvd.allreduce_(t, op=hvd.Adasum, name=f"hvd.{kind}.{np.dtype(dtype).name}.{k}")
            ok, err = horovod_close(dtype, q.sum(axis=1) * factor, t.double().numpy())
            assert ok, f"{kind} {np.dtype(dtype).name} n={q.shape[0]}: off by {err}"


def test_torch_rejects_integer_tensors():
    try:
        hvd.allreduce(torch.arange(3), op=hvd.Adasum, name="t.int")
    except hcoll.HcollError as e:
        assert "floating dtype" in str(e), e
    else:
        raise AssertionError("Adasum on int64 was accepted")


# ---- DistributedOptimizer(op=Adasum) --------------------------------------------------------

def batch(rank, step):
    g = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn(6, 5, generator=g, dtype=torch.float64), \
        torch.randn(6, 2, generator=g, dtype=torch.float64)


def make_model():
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(),
                               torch.nn.Linear(4, 2)).double()


def reference_training(steps, lr, momentum):
    """What the delta optimizer must give: each rank's own SGD step from the shared parameters,
    the deltas combined with the tree, per parameter."""
    model = make_model()
    params = [p.detach().clone() for p in model.parameters()]
    buffers = [[None] * len(params) for _ in range(N)]  # each rank's momentum
    for step in range(steps):
        deltas = []
        for r in range(N):
            m = make_model()
            with torch.no_grad():
                for p, v in zip(m.parameters(), params):
                    p.copy_(v)
            x, t = batch(r, step)
            ((m(x) - t) ** 2).mean().backward()
            d = []
            for i, p in enumerate(m.parameters()):
                g = p.grad
                if momentum:
                    buf = g.clone() if buffers[r][i] is None else buffers[r][i] * momentum + g
                    buffers[r][i] = buf
                    g = buf
                d.append((-lr * g).numpy())
            deltas.append(d)
        params = [params[i] + torch.from_numpy(tree([deltas[r][i] for r in range(N)])
                                               .reshape(params[i].shape))
                  for i in range(len(params))]
    return params


def test_distributed_optimizer_adasum():
    for momentum in (0.0, 0.9):
        model = make_model()
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1,
                                                       momentum=momentum),
                                       named_parameters=model.named_parameters(), op=hvd.Adasum)
        assert type(opt).__mro__[1] is torch.optim.SGD
        for step in range(3):
            opt.zero_grad()
            x, t = batch(R, step)
            ((model(x) - t) ** 2).mean().backward()
            opt.step()
        want = reference_training(3, 0.1, momentum)
        for p, w in zip(model.parameters(), want):
            check(p.detach().numpy(), w.numpy().ravel(), 1e-10, f"momentum {momentum}")
        # Every rank holds the same parameters.
        flat = torch.cat([p.detach().ravel() for p in model.parameters()])
        gathered = hvd.allgather(flat.unsqueeze(0), name=f"opt.check.{momentum}")
        assert all(torch.equal(gathered[0], row) for row in gathered)


if __name__ == "__main__":
    harness.run(globals(), setup=setup, teardown=hvd.shutdown)
