"""Data-parallel training of a small CNN with SyncBatchNorm on hcoll.torch (synthetic data).

Every rank trains on its own shard of each batch; SyncBatchNorm normalizes over the whole batch,
DistributedOptimizer averages the gradients in grouped buckets while backward runs.

Run: mpiexec.mpich -n 2 /usr/bin/python3 examples/torch_train.py [--steps 20] [--batch 32]
"""

import argparse
import os
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings",
                                "python"))
import hcoll.torch as hvd  # noqa: E402


def make_model():
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1, stride=2), nn.BatchNorm2d(32), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=32, help="rows per rank")
    args = ap.parse_args()

    hvd.init()
    torch.set_num_threads(1)  # ranks share the machine's cores
    torch.manual_seed(1234 + hvd.rank())  # different initial weights: the broadcast fixes that
    model = hvd.SyncBatchNorm.convert_sync_batchnorm(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size(), momentum=0.9)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)

    # A fixed synthetic task: the label is the brightest of 10 pixel bins.
    g = torch.Generator().manual_seed(42 + hvd.rank())
    x = torch.randn(args.batch, 3, 16, 16, generator=g)
    y = x[:, 0].flatten(1)[:, :10].argmax(1)
    loss_fn = nn.CrossEntropyLoss()
    times = []
    for step in range(args.steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        avg = hvd.allreduce(loss.detach(), name="loss").item()
        if hvd.rank() == 0 and (step % 5 == 0 or step == args.steps - 1):
            print(f"step {step:3d}  loss {avg:.4f}  step time {times[-1] * 1e3:.2f} ms", flush=True)
    # The replicas must not have drifted apart.
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    everyone = hvd.allgather(flat[None], name="check")
    if not all(torch.equal(everyone[0], row) for row in everyone):
        print("FAIL: parameters differ between ranks", flush=True)
        return 1
    if hvd.rank() == 0:
        times.sort()
        print(f"{hvd.size()} ranks, median step {times[len(times) // 2] * 1e3:.2f} ms; "
              "parameters identical on every rank", flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
