"""torch CPU tensors through the Python binding, and errors surfacing as HcollError.
Run: mpiexec.mpich -n 2 /usr/bin/python3 tests/python/test_torch_errors.py"""

import numpy as np
import torch

import harness
from harness import done

import hcoll

W = None
R = N = 0


def setup():
    global W, R, N
    W, R, N = harness.setup_world()
    return W  # the runner reads .rank from it


def test_torch_allreduce_in_place_and_out():
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64):
        x = torch.full((2, 3), R + 1, dtype=dtype)
        done(W.allreduce(x, op=hcoll.SUM, name=f"t.ar.{dtype}"))
        assert torch.all(x == N * (N + 1) // 2), (dtype, x)
    x = torch.arange(4, dtype=torch.float32) * (R + 1)
    out = torch.empty_like(x)
    assert W.allreduce(x, out=out, op=hcoll.AVERAGE, name="t.avg").result() is out
    assert torch.equal(out, torch.arange(4, dtype=torch.float32) * (N + 1) / 2)


def test_torch_outputs_are_torch():
    x = torch.full((R + 1, 2), float(R), dtype=torch.bfloat16)
    out = done(W.allgather(x, name="t.ag")).output(0)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16
    assert out.shape == (N * (N + 1) // 2, 2)
    assert out[:, 0].tolist() == [float(r) for r in range(N) for _ in range(r + 1)]
    y = torch.arange(2 * N, dtype=torch.int32)
    rs = done(W.reducescatter(y, name="t.rs")).output(0)
    assert isinstance(rs, torch.Tensor) and rs.tolist() == [N * (2 * R), N * (2 * R + 1)]


def test_torch_grouped_keeps_references():
    # The tensors are created inline: only the request keeps them alive until wait().
    req = W.grouped_allreduce([torch.ones(1000) * (R + 1) for _ in range(4)], name="t.g")
    import gc
    gc.collect()
    outs = req.result()
    assert len(outs) == 4 and all(torch.all(t == N * (N + 1) / 2) for t in outs)


def expect_error(status, fn, contains=None):
    try:
        fn()
    except hcoll.HcollError as e:
        assert e.status == status, (e.status, status, e)
        assert e.status_name == hcoll._lib.STATUS_NAMES[status]
        assert e.message, "every failure carries a message"
        if contains:
            assert contains in e.message, e.message
        return e
    raise AssertionError(f"expected HcollError {status}")


def test_sync_errors():
    expect_error(hcoll.ERR_INVALID_ARGUMENT, lambda: W.allgather(np.ones((), np.float32)))
    expect_error(hcoll.ERR_INVALID_ARGUMENT, lambda: W.broadcast(np.ones(2), root=N))
    expect_error(hcoll.ERR_INVALID_ARGUMENT,
                 lambda: W.allreduce(np.ones(2), out=np.ones(3)))
    expect_error(hcoll.ERR_INVALID_ARGUMENT, lambda: W.allreduce(np.ones(2, np.bool_),
                                                                 op=hcoll.AVERAGE))
    try:
        W.allreduce(np.ones((4, 4))[:, 1])
        raise AssertionError("non-contiguous input accepted")
    except ValueError:
        pass
    try:
        W.allreduce([1, 2, 3])
        raise AssertionError("a list accepted")
    except TypeError:
        pass


def test_duplicate_name():
    a = np.ones(3, np.float32)
    # Only rank 0 tries the duplicate, and the other ranks submit their 'dup' after a barrier that
    # rank 0 enters after its attempt (a barrier may overtake named ops): otherwise the first 'dup'
    # can complete before the second call and the name is legitimately free again.
    if R == 0:
        first = W.allreduce(a, name="dup")
        expect_error(hcoll.ERR_DUPLICATE_NAME,
                     lambda: W.allreduce(np.ones(3, np.float32), name="dup"), contains="dup")
        assert not first.test(), "the first 'dup' is still in flight"
        done(W.barrier())
    else:
        done(W.barrier())
        first = W.allreduce(a, name="dup")
    done(first)
    assert np.all(a == N), "the first operation is unaffected"


def test_async_mismatch_then_recovers():
    x = np.ones(3 + R, np.float32)  # shapes differ across ranks
    req = W.allreduce(x, name="mm")
    try:
        req.wait(timeout=harness.WAIT_S)
        raise AssertionError("mismatch not reported")
    except hcoll.HcollError as e:
        assert e.status == hcoll.ERR_MISMATCH, e
        assert "mm" in e.message, e.message
    assert "mm" in req.error
    y = np.ones(2, np.float32)
    done(W.allreduce(y, name="after"))
    assert np.all(y == N), "the communicator keeps working after a mismatch"


def test_invalid_handles():
    req = done(W.barrier())
    req.free()
    expect_error(hcoll.ERR_INVALID_HANDLE, req.wait)
    sub = W.split(0)
    sub.destroy()
    expect_error(hcoll.ERR_INVALID_HANDLE, lambda: sub.rank)
    expect_error(hcoll.ERR_INVALID_ARGUMENT, W.destroy)  # the world is not destroyable


def test_wait_timeout_returns_false():
    if R == 0:  # rank 1 submits late: rank 0's short wait must time out, not fail
        req = W.allreduce(np.ones(1, np.float32), name="late")
        assert req.wait(timeout=0.01) is False
        assert not req.test()
    done(W.barrier())
    if R != 0:
        req = W.allreduce(np.ones(1, np.float32), name="late")
    done(req)


def teardown():
    hcoll.shutdown()
    expect_error(hcoll.ERR_NOT_INITIALIZED, hcoll.world)
    hcoll.initialize()  # initialize -> shutdown -> initialize works
    x = np.ones(1, np.float32)
    done(hcoll.allreduce(x))
    assert x[0] == N
    hcoll.shutdown()


if __name__ == "__main__":
    harness.run(globals(), setup, teardown)
