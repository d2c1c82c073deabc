"""DistributedDataParallel on hcoll's torch.distributed backend trains to the same parameters as
on gloo (within 1e-6), with torch's default bucketing and with hcoll's named grouped allreduce
as a DDP comm hook.

Run: mpiexec.mpich -n 2 /usr/bin/python3 tests/python/test_c10d_ddp.py
One job: hcoll is the default group; gloo is a new_group over the same ranks.
"""

import c10d_testing as T
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

hdist = T.init()
rank, size = dist.get_rank(), dist.get_world_size()
gloo = dist.new_group(backend="gloo")
STEPS = 6


def make_model():
    """The CNN of examples/torch_train.py (BatchNorm2d: DDP broadcasts its buffers)."""
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1, stride=2), nn.BatchNorm2d(32), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))


def train(process_group, hook=None, bucket_cap_mb=25, steps=STEPS):
    torch.manual_seed(1234 + rank)  # different initial weights: DDP's broadcast fixes that
    model = DDP(make_model(), process_group=process_group, bucket_cap_mb=bucket_cap_mb)
    if hook is not None:
        model.register_comm_hook(process_group, hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(42 + rank)
    x = torch.randn(8, 3, 16, 16, generator=g)
    y = x[:, 0].flatten(1)[:, :10].argmax(1)
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    # Parameters first, then the BatchNorm running statistics (per rank: each rank's last
    # forward updates them from its own batch, so only the parameters agree across ranks).
    params = [p.detach().flatten() for p in model.module.parameters()]
    buffers = [b.detach().flatten() for b in model.module.buffers() if b.is_floating_point()]
    return torch.cat(params), torch.cat(buffers)


def compare(got, ref, what):
    for g, r, part in zip(got, ref, ("parameters", "running statistics")):
        diff = (g - r).abs().max().item()
        assert diff <= 1e-6, f"{what}: {part} differ from DDP(gloo)'s by {diff}"


def test_ddp_matches_gloo():
    ref = train(gloo)
    got = train(None)  # the default group: hcoll
    compare(got, ref, "DDP(hcoll)")
    # The replicas' parameters agree with each other too.
    everyone = [torch.zeros_like(got[0]) for _ in range(size)]
    dist.all_gather(everyone, got[0])
    assert all(torch.equal(everyone[0], e) for e in everyone)
    assert not torch.equal(got[0], train(None, steps=0)[0]), "training changed nothing"


def test_ddp_small_buckets_many_works_in_flight():
    compare(train(None, bucket_cap_mb=0.01), train(gloo, bucket_cap_mb=0.01),
            "DDP(hcoll), small buckets")


def test_ddp_comm_hook_named_grouped_allreduce():
    ref = train(gloo)
    pg = dist.distributed_c10d._get_default_group()
    compare(train(pg, hook=hdist.allreduce_hook), ref, "DDP(hcoll, allreduce_hook)")


T.run(globals(), teardown=dist.destroy_process_group)
