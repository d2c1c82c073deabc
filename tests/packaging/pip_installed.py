"""Checks of an installed hcoll (scripts/test.sh's pip stage: a wheel installed into a venv).

    python pip_installed.py where            the package and its library come from this venv
    mpiexec.mpich -n 2 python pip_installed.py numpy    a numpy allreduce from the install
    mpiexec.mpich -n 2 python pip_installed.py torch    hcoll.torch from the install

Copied out of the source tree and run from a folder outside it, with neither PYTHONPATH nor
HCOLL_LIBRARY: nothing here may put the source tree's bindings/python on sys.path.
"""

import importlib.metadata
import os
import sys


def check(ok, what, detail=""):
    print(f"{'PASS' if ok else 'FAIL'}: {what} {detail}", flush=True)
    if not ok:
        sys.exit(1)


def inside_venv(path):
    return os.path.realpath(path).startswith(os.path.realpath(sys.prefix) + os.sep)


def check_where():
    check(sys.prefix != sys.base_prefix, "runs in a venv", sys.prefix)
    for var in ("PYTHONPATH", "HCOLL_LIBRARY", "LD_LIBRARY_PATH"):
        check(not os.environ.get(var), f"{var} is not set")
    import hcoll

    check(inside_venv(hcoll.__file__), "hcoll is imported from the venv", hcoll.__file__)
    check(inside_venv(hcoll.library_path) and
          hcoll.library_path == hcoll._lib.packaged_path(),
          "libhcoll.so.0 is the package's own, inside the venv", hcoll.library_path)
    wheel_version = importlib.metadata.version("hcoll")
    check(hcoll.__version__ == wheel_version == hcoll.build_info["VERSION"],
          "the library, the build record and the wheel agree on the version",
          f"{hcoll.__version__} / {hcoll.build_info['VERSION']} / {wheel_version}")
    family = hcoll._mpi_check.family_of(hcoll.mpi_version())
    check(family == hcoll.build_info["MPI_FAMILY"], "the recorded MPI is the linked one",
          f"{hcoll.mpi_version()} / {hcoll.build_info}")
    import hcoll.torch

    check(inside_venv(hcoll.torch.__file__), "hcoll.torch is imported from the venv",
          hcoll.torch.__file__)


def check_numpy():
    import numpy as np
    import hcoll

    hcoll.initialize()
    world = hcoll.world()
    x = np.arange(1000, dtype=np.float32) * (world.rank + 1)
    world.allreduce(x, name="pip.x").wait(timeout=60)
    expected = np.arange(1000, dtype=np.float32) * sum(r + 1 for r in range(world.size))
    check(world.size == 2 and np.array_equal(x, expected), "numpy allreduce from the install",
          f"rank {world.rank}")
    hcoll.shutdown()


def check_torch():
    import torch
    import hcoll.torch as hvd

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    t = torch.full((64,), float(rank + 1))
    summed = hvd.allreduce(t, op=hvd.Sum, name="pip.t")
    check(size == 2 and torch.equal(summed, torch.full((64,), 3.0)),
          "hcoll.torch allreduce from the install", f"rank {rank}")
    b = hvd.broadcast(torch.arange(8) + rank * 100, root_rank=1, name="pip.b")
    check(torch.equal(b, torch.arange(8) + 100), "hcoll.torch broadcast from the install")
    hvd.shutdown()


if __name__ == "__main__":
    {"where": check_where, "numpy": check_numpy, "torch": check_torch}[sys.argv[1]]()
