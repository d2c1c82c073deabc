"""The binding's side of the ABI decisions (issue 10).
- Loading: libhcoll.so.0 is loaded RTLD_LOCAL, so none of its hcoll_* names enters the process's
  global scope (NVIDIA's libhcoll.so.1 uses the same prefix), while the MPI library it pulled in
  is global (Open MPI's components expect that). Also the version functions.
- wait(timeout) whose own timeout passes returns False (C: IN_PROGRESS), never raises TIMEOUT.
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


if __name__ == "__main__":
    harness.run(globals(), setup=setup, teardown=hcoll.shutdown)
