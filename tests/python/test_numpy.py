"""Every collective, grouped call and communicator call of the Python binding on numpy arrays.
Run: mpiexec.mpich -n 2 /usr/bin/python3 tests/python/test_numpy.py (any N >= 2 works).
Inputs are small integers so each expected value is exact and computed directly in numpy."""

import numpy as np

import harness
from harness import done

import hcoll

W = None  # world communicator
R = N = 0


def setup():
    global W, R, N
    W, R, N = harness.setup_world()
    return W  # the runner reads .rank from it


def rows(r, n, cols=3, dtype=np.float32):
    """Rank r's n x cols block: distinct small integers."""
    return (np.arange(n * cols, dtype=np.int64).reshape(n, cols) + 100 * r).astype(dtype)


def test_info():
    assert hcoll.is_initialized()
    major, minor, patch = hcoll.version()
    assert (major, minor) == (0, 1), hcoll.version()
    assert hcoll.status_string(hcoll.ERR_MISMATCH) == "ranks disagreed about an operation"
    assert hcoll.nccl_built() in (False, True)
    assert 0 <= W.local_rank < W.local_size <= N


def test_allreduce_ops():
    base = np.arange(6, dtype=np.float64) % 3 + 1  # products stay < 256 up to 3 ranks
    contrib = [base * (r + 1) for r in range(N)]
    expected = {hcoll.SUM: sum(contrib), hcoll.MIN: np.minimum.reduce(contrib),
                hcoll.MAX: np.maximum.reduce(contrib), hcoll.PRODUCT: np.multiply.reduce(contrib),
                hcoll.AVERAGE: sum(contrib) / N}
    for dtype in (np.float32, np.float64, np.int32, np.int64, np.uint8, np.int16):
        for op, want in expected.items():
            if op == hcoll.AVERAGE and np.issubdtype(dtype, np.integer):
                want = np.trunc(want)
            x = contrib[R].astype(dtype)
            done(hcoll.allreduce(x, op=op, name=f"ar.{np.dtype(dtype).name}.{op}"))
            assert np.array_equal(x, want.astype(dtype)), (dtype, op, x, want)


def test_allreduce_out_of_place_and_scaling():
    x = np.full((2, 3), R + 1, dtype=np.float32)
    out = np.zeros_like(x)
    req = W.allreduce(x, out=out, prescale=2.0, postscale=0.5, name="scaled")
    assert req.result() is out
    assert np.all(x == R + 1), "input must be untouched out of place"
    assert np.all(out == N * (N + 1) / 2), out


def test_allreduce_float16_and_bool():
    h = np.full(5, R + 1, dtype=np.float16)
    done(W.allreduce(h, name="f16"))
    assert np.all(h == N * (N + 1) / 2)
    b = np.array([R == 0, False, True], dtype=np.bool_)
    done(W.allreduce(b, op=hcoll.MAX, name="bool.or"))
    assert b.tolist() == [True, False, True]


def test_grouped_allreduce():
    xs = [np.full(k + 1, R + k, dtype=np.int32) for k in range(3)]
    req = W.grouped_allreduce(xs, name="g.ar")
    assert req.result() == xs
    for k, x in enumerate(xs):
        assert np.all(x == sum(r + k for r in range(N))), (k, x)


def test_allgather_uneven():
    x = rows(R, R + 1)  # rank r has r + 1 rows
    with W.allgather(x, name="ag") as req:
        out = req.result()
    assert out.shape == (N * (N + 1) // 2, 3)
    assert np.array_equal(out, np.concatenate([rows(r, r + 1) for r in range(N)]))


def test_allgather_empty_rank():
    x = rows(R, 0 if R == 0 else 2, dtype=np.int64)
    out = done(W.allgather(x)).output(0)
    assert out.shape == (2 * (N - 1), 3)


def test_grouped_allgather():
    xs = [rows(R, 1, 2, np.float64), rows(R, 2, 4, np.int8)]
    outs = done(W.grouped_allgather(xs, name="g.ag")).outputs()
    assert len(outs) == 2
    assert np.array_equal(outs[0], np.concatenate([rows(r, 1, 2, np.float64) for r in range(N)]))
    assert np.array_equal(outs[1], np.concatenate([rows(r, 2, 4, np.int8) for r in range(N)]))


def test_output_view_outlives_request():
    req = done(W.allgather(np.full(2, R, dtype=np.int32), name="view"))
    view = req.output(0, copy=False)
    copy = req.output(0)
    req.free()  # deferred: the view keeps the runtime's memory
    assert not view.flags.owndata and copy.flags.owndata
    assert view.tolist() == copy.tolist() == [r for r in range(N) for _ in range(2)]


def test_broadcast():
    x = np.full(4, R, dtype=np.float32)
    root = N - 1
    assert W.broadcast(x, root=root, name="bc").result() is x
    assert np.all(x == root)
    xs = [np.full(k + 1, R * 10 + k, dtype=np.int64) for k in range(3)]
    done(W.grouped_broadcast(xs, root=0, name="g.bc"))
    for k, x in enumerate(xs):
        assert np.all(x == k)


def test_alltoall():
    splits = [r + 1 for r in range(N)]  # rank i receives i + 1 rows from everyone
    x = np.concatenate([np.full((s, 2), R * 100 + i, dtype=np.int32)
                        for i, s in enumerate(splits)])
    req = done(W.alltoall(x, splits=splits, name="a2a"))
    out = req.output(0)
    assert req.received_splits() == [R + 1] * N
    assert np.array_equal(out, np.concatenate([np.full((R + 1, 2), r * 100 + R, dtype=np.int32)
                                               for r in range(N)]))
    even = np.arange(2 * N, dtype=np.float32) + 10 * R
    out = done(W.alltoall(even)).output(0)
    assert out.tolist() == [10 * r + 2 * R + k for r in range(N) for k in range(2)]


def test_alltoall_splits_length_checked():
    """The C API reads exactly N splits: a shorter or longer list is refused by the binding with
    ValueError before anything is submitted, so the same name then works on every rank."""
    x = np.arange(2 * N, dtype=np.float32)
    for bad in ([1] * (N - 1), [0] * (N + 1), []):
        try:
            W.alltoall(x, splits=bad, name="a2a.len")
        except ValueError as e:
            assert "splits" in str(e) and str(N) in str(e), e
        else:
            raise AssertionError(f"splits={bad} accepted at {N} ranks")
    out = done(W.alltoall(x, splits=[2] * N, name="a2a.len")).output(0)
    assert out.tolist() == [2 * R + k for r in range(N) for k in range(2)], out


def test_names_with_nul_rejected():
    """A NUL would cut the name short in C ("grad\0layer1" and "grad\0layer2" would both be
    "grad"): every entry point that takes a name refuses it with ValueError."""
    x = np.ones(2 * N, dtype=np.float32)
    calls = [
        lambda n: W.allreduce(x, name=n),
        lambda n: W.grouped_allreduce([x], name=n),
        lambda n: W.allgather(x, name=n),
        lambda n: W.grouped_allgather([x], name=n),
        lambda n: W.broadcast(x, name=n),
        lambda n: W.grouped_broadcast([x], name=n),
        lambda n: W.alltoall(x, name=n),
        lambda n: W.reducescatter(x, name=n),
        lambda n: W.grouped_reducescatter([x], name=n),
        lambda n: hcoll.allreduce(x, name=n),
    ]
    for i, call in enumerate(calls):
        for bad in ("grad\x00layer1", b"grad\x00layer2", "\x00"):
            try:
                call(bad)
            except ValueError as e:
                assert "NUL" in str(e), e
            else:
                raise AssertionError(f"call {i} accepted the name {bad!r}")
    # Nothing was submitted: "grad" is free, and the two names differ only after the NUL.
    done(W.allreduce(x, name="grad"))
    assert np.all(x == N)


def test_reducescatter():
    d0 = 2 * N + 1  # uneven: the first rank gets one row more
    x = np.arange(d0 * 2, dtype=np.float32).reshape(d0, 2) * (R + 1)
    total = np.arange(d0 * 2, dtype=np.float32).reshape(d0, 2) * (N * (N + 1) / 2)
    counts = [d0 // N + (r < d0 % N) for r in range(N)]
    off = sum(counts[:R])
    out = done(W.reducescatter(x, name="rs")).output(0)
    assert np.array_equal(out, total[off:off + counts[R]]), out
    xs = [x, x[:N].copy()]
    outs = done(W.grouped_reducescatter(xs, op=hcoll.MAX, name="g.rs")).outputs()
    assert np.array_equal(outs[1], (np.arange(N * 2, dtype=np.float32).reshape(N, 2) * N)[R:R + 1])


def test_read_only_outputs_rejected():
    """Writing a result into a read-only array raises ValueError before anything is submitted:
    the same name then works on every rank (a submitted one would be DUPLICATE_NAME or hang)."""
    ro = np.arange(4, dtype=np.float32)
    ro.flags.writeable = False
    ok = np.ones(4, dtype=np.float32)
    calls = [
        lambda: W.allreduce(ro, name="ro"),
        lambda: W.allreduce(ok, out=ro, name="ro"),
        lambda: W.grouped_allreduce([ok, ro], name="ro"),
        lambda: W.grouped_allreduce([ok], outs=[ro], name="ro"),
        lambda: W.broadcast(ro, root=0, name="ro"),
        lambda: W.grouped_broadcast([ok, ro], root=0, name="ro"),
    ]
    for i, call in enumerate(calls):
        try:
            call()
        except ValueError as e:
            assert "read-only" in str(e), e
        else:
            raise AssertionError(f"call {i} accepted a read-only output")
    # A read-only input is fine when the output is another array.
    out = np.zeros(4, dtype=np.float32)
    done(W.allreduce(ro, out=out, name="ro"))
    assert np.array_equal(out, np.arange(4, dtype=np.float32) * N)


def test_barrier_and_join():
    assert done(W.barrier()).result() == ()
    last = done(W.join()).result()
    assert last.shape == () and 0 <= int(last) < N


def test_split_create_destroy():
    sub = W.split(R % 2, key=-R)  # reversed order inside each color
    members = [r for r in range(N) if r % 2 == R % 2]
    assert sub.size == len(members)
    assert sub.rank == len(members) - 1 - members.index(R)
    x = np.full(3, R, dtype=np.int64)
    done(sub.allreduce(x, name="split"))
    assert np.all(x == sum(members))
    sub.destroy()
    none = W.split(None if R == 0 else 1)
    assert (none is None) == (R == 0)
    if none is not None:
        none.destroy()
    ranks = list(reversed(range(N)))
    rev = W.create(ranks)
    assert rev.rank == N - 1 - R and rev.size == N
    y = np.full(2, rev.rank, dtype=np.float32)
    done(rev.allreduce(y))
    assert np.all(y == N * (N - 1) / 2)
    assert rev.stats()["cycles"] > 0
    rev.destroy()
    solo = W.create([0])
    assert (solo is not None) == (R == 0)
    if solo is not None:
        assert solo.size == 1
        solo.destroy()


def test_stats():
    s = W.stats()
    assert set(s) == {"cycles", "slow_path_negotiations", "cache_hits", "backend_calls",
                      "fused_tensors", "bytes", "queue_depth", "caller_rounds", "folded"}
    assert s["cycles"] > 0 and s["backend_calls"] > 0 and s["bytes"] > 0


def test_stats_reads_caller_rounds():
    # A waiting caller runs rounds itself (caller progress, on by default); the binding must ask
    # for that field too (its mask once lacked the bit, and caller_rounds always read 0). A pause
    # before each call lets the communicator's thread fall asleep, as in test_progress.cc.
    import time
    before = W.stats()["caller_rounds"]
    for k in range(30):
        time.sleep(0.001)
        done(W.allreduce(np.ones(4, dtype=np.float32), name=f"caller_rounds.{k}"))
    assert W.stats()["caller_rounds"] > before


def test_request_test_polls():
    req = W.allreduce(np.ones(3, dtype=np.float32), name="poll")
    import time
    deadline = time.time() + harness.WAIT_S
    while not req.test():
        assert time.time() < deadline
        time.sleep(0.001)
    assert req.error == ""


def teardown():
    hcoll.shutdown()
    assert not hcoll.is_initialized()


if __name__ == "__main__":
    harness.run(globals(), setup, teardown)
