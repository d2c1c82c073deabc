"""Bad input to hcoll's torch.distributed backend: a Python exception on EVERY rank, never a
hang, and the group keeps working afterwards.

Run: mpiexec.mpich -n 2 /usr/bin/python3 tests/python/test_c10d_errors.py
Cases where only one rank's arguments are wrong matter most: that rank fails before submitting,
and the others must fail too (a mismatching stand-in operation) instead of waiting for it.
"""

from datetime import timedelta

import c10d_testing as T
import torch
import torch.distributed as dist

hdist = T.init(timeout=timedelta(seconds=60))
rank, size = dist.get_rank(), dist.get_world_size()


def everywhere(fn, *fragments):
    """fn must raise on this rank (sync or from wait); then the group must still work."""
    T.raises(fn, *fragments)
    x = torch.ones(3) * rank
    dist.all_reduce(x)
    assert torch.equal(x, torch.ones(3) * (size * (size - 1) / 2)), "group broken afterwards"


def test_unsupported_reduce_ops_everywhere():
    for op, name in ((dist.ReduceOp.BAND, "BAND"), (dist.ReduceOp.BOR, "BOR"),
                     (dist.ReduceOp.BXOR, "BXOR")):
        everywhere(lambda: dist.all_reduce(torch.ones(2, dtype=torch.int32), op=op), name)


def test_unsupported_dtype_everywhere():
    # torch.distributed's own all_reduce views complex as real pairs (a SUM then works, see
    # test_c10d.py); the process group called directly gets the complex tensor itself.
    pg = dist.distributed_c10d._get_default_group()
    everywhere(lambda: T.done(pg.allreduce([torch.ones(2, dtype=torch.complex64)])), "ComplexFloat")
    q = torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.qint8)
    everywhere(lambda: T.done(pg.broadcast(q, 0)), "unsupported dtype")


def test_unsupported_calls_name_themselves():
    everywhere(lambda: dist.send(torch.ones(1), dst=(rank + 1) % size), "send")
    everywhere(lambda: dist.recv(torch.ones(1), src=(rank + 1) % size), "recv")
    everywhere(lambda: dist.monitored_barrier(), "monitored_barrier")
    everywhere(lambda: dist.all_gather_coalesced([[torch.zeros(1)] * size], [torch.ones(1)]),
               "allgather_coalesced")


def test_dtype_differs_across_ranks():
    dtype = torch.float32 if rank == 0 else torch.int32
    everywhere(lambda: dist.all_reduce(torch.ones(4, dtype=dtype)), "disagreed")


def test_shape_differs_across_ranks():
    everywhere(lambda: dist.all_reduce(torch.ones(4 + rank)), "disagreed")
    everywhere(lambda: dist.broadcast(torch.ones(2, 1 + rank), src=0), "disagreed")
    everywhere(lambda: dist.all_gather([torch.zeros(2 + rank) for _ in range(size)],
                                       torch.ones(2 + rank)), "disagreed")


def test_wrong_output_list_on_one_rank_only():
    n = size if rank != 0 else size + 1  # rank 0 alone passes a list of the wrong length
    outs = [torch.zeros(2) for _ in range(n)]
    everywhere(lambda: dist.all_gather(outs, torch.ones(2)), "")


def test_noncontiguous_on_one_rank_only():
    # Same shape everywhere; rank 0's is a transposed view (not contiguous).
    t = torch.ones(2, 4).t() if rank == 0 else torch.ones(4, 2)
    everywhere(lambda: dist.all_reduce(t), "")


def test_bad_sizes_in_base_calls():
    everywhere(lambda: dist._all_gather_base(torch.zeros(size * 3 + 1), torch.ones(3)),
               "elements")
    everywhere(lambda: dist._reduce_scatter_base(torch.zeros(2), torch.ones(size * 2 + 1)),
               "elements")
    bad = [1] * (size - 1) + [2]  # sums to size + 1 rows, the input has size
    everywhere(lambda: dist.all_to_all_single(torch.zeros(size), torch.ones(size), None, bad),
               "split")


def test_split_sizes_disagree_between_ranks():
    # Each rank's splits are self-consistent, but rank 0 expects one row from each rank and
    # receives a different count: rank 0 sends 2 rows to every rank, the others 1.
    rows = 2 if rank == 0 else 1
    x = torch.ones(rows * size)
    out = torch.zeros(size)
    everywhere(lambda: dist.all_to_all_single(out, x), "")


def test_bad_root_everywhere():
    everywhere(lambda: dist.broadcast(torch.ones(1), src=size + 3), "")


def test_work_wait_timeout_raises_and_op_goes_on():
    # Rank 0 submits first and waits 0.2 s while the others only submit after a barrier of the
    # store: the wait times out, the operation still completes afterwards.
    import time
    x = torch.ones(2)
    if rank == 0:
        w = dist.all_reduce(x, async_op=True)
        T.raises(lambda: w.wait(timedelta(milliseconds=200)), "timed out")
        dist.distributed_c10d._get_default_store().set("go", "1")
        T.done(w)
    else:
        dist.distributed_c10d._get_default_store().wait(["go"])
        time.sleep(0.05)
        w = dist.all_reduce(x, async_op=True)
        T.done(w)
    assert torch.equal(x, torch.ones(2) * size)


def test_world_size_mismatch_is_a_clear_error():
    # hcoll's MPI world has `size` processes: a group claiming another size is refused on every
    # rank, with the reason, before anything collective.
    lib = hdist._load_library()
    T.raises(lambda: hdist._ext.Communicator.world(lib, rank, size + 1, timedelta(seconds=5)),
             "mpiexec")


T.run(globals(), teardown=dist.destroy_process_group)
