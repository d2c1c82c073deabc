"""DistributedDataParallel on hcoll's torch.distributed backend, with hcoll's named grouped
allreduce as DDP's comm hook (synthetic data, the CNN of examples/torch_train.py).

Every gradient bucket DDP fills during backward becomes ONE grouped allreduce named after the
bucket ("ddp.bucket.<i>"), averaged by hcoll itself; the bucket's future completes when hcoll's
request does.

Run: mpiexec.mpich -n 2 /usr/bin/python3 examples/torch_ddp.py [--steps 20] [--batch 32]
"""

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

try:
    import hcoll.torch.distributed as hdist  # an installed package
except ImportError:  # the source tree (the build tree is found by the package's loaders)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                    "bindings", "python"))
    import hcoll.torch.distributed as hdist


def make_model():
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1, stride=2), nn.BatchNorm2d(32), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))


def bucket_hook(process_group, bucket):
    """hcoll.torch.distributed.allreduce_hook, spelled out: one named grouped allreduce per
    bucket, averaged by hcoll; the hook returns the future of the reduced bucket."""
    work = process_group.grouped_allreduce([bucket.buffer()], name=f"ddp.bucket.{bucket.index()}",
                                           op="average")
    return work.get_future().then(lambda fut: fut.value()[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=32, help="rows per rank")
    args = ap.parse_args()

    torch.set_num_threads(1)  # ranks share the machine's cores
    hdist.init_process_group()  # rank, size and the store from hcoll's MPI world (mpiexec)
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1234 + rank)  # different initial weights: DDP broadcasts rank 0's
    model = DDP(make_model())
    pg = dist.distributed_c10d._get_default_group()
    model.register_comm_hook(pg, bucket_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    g = torch.Generator().manual_seed(42 + rank)
    x = torch.randn(args.batch, 3, 16, 16, generator=g)
    y = x[:, 0].flatten(1)[:, :10].argmax(1)
    times = []
    for step in range(args.steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        avg = loss.detach().clone()
        dist.all_reduce(avg, op=dist.ReduceOp.AVG)
        if rank == 0 and (step % 5 == 0 or step == args.steps - 1):
            print(f"step {step:3d}  loss {avg.item():.4f}  step time {times[-1] * 1e3:.2f} ms",
                  flush=True)
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    everyone = [torch.zeros_like(flat) for _ in range(size)]
    dist.all_gather(everyone, flat)
    if not all(torch.equal(everyone[0], row) for row in everyone):
        print("FAIL: parameters differ between ranks", flush=True)
        return 1
    if rank == 0:
        times.sort()
        print(f"{size} ranks, median step {times[len(times) // 2] * 1e3:.2f} ms; "
              "parameters identical on every rank", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
