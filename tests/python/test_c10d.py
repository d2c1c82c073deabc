"""hcoll's torch.distributed backend: every call, through torch.distributed's own API.

Run: mpiexec.mpich -n 2 /usr/bin/python3 tests/python/test_c10d.py   (any size >= 2)
The cases marked "peer:" re-express the backend-generic checks of PyTorch's own distributed
tests (torch/testing/_internal/distributed/distributed_test.py, DistributedTest._DistTestBase,
and test/distributed/test_c10d_common.py) against backend "hcoll"; docs/torch_distributed.md
lists them and the ones that do not apply.
"""

import c10d_testing as T
import torch
import torch.distributed as dist

hdist = T.init()
rank, size = dist.get_rank(), dist.get_world_size()
INT_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def test_backend_and_group_info():  # peer: test_get_backend, test_get_rank, test_get_rank_size_group
    assert dist.get_backend() == "hcoll"
    assert dist.is_initialized()
    assert isinstance(dist.distributed_c10d._get_default_group(), hdist.ProcessGroupHcoll)
    assert 0 <= rank < size and size >= 2


def test_broadcast_every_root_and_dtype():  # peer: test_broadcast (_test_broadcast_helper)
    for dtype in INT_DTYPES + FLOAT_DTYPES + [torch.bool]:
        for root in range(size):
            x = torch.full((5, 3), rank + 10, dtype=torch.int64).to(dtype)
            dist.broadcast(x, src=root)
            assert torch.equal(x, torch.full((5, 3), root + 10, dtype=torch.int64).to(dtype)), \
                (dtype, root, x)


def test_allreduce_ops_and_dtypes():  # peer: test_all_reduce_{sum,product,min,max}
    for dtype in INT_DTYPES + FLOAT_DTYPES:
        ref = [torch.arange(7, dtype=torch.int64) % 3 + r + 1 for r in range(size)]
        expect = {dist.ReduceOp.SUM: sum(ref), dist.ReduceOp.MIN: torch.stack(ref).min(0).values,
                  dist.ReduceOp.MAX: torch.stack(ref).max(0).values,
                  dist.ReduceOp.PRODUCT: torch.stack(ref).prod(0)}
        for op, want in expect.items():
            x = ref[rank].to(dtype).clone()
            dist.all_reduce(x, op=op)
            assert torch.equal(x, want.to(dtype)), (dtype, op, x, want)


def test_allreduce_complex_sum():  # peer: test_all_reduce_sum_complex (torch views it as real)
    z = torch.full((3,), complex(rank, -rank), dtype=torch.complex64)
    dist.all_reduce(z)
    tri = size * (size - 1) / 2
    assert torch.equal(z, torch.full((3,), complex(tri, -tri), dtype=torch.complex64))


def test_allreduce_average_and_bool():
    x = torch.full((4,), float(rank + 1))
    dist.all_reduce(x, op=dist.ReduceOp.AVG)
    assert torch.equal(x, torch.full((4,), (size + 1) / 2))
    b = torch.tensor([rank == 0, False, True])
    dist.all_reduce(b, op=dist.ReduceOp.MAX)  # OR
    assert b.tolist() == [True, False, True]
    b = torch.tensor([rank == 0, True])
    dist.all_reduce(b, op=dist.ReduceOp.MIN)  # AND
    assert b.tolist() == [False, True]


def test_allreduce_async_work_and_future():  # peer: test_all_reduce_sum_async, get_future
    x = torch.ones(1000) * (rank + 1)
    work = dist.all_reduce(x, async_op=True)
    fut = work.get_future()
    T.done(work)
    # (Work.exception() has no Python conversion in torch 1.13 itself: not called.)
    assert work.is_completed() and work.is_success()
    assert torch.equal(x, torch.ones(1000) * (size * (size + 1) / 2))
    assert torch.equal(fut.wait()[0], x)
    # A chained callback runs once the Work completes (what DDP's comm hooks build on).
    y = torch.ones(3) * rank
    chained = dist.all_reduce(y, async_op=True).get_future().then(lambda f: f.value()[0] * 2)
    assert torch.equal(chained.wait(), torch.ones(3) * size * (size - 1))


def test_many_async_in_flight_complete_in_any_wait_order():
    xs = [torch.full((17,), float(rank * 100 + i)) for i in range(20)]
    works = [dist.all_reduce(x, async_op=True) for x in xs]
    for w in reversed(works):
        T.done(w)
    base = sum(r * 100 for r in range(size))
    for i, x in enumerate(xs):
        assert torch.equal(x, torch.full((17,), float(base + size * i)))


def test_allreduce_noncontiguous_scalar_and_empty():
    s = torch.tensor(float(rank + 1))  # 0-d
    dist.all_reduce(s)
    assert s.item() == size * (size + 1) / 2
    e = torch.empty(0)
    dist.all_reduce(e)
    assert e.numel() == 0


def test_allreduce_coalesced_is_one_grouped_call():  # peer: test_all_reduce_coalesced_*
    ts = [torch.full((3,), float(rank)), torch.full((2, 2), float(rank)),
          torch.full((1,), float(rank + 1))]  # torch requires one dtype here
    dist.all_reduce_coalesced(ts, op=dist.ReduceOp.SUM)
    tri = size * (size - 1) // 2
    assert torch.equal(ts[0], torch.full((3,), float(tri)))
    assert torch.equal(ts[1], torch.full((2, 2), float(tri)))
    assert torch.equal(ts[2], torch.full((1,), float(tri + size)))
    # One grouped allreduce: the three tensors share ONE backend call (fused), whereas three
    # separate all_reduce calls waited one by one take three.
    pg = dist.distributed_c10d._get_default_group()
    ts = [torch.full((2,), float(rank + 1)) for _ in range(3)]
    before = pg.stats()
    dist.all_reduce_coalesced(ts, op=dist.ReduceOp.MAX)
    after = pg.stats()
    assert after["backend_calls"] - before["backend_calls"] == 1, (before, after)
    assert after["fused_tensors"] - before["fused_tensors"] == 3, (before, after)
    for t in [torch.ones(2) for _ in range(3)]:
        dist.all_reduce(t)
    # (A lone small allreduce may ride in its readiness round instead: "folded", no backend call.)
    end = pg.stats()
    assert (end["backend_calls"] - after["backend_calls"]) + (end["folded"] - after["folded"]) == 3
    assert all(torch.equal(t, torch.full((2,), float(size))) for t in ts)


def test_reduce_to_every_root():  # peer: test_reduce_{sum,product,min,max}
    for root in range(size):
        for op, want in ((dist.ReduceOp.SUM, size * (size + 1) / 2),
                         (dist.ReduceOp.MAX, float(size)), (dist.ReduceOp.MIN, 1.0)):
            x = torch.full((6,), float(rank + 1))
            dist.reduce(x, dst=root, op=op)
            if rank == root:
                assert torch.equal(x, torch.full((6,), want)), (root, op, x)
            else:
                assert torch.equal(x, torch.full((6,), float(rank + 1))), "non-root changed"


def test_allgather_list():  # peer: test_all_gather
    for dtype in [torch.float32, torch.int64, torch.float16, torch.bool]:
        x = torch.full((2, 3), rank + 1, dtype=torch.int64).to(dtype)
        outs = [torch.zeros(2, 3, dtype=dtype) for _ in range(size)]
        dist.all_gather(outs, x)
        for r, o in enumerate(outs):
            assert torch.equal(o, torch.full((2, 3), r + 1, dtype=torch.int64).to(dtype))


def test_allgather_base():  # peer: test_all_gather_into_tensor / _all_gather_base
    x = torch.arange(4, dtype=torch.float32) + 10 * rank
    out = torch.zeros(size * 4)
    dist._all_gather_base(out, x)
    assert torch.equal(out, torch.cat([torch.arange(4.0) + 10 * r for r in range(size)]))
    out2 = torch.zeros(size, 4)  # the output as [size, n]
    dist._all_gather_base(out2, x)
    assert torch.equal(out2.flatten(), out)


def test_gather_and_scatter_every_root():  # peer: test_gather, test_scatter
    for root in range(size):
        x = torch.full((3,), float(rank + 1))
        outs = [torch.zeros(3) for _ in range(size)] if rank == root else []
        dist.gather(x, gather_list=outs if rank == root else None, dst=root)
        if rank == root:
            for r, o in enumerate(outs):
                assert torch.equal(o, torch.full((3,), float(r + 1)))
        y = torch.zeros(2, 2)
        ins = [torch.full((2, 2), float(r * 7 + root)) for r in range(size)] if rank == root \
            else None
        dist.scatter(y, scatter_list=ins, src=root)
        assert torch.equal(y, torch.full((2, 2), float(rank * 7 + root)))


def test_reduce_scatter_list_and_base():  # peer: test_reduce_scatter / _reduce_scatter_base
    ins = [torch.full((3,), float(rank * 10 + r)) for r in range(size)]
    out = torch.zeros(3)
    dist.reduce_scatter(out, ins)
    assert torch.equal(out, torch.full((3,), float(sum(q * 10 + rank for q in range(size)))))
    big = torch.arange(size * 4, dtype=torch.float32) * (rank + 1)
    out = torch.zeros(4)
    dist._reduce_scatter_base(out, big, op=dist.ReduceOp.MAX)
    assert torch.equal(out, (torch.arange(4, dtype=torch.float32) + 4 * rank) * size)


def test_alltoall_single_equal_and_unequal_split():  # peer: test_all_to_all_single_*
    x = torch.arange(size * 2, dtype=torch.float32) + 100 * rank
    out = torch.zeros(size * 2)
    dist.all_to_all_single(out, x)
    assert torch.equal(out, torch.cat([torch.tensor([2.0 * rank, 2.0 * rank + 1]) + 100 * r
                                       for r in range(size)]))
    # Unequal: rank r sends (i + 1) rows of width 3 to rank i; receives (r + 1) rows from each.
    in_splits = [i + 1 for i in range(size)]
    out_splits = [rank + 1] * size
    x = torch.full((sum(in_splits), 3), float(rank))
    out = torch.zeros(sum(out_splits), 3)
    dist.all_to_all_single(out, x, out_splits, in_splits)
    assert torch.equal(out, torch.cat([torch.full((rank + 1, 3), float(r))
                                       for r in range(size)]))


def test_alltoall_list():  # peer: test_all_to_all (unequal sizes per peer)
    ins = [torch.full((i + 1,), float(rank * 10 + i)) for i in range(size)]
    outs = [torch.zeros(rank + 1) for _ in range(size)]
    dist.all_to_all(outs, ins)
    for r, o in enumerate(outs):
        assert torch.equal(o, torch.full((rank + 1,), float(r * 10 + rank)))


def test_barrier_orders_store_writes():  # peer: test_barrier
    store = dist.distributed_c10d._get_default_store()
    store.set(f"barrier.{rank}", "here")
    dist.barrier()
    for r in range(size):  # everyone wrote before anyone passed the barrier
        assert store.get(f"barrier.{r}") == b"here"


def test_object_collectives():  # peer: test_{broadcast,scatter}_object_list, all_gather_object
    objs = [{"rank": rank, "v": [rank] * 3}]
    gathered = [None] * size
    dist.all_gather_object(gathered, objs[0])
    assert gathered == [{"rank": r, "v": [r] * 3} for r in range(size)]
    lst = [f"from-{rank}", rank * 2]
    dist.broadcast_object_list(lst, src=size - 1)
    assert lst == [f"from-{size - 1}", (size - 1) * 2]


def test_new_group_subset_and_full():  # peer: test_*_group, test_*_full_group, test_destroy_group
    full = dist.new_group()
    x = torch.ones(2) * rank
    dist.all_reduce(x, group=full)
    assert torch.equal(x, torch.ones(2) * (size * (size - 1) / 2))
    members = [0, size - 1]
    sub = dist.new_group(members)
    if rank in members:
        assert isinstance(sub, hdist.ProcessGroupHcoll) and sub.size() == 2
        y = torch.full((3,), float(rank))
        dist.all_reduce(y, group=sub)
        assert torch.equal(y, torch.full((3,), float(sum(members))))
        z = torch.full((2,), float(rank))
        dist.broadcast(z, src=size - 1, group=sub)  # src: a global rank
        assert torch.equal(z, torch.full((2,), float(size - 1)))
        # Its own communicator: an op on the world interleaves freely with the subgroup's.
        w = dist.all_reduce(torch.ones(1), group=sub, async_op=True)
        T.done(w)
    else:
        assert sub == dist.GroupMember.NON_GROUP_MEMBER
    dist.barrier()
    dist.destroy_process_group(sub)
    dist.destroy_process_group(full)


def test_gloo_subgroup_next_to_hcoll():  # a new_group of another backend under an hcoll default
    g = dist.new_group(backend="gloo")
    x = torch.ones(2) * (rank + 1)
    dist.all_reduce(x, group=g)
    assert torch.equal(x, torch.ones(2) * (size * (size + 1) / 2))
    dist.destroy_process_group(g)


def test_named_grouped_allreduce_any_submission_order():
    pg = dist.distributed_c10d._get_default_group()
    a, b = torch.full((4,), float(rank)), torch.full((4,), float(rank * 2))
    # Names match operations across ranks whatever order each rank submits them in.
    pairs = [("x.a", a), ("x.b", b)] if rank % 2 == 0 else [("x.b", b), ("x.a", a)]
    works = [pg.grouped_allreduce([t], name=n, op="sum") for n, t in pairs]
    for w in works:
        T.done(w)
    tri = size * (size - 1) / 2
    assert torch.equal(a, torch.full((4,), tri)) and torch.equal(b, torch.full((4,), 2 * tri))
    mixed = [torch.full((2,), rank, dtype=torch.int32), torch.full((3,), float(rank),
                                                                    dtype=torch.float64)]
    T.done(pg.grouped_allreduce(mixed, name="mixed", op="max"))
    assert torch.equal(mixed[0], torch.full((2,), size - 1, dtype=torch.int32))
    assert torch.equal(mixed[1], torch.full((3,), float(size - 1), dtype=torch.float64))
    c = torch.full((2,), float(rank + 1))
    T.done(pg.grouped_allreduce([c], name="scaled", op="average", prescale=2.0, postscale=0.5))
    assert torch.allclose(c, torch.full((2,), (size + 1) / 2))


T.run(globals(), teardown=dist.destroy_process_group)
