"""A rank that fails or leaves never hangs the job (run by run_bounded.sh, one scenario per run):

  raise        rank 1 raises an uncaught exception mid-training while rank 0 waits on an op it
               never submits: the job ends (every process exited, status non-zero) within 5 s.
  abort-hook   the same with hcoll.abort_on_exception(): the job is aborted.
  sigint       rank 0, blocked in Request.wait() on an op rank 1 submits later, gets SIGINT:
               KeyboardInterrupt within 100 ms, the request still valid; it then completes.
  mixed-mpi    (one process) Open MPI loaded through mpi4py, then an MPICH build of hcoll
               imported: the import raises hcoll.MixedMpiError (an ImportError) naming both MPIs,
               before hcoll's MPI is made global; hcoll_initialize() itself refuses too.
  mixed-mpi-late  (one process) hcoll imported first, then mpi4py (Open MPI): hcoll.initialize()
               raises ERR_UNSUPPORTED naming both MPIs, before any MPI call.
"""

import os
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bindings", "python"))

import numpy as np  # noqa: E402

hcoll = None  # imported in __main__: the mixed-MPI scenarios must load mpi4py first


def check(ok, what, detail=""):
    print(f"{'PASS' if ok else 'FAIL'}: {what} {detail}", flush=True)
    if not ok:
        sys.exit(1)


def training_step(world, rank, step):
    x = np.full(1024, float(rank + 1), np.float32)
    world.allreduce(x, name=f"grad.{step}").wait(timeout=30)
    return x


def scenario_raise(hook):
    hcoll.initialize()
    if hook:
        hcoll.abort_on_exception()
    world = hcoll.world()
    rank = world.rank
    for step in range(3):
        training_step(world, rank, step)
    if rank == 1:
        raise RuntimeError("rank 1 fails in the middle of training (on purpose)")
    start = time.monotonic()
    try:
        training_step(world, rank, 3)  # rank 1 never submits this one
        check(False, "the step succeeded without rank 1")
    except hcoll.HcollError as e:
        # Without the hook rank 0 sees rank 1 leave; with it the launcher usually ends it first.
        check(e.status == hcoll.ERR_SHUT_DOWN and "rank 1" in e.message,
              "rank 0's pending op fails with SHUT_DOWN naming rank 1",
              f"after {time.monotonic() - start:.3f} s: {e.message}")
        raise  # as a training script would: the job must end with a non-zero status


def scenario_sigint():
    hcoll.initialize()
    world = hcoll.world()
    rank = world.rank
    x = np.full(16, float(rank + 1), np.float32)
    if rank == 1:
        time.sleep(1.0)
        world.allreduce(x, name="late").wait(timeout=30)
        check(x[0] == 3.0, "rank 1's op completed")
        hcoll.shutdown()
        return
    req = world.allreduce(x, name="late")
    sent = []

    def interrupt():
        time.sleep(0.3)
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    try:
        req.wait()
        check(False, "wait() returned before the SIGINT")
    except KeyboardInterrupt:
        latency = time.monotonic() - sent[0]
        check(latency <= 0.1, "KeyboardInterrupt within 100 ms of SIGINT", f"{latency * 1000:.1f} ms")
    check(req.test() in (False, True), "the request is still valid after the interrupt")
    check(req.wait(timeout=30), "the interrupted request completes later")
    check(x[0] == 3.0, "with the right result", str(x[0]))
    hcoll.shutdown()


def load_open_mpi_through_mpi4py():
    import mpi4py

    mpi4py.rc.initialize = False  # load Open MPI's library without starting it
    mpi4py.rc.finalize = False
    from mpi4py import MPI  # noqa: F401


def scenario_mixed_mpi():
    load_open_mpi_through_mpi4py()
    try:
        import hcoll  # noqa: F401
        check(False, "import hcoll succeeded with two MPIs loaded")
    except ImportError as e:
        check(type(e).__name__ == "MixedMpiError" and "MPICH" in str(e) and "Open MPI" in str(e),
              "import hcoll refuses a second MPI, naming both", str(e))
    # The C library checks too (for callers that are not this binding), before any MPI call.
    import ctypes

    lib = ctypes.CDLL(os.environ["HCOLL_LIBRARY"], mode=ctypes.RTLD_LOCAL)
    lib.hcoll_initialize.argtypes = [ctypes.c_void_p]
    lib.hcoll_last_error.restype = ctypes.c_char_p
    status = lib.hcoll_initialize(None)
    message = lib.hcoll_last_error().decode()
    check(status == -7 and "Open MPI" in message,  # HCOLL_ERR_UNSUPPORTED
          "hcoll_initialize itself refuses two MPIs", message)


def scenario_mixed_mpi_late():
    import hcoll

    load_open_mpi_through_mpi4py()
    try:
        hcoll.initialize()
        check(False, "initialize succeeded with two MPIs loaded")
    except hcoll.HcollError as e:
        check(e.status == hcoll.ERR_UNSUPPORTED and "MPICH" in e.message and
              "Open MPI" in e.message, "initialize refuses an MPI loaded after the import, "
              "naming both", e.message)


if __name__ == "__main__":
    scenario = sys.argv[1]
    if not scenario.startswith("mixed-mpi"):
        import hcoll  # noqa: F811
    if scenario in ("raise", "abort-hook"):
        scenario_raise(hook=scenario == "abort-hook")
    elif scenario == "sigint":
        scenario_sigint()
    elif scenario == "mixed-mpi":
        scenario_mixed_mpi()
    elif scenario == "mixed-mpi-late":
        scenario_mixed_mpi_late()
    else:
        sys.exit(f"unknown scenario {scenario}")
