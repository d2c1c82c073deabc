"""The binding's side of the ABI decisions (issue 10).
- Loading: libhcoll.so.0 is loaded RTLD_LOCAL, so none of its hcoll_* names enters the process's
  global scope (NVIDIA's libhcoll.so.1 uses the same prefix), while the MPI library it pulled in
  is global (Open MPI's components expect that). Also the version functions.
- wait(timeout) whose own timeout passes returns False (C: IN_PROGRESS), never raises TIMEOUT.
- out=/outs= on allgather, alltoall, reducescatter and their grouped forms: the result lands in
  the caller's array (the C *_into calls, no copy); a wrong size raises ERR_MISMATCH everywhere.
Run: mpiexec.mpich -n 2 /usr/bin/python3 tests/python/test_abi.py"""

import ctypes

import harness
from harness import done

import hcoll
from hcoll import _lib

W = None


def setup():
    global W
    W, _, _ = harness.setup_world()
    return W


def global_has(name):
    """Whether `name` resolves in the global scope (dlsym(RTLD_DEFAULT, name))."""
    try:
        getattr(ctypes.CDLL(None), name)
        return True
    except AttributeError:
        return False


def test_hcoll_names_are_not_global():
    for name in _lib.PROTOTYPES:
        assert hasattr(_lib.lib, name), name  # reachable through the binding's handle
        assert not global_has(name), f"{name} leaked into the global scope"


def test_mpi_is_global():
    assert global_has("MPI_Init") and global_has("MPI_Allreduce")


def test_version():
    major, minor, patch = hcoll.version()
    assert hcoll.version_string() == f"{major}.{minor}.{patch}"
    assert (major, minor) == (0, 1)


def test_collective_runs():
    import numpy as np
    x = np.full(4, W.rank + 1, dtype=np.int64)
    done(W.allreduce(x, name="loading"))
    assert (x == W.size * (W.size + 1) // 2).all(), x


def test_wait_timeout_is_in_progress_not_failure():
    import numpy as np
    x = np.full(3, W.rank + 1, dtype=np.int32)
    if W.rank == 0:
        req = W.allreduce(x, name="late")
        assert req.wait(timeout=0.001) is False  # the peer has not submitted yet
        assert req.error == ""
        assert req.test() is False  # still valid and in flight
        done(W.barrier())  # the peer submits only after this
    else:
        done(W.barrier())
        req = W.allreduce(x, name="late")
    assert req.wait(timeout=harness.WAIT_S) is True
    assert (x == W.size * (W.size + 1) // 2).all(), x


def test_out_arrays_receive_results_without_copy():
    import numpy as np
    r, n = W.rank, W.size
    # allgather: rank k gives k + 1 rows of 2
    x = np.full((r + 1, 2), r, dtype=np.float32)
    total = n * (n + 1) // 2
    out = np.full((total, 2), -1, dtype=np.float32)
    req = W.allgather(x, name="py.ag.out", out=out)
    got = req.result()
    assert got is out
    assert np.array_equal(out, np.concatenate([np.full((k + 1, 2), k, np.float32)
                                               for k in range(n)]))
    # the request's output 0 is a view of the caller's memory, not a copy
    view = req.output(0, copy=False)
    assert view.ctypes.data == out.ctypes.data and view.shape == out.shape
    # grouped allgather
    outs = [np.zeros(n, np.int64), np.zeros((2 * n, 3), np.int16)]
    done(W.grouped_allgather([np.array([r], np.int64), np.full((2, 3), r, np.int16)],
                             name="py.gag.out", outs=outs))
    assert list(outs[0]) == list(range(n))
    assert np.array_equal(outs[1][::2, 0], np.arange(n))
    # alltoall into a larger buffer: the spare row stays as it was
    send = np.arange(2 * n, dtype=np.int32) + 100 * r
    recv = np.full(2 * n + 1, -7, dtype=np.int32)
    req = done(W.alltoall(send, name="py.a2a.out", out=recv))
    assert req.received_splits() == [2] * n
    want = np.concatenate([np.arange(2 * r, 2 * r + 2) + 100 * k for k in range(n)])
    assert np.array_equal(recv[:2 * n], want) and recv[-1] == -7, recv
    # reducescatter and grouped reducescatter
    d0 = 2 * n + 1
    rows = d0 // n + (1 if r < d0 % n else 0)
    off = r * (d0 // n) + min(r, d0 % n)
    src = np.arange(d0 * 2, dtype=np.float64).reshape(d0, 2)
    o = np.zeros((rows, 2))
    assert W.reducescatter(src, name="py.rs.out", out=o).result() is o
    assert np.array_equal(o, n * src[off:off + rows])
    os_ = [np.zeros((rows, 2)), np.zeros(1 if r < n else 0, np.int32)]
    done(W.grouped_reducescatter([src, np.ones(n, np.int32)], name="py.grs.out", outs=os_))
    assert np.array_equal(os_[0], n * src[off:off + rows]) and list(os_[1]) == [n]


def test_out_of_wrong_size_is_mismatch_on_every_rank():
    import numpy as np
    r, n = W.rank, W.size
    bad = r == n - 1
    out = np.full(n + (1 if bad else 0), 9, dtype=np.int64)
    req = W.allgather(np.array([r], np.int64), name="py.ag.bad", out=out)
    try:
        req.wait(timeout=harness.WAIT_S)
        raise AssertionError("a wrong-sized out= did not fail")
    except hcoll.HcollError as e:
        assert e.status == hcoll.ERR_MISMATCH, e
        assert "py.ag.bad" in e.message and "dim0" in e.message, e.message
    assert (out == 9).all(), out  # never written


if __name__ == "__main__":
    harness.run(globals(), setup=setup, teardown=hcoll.shutdown)
