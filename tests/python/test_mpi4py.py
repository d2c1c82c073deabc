"""mpi4py interop: mpi4py initializes MPI, hcoll uses it and leaves finalization to mpi4py.
Debian's mpi4py is built against Open MPI, so this runs against an Open MPI build of hcoll:
  mpiexec.openmpi --allow-run-as-root --oversubscribe -n 2 /usr/bin/python3 test_mpi4py.py
Reference results come from mpi4py itself."""

from mpi4py import MPI  # initializes MPI (MPI_THREAD_MULTIPLE by default)

import numpy as np

import harness
from harness import done

import hcoll

WORLD = MPI.COMM_WORLD
R, N = WORLD.Get_rank(), WORLD.Get_size()


class _Ctx:
    rank = R


def setup():
    assert MPI.Query_thread() == MPI.THREAD_MULTIPLE
    hcoll.initialize(WORLD)  # an mpi4py communicator as the world (via py2f)
    return _Ctx()


def test_world_matches_mpi4py():
    w = hcoll.world()
    assert (w.rank, w.size) == (R, N)
    x = np.arange(5, dtype=np.float64) * (R + 1)
    ref = np.empty_like(x)
    WORLD.Allreduce(x, ref, op=MPI.SUM)
    done(w.allreduce(x, name="w"))
    assert np.array_equal(x, ref)


def test_from_mpi_split_communicator():
    sub_mpi = WORLD.Split(color=R % 2, key=-R)
    sub = hcoll.Comm.from_mpi(sub_mpi)  # wraps a duplicate; sub_mpi stays usable
    assert (sub.rank, sub.size) == (sub_mpi.Get_rank(), sub_mpi.Get_size())
    x = np.full((2, 2), R + 1, dtype=np.int32)
    ref = np.concatenate(sub_mpi.allgather(x))
    out = done(sub.allgather(x, name="sub.ag")).output(0)
    assert np.array_equal(out, ref), (out, ref)
    y = np.full(3, float(R), dtype=np.float32)
    done(sub.allreduce(y, op=hcoll.MAX))
    assert np.all(y == sub_mpi.allreduce(float(R), op=MPI.MAX))
    sub.destroy()
    assert sub_mpi.allreduce(1) == sub_mpi.Get_size(), "the caller's communicator still works"
    sub_mpi.Free()


def test_from_mpi_fortran_handle_and_dup():
    dup = WORLD.Dup()
    comm = hcoll.Comm.from_mpi(dup.py2f())  # a plain Fortran handle works too
    x = np.ones(4, dtype=np.float32)
    done(comm.allreduce(x, op=hcoll.AVERAGE))
    assert np.all(x == 1.0)
    comm.destroy()
    dup.Free()


def teardown():
    hcoll.shutdown()
    assert not MPI.Is_finalized(), "hcoll must not finalize MPI that mpi4py owns"
    assert WORLD.allreduce(R) == N * (N - 1) // 2


if __name__ == "__main__":
    harness.run(globals(), setup, teardown)
