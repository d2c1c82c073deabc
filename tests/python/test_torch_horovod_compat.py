"""hcoll.torch as a drop-in for horovod.torch (issue 26), without a Horovod checkout: the build
and controller queries, the error kinds Horovod raises, Horovod's scaling formula, its gradient
conventions, root_rank as a global rank in process sets, the optimizer outside its process set,
the sparse path and the run-time timeline switch.
Run: mpiexec.mpich -n 2 (or -n 3) /usr/bin/python3 tests/python/test_torch_horovod_compat.py"""

import json
import os
import tempfile

import torch

import harness  # noqa: F401  (puts bindings/python on sys.path)

import hcoll
import hcoll.torch as hvd

R = N = 0


def setup():
    global R, N
    hvd.init()
    R, N = hvd.rank(), hvd.size()
    return hvd.global_process_set().comm


def tri(n):
    return n * (n + 1) // 2


def expect(exc, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc as e:
        return e
    raise AssertionError(f"{fn.__name__} did not raise {exc.__name__}")


def test_build_and_controller_queries():
    assert hvd.nccl_built() == hcoll.nccl_version()
    assert isinstance(hvd.nccl_built(), int) and (hvd.nccl_built() == 0 or hvd.nccl_built() > 2000)
    assert bool(hvd.nccl_built()) == hcoll.nccl_built() == hvd.cuda_built()
    assert hvd.mpi_built() and hvd.mpi_enabled() and hvd.mpi_threads_supported()
    assert not (hvd.gloo_built() or hvd.gloo_enabled() or hvd.ccl_built() or hvd.rocm_built())
    # one node: every rank has its own local_rank, so it is alone in its cross communicator
    assert (hvd.cross_rank(), hvd.cross_size(), hvd.is_homogeneous()) == (0, 1, True)
    assert hvd.HorovodInternalError is hcoll.HcollError


def test_argument_errors_are_value_errors():
    # Each rank in turn holds an operation the others have not submitted yet, so it is certainly
    # still in flight when the same name comes again (with every rank submitting at once, the
    # first could complete before the second call, and nothing would be a duplicate).
    for turn in range(N):
        if R == turn:
            h = hvd.allreduce_async(torch.ones(3), name=f"dup.{turn}")
            e = expect(ValueError, hvd.allreduce_async, torch.ones(3), name=f"dup.{turn}")
            assert isinstance(e, hcoll.HcollError) and e.status == hcoll.ERR_DUPLICATE_NAME
        hvd.barrier()  # overtakes the pending "dup.<turn>" (SPEC: barrier)
        if R != turn:
            h = hvd.allreduce_async(torch.ones(3), name=f"dup.{turn}")
        assert torch.equal(hvd.synchronize(h), torch.ones(3))  # the first is unaffected
    expect(ValueError, hvd.alltoall, torch.ones(N), torch.ones(N))           # float splits
    expect(ValueError, hvd.alltoall, torch.ones(N), [1.0] * N)
    expect(ValueError, hvd.alltoall, torch.ones(N + 1))                      # uneven
    expect(ValueError, hvd.allgather, torch.tensor(1.0))                     # 0-d
    expect(TypeError, hvd.allreduce, torch.ones(2, dtype=torch.complex64))
    # async failures stay RuntimeErrors (HorovodInternalError), not ValueErrors
    e = expect(RuntimeError, hvd.allreduce, torch.ones(R + 1), name="mismatch")
    assert not isinstance(e, ValueError) and e.status == hcoll.ERR_MISMATCH


def test_float32_scaling_is_horovods_formula():
    torch.manual_seed(7)
    x = torch.empty(4096).uniform_(-100, 100)
    for factor in (0.123456789, 1.0 / 3.0, 0.7071067811865476):
        got = hvd.allreduce(x, op=hvd.Sum, prescale_factor=factor, name="pre")
        scaled = torch.tensor(factor, dtype=torch.float32) * x  # Horovod: float * float
        want = scaled.clone()
        for _ in range(N - 1):
            want += scaled
        assert torch.equal(got, want), (got - want).abs().max()
        got = hvd.allreduce(x, op=hvd.Average, postscale_factor=factor, name="post")
        total = x.clone()
        for _ in range(N - 1):
            total += x
        # Horovod: postscale in float, then the division by the size in torch
        want = (torch.tensor(factor, dtype=torch.float32) * total) / N
        assert torch.equal(got, want), (got - want).abs().max()
        assert torch.equal(hvd.allreduce(x, name="avg"), total / N)
        ints = torch.arange(-7, 8, dtype=torch.int64) * (R + 1)
        assert torch.equal(hvd.allreduce(ints, name="avg.int"),
                           (torch.arange(-7, 8) * tri(N)).div(N, rounding_mode="trunc"))


def test_gradients_follow_horovod():
    # allgather: the Average of the output gradients, this rank's rows
    x = torch.ones(R + 1, 2, requires_grad=True)
    out = hvd.allgather(x, name="ag")
    (out * (torch.arange(out.shape[0]).unsqueeze(1) + 1.0)).sum().backward()
    offset = sum(range(1, R + 1))
    assert torch.equal(x.grad, (torch.arange(offset, offset + R + 1).unsqueeze(1) + 1.0).expand(
        R + 1, 2))
    # grouped_allgather: the same per member
    a = torch.ones(2, requires_grad=True)
    b = torch.ones(1, 3, requires_grad=True)
    ga, gb = hvd.grouped_allgather([a, b], name="gag")
    (ga.sum() * (R + 1) + gb.sum()).backward()
    assert torch.allclose(a.grad, torch.full((2,), (N + 1) / 2)) and torch.equal(
        b.grad, torch.ones(1, 3))
    # broadcast: the Average on the root, zero elsewhere
    y = torch.ones(3, requires_grad=True)
    (hvd.broadcast(y, root_rank=N - 1, name="bc") * (R + 1)).sum().backward()
    assert torch.allclose(y.grad, torch.full((3,), (N + 1) / 2 if R == N - 1 else 0.0))
    # reducescatter: allgather of the gradient, x size for Sum, x pre x post
    for op, scale in ((hvd.Sum, float(N)), (hvd.Average, 1.0)):
        z = torch.ones(2 * N, requires_grad=True)
        hvd.reducescatter(z, op=op, prescale_factor=2.0, name=f"rs{op}").sum().backward()
        assert torch.equal(z.grad, torch.full((2 * N,), 2.0 * scale)), (op, z.grad)
        u = torch.ones(N, requires_grad=True)
        v = torch.ones(2 * N, 2, requires_grad=True)
        outs = hvd.grouped_reducescatter([u, v], op=op, name=f"grs{op}")
        (outs[0].sum() + 3 * outs[1].sum()).backward()
        assert torch.equal(u.grad, torch.full((N,), scale))
        assert torch.equal(v.grad, torch.full((2 * N, 2), 3 * scale))


def test_root_rank_is_global_in_process_sets():
    members = list(range(N - 1, -1, -1))  # set rank i is global rank N-1-i
    ps = hvd.add_process_set(members)
    root = 0  # global rank 0: the set's last rank
    got = hvd.broadcast(torch.tensor([float(R)]), root_rank=root, process_set=ps, name="psb")
    assert got.item() == 0.0
    t = torch.tensor([float(R)])
    hvd.broadcast_(t, root_rank=N - 1, process_set=ps, name="psb_")
    assert t.item() == N - 1
    assert hvd.broadcast_object({"r": R}, root_rank=root, process_set=ps) == {"r": 0}
    sub = hvd.add_process_set([N - 1])
    if R == N - 1:
        expect(ValueError, hvd.broadcast, torch.ones(1), root_rank=0, process_set=sub)
    hvd.remove_process_set(sub)
    hvd.remove_process_set(ps)


def test_optimizer_outside_its_process_set_does_not_communicate():
    ps = hvd.add_process_set([0])
    model = torch.nn.Linear(3, 1)
    with torch.no_grad():
        model.weight.fill_(1.0)
        model.bias.zero_()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0), process_set=ps)
    assert sorted(opt._parameter_names.values()) == ["allreduce.noname.0.0",
                                                     "allreduce.noname.0.1"]
    model(torch.full((1, 3), float(R + 1))).sum().backward()
    opt.step()  # rank 0 alone "averages"; the others step on their own gradients
    assert torch.equal(model.weight, torch.full((1, 3), 1.0 - (R + 1)))
    hvd.barrier()
    hvd.remove_process_set(ps)


def test_sparse_allreduce_and_optimizer():
    t = torch.sparse_coo_tensor([[R, N]], [1.0, 2.0], (N + 1,))
    got = hvd.sparse_allreduce_async(t, name="sp", op=hvd.Average)()
    assert got.is_sparse
    want = torch.full((N + 1,), 1.0 / N)
    want[N] = 2.0
    assert torch.allclose(got.to_dense(), want)
    for as_dense in (False, True):
        emb = torch.nn.Embedding(N + 1, 2, sparse=True)
        with torch.no_grad():
            emb.weight.zero_()
        opt = hvd.DistributedOptimizer(torch.optim.SGD(emb.parameters(), lr=1.0),
                                       sparse_as_dense=as_dense)
        opt.zero_grad()
        emb(torch.tensor([R, N])).sum().backward()
        opt.step()
        want = torch.zeros(N + 1, 2)
        want[:N] = -1.0 / N
        want[N] = -1.0
        assert torch.allclose(emb.weight, want), (as_dense, emb.weight)


def test_timeline_switches_at_run_time():
    d = tempfile.mkdtemp() if R == 0 else None
    d = hvd.broadcast_object(d, root_rank=0)
    for i in range(2):
        path = os.path.join(d, f"tl{i}.json")
        hvd.start_timeline(path, mark_cycles=True)
        hvd.allreduce(torch.ones(2), name=f"timeline.{i}")
        hvd.stop_timeline()
        text = open(f"{path}.{R}").read()
        assert f"timeline.{i}" in text and "NEGOTIATE" in text and "EXECUTE" in text
        json.loads(text)
    hvd.allreduce(torch.ones(2), name="timeline.off")
    assert "timeline.off" not in open(os.path.join(d, f"tl1.json.{R}")).read()
    expect(ValueError, hvd.start_timeline, d)  # a directory
    hvd.barrier()


if __name__ == "__main__":
    harness.run(globals(), setup, teardown=hvd.shutdown)
