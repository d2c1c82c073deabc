"""hcoll.torch.init with mpi4py communicators: one as the world, a list of them as process sets.
Debian's mpi4py is built against Open MPI, so this runs against an Open MPI build of hcoll:
  mpiexec.openmpi --allow-run-as-root --oversubscribe -n 2 /usr/bin/python3 test_torch_mpi4py.py
Reference results come from mpi4py itself."""

from mpi4py import MPI  # initializes MPI (MPI_THREAD_MULTIPLE by default)

import torch

import harness

import hcoll
import hcoll.torch as hvd

WORLD = MPI.COMM_WORLD
R, N = WORLD.Get_rank(), WORLD.Get_size()


class _Ctx:
    rank = R


def test_list_of_communicators_gives_process_sets():
    halves = WORLD.Split(color=R % 2, key=R)
    reverse = WORLD.Split(color=0, key=N - R)
    hvd.init([halves, reverse])
    try:
        glob, ps_half, ps_rev = hvd.process_sets()
        assert glob is hvd.global_process_set() and hvd.size() == N and hvd.rank() == R
        assert ps_half.size() == halves.Get_size() and ps_half.rank() == halves.Get_rank()
        assert ps_rev.rank() == reverse.Get_rank() == N - 1 - R
        x = torch.tensor([float(R)])
        want = halves.allreduce(float(R))
        assert hvd.allreduce(x, op=hvd.Sum, process_set=ps_half).item() == want
        got = hvd.allgather(torch.tensor([R]), process_set=ps_rev).tolist()
        assert got == reverse.allgather(R), got
    finally:
        hvd.shutdown()
    assert not hcoll.is_initialized()  # init() initialized hcoll, so shutdown() shut it down


def test_communicator_as_world():
    reverse = WORLD.Split(color=0, key=N - R)
    hvd.init(reverse)
    try:
        assert hvd.rank() == reverse.Get_rank() == N - 1 - R and hvd.size() == N
        got = hvd.broadcast(torch.tensor([R]), root_rank=0).item()
        assert got == reverse.bcast(R, root=0) == N - 1
        torch.manual_seed(R)  # different weights on every rank
        model = torch.nn.Linear(2, 2)
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        mine = torch.cat([p.detach().flatten() for p in model.parameters()]).tolist()
        assert WORLD.allgather(mine) == [mine] * N
    finally:
        hvd.shutdown()


if __name__ == "__main__":
    harness.run(globals(), lambda: _Ctx())
