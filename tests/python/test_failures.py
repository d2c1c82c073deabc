"""A rank that fails or leaves never hangs the job (run by run_bounded.sh, one scenario per run):

  raise        rank 1 raises an uncaught exception mid-training while rank 0 waits on an op it
               never submits: the job ends (every process exited, status non-zero) within 5 s.
  abort-hook   the same with hcoll.abort_on_exception(): the job is aborted.
  sigint       rank 0, blocked in Request.wait() on an op rank 1 submits later, gets SIGINT:
               KeyboardInterrupt within 100 ms, the request still valid; it then completes.
  mixed-mpi    (one process) Open MPI loaded through mpi4py next to an MPICH build of hcoll:
               hcoll.initialize() raises ERR_UNSUPPORTED naming both MPIs, before any MPI call.
"""

import os
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bindings", "python"))

import numpy as np  # noqa: E402

import hcoll  # noqa: E402


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


def scenario_mixed_mpi():
    import mpi4py

    mpi4py.rc.initialize = False  # load Open MPI's library without starting it
    mpi4py.rc.finalize = False
    from mpi4py import MPI  # noqa: F401

    try:
        hcoll.initialize()
        check(False, "initialize succeeded with two MPIs loaded")
    except hcoll.HcollError as e:
        check(e.status == hcoll.ERR_UNSUPPORTED and "MPICH" in e.message and
              "Open MPI" in e.message, "initialize refuses two MPIs, naming both", e.message)
    # The C library checks too (for callers that are not this binding), before any MPI call.
    from hcoll import _lib

    status = _lib.lib.hcoll_initialize(None)
    message = _lib.lib.hcoll_last_error().decode()
    check(status == hcoll.ERR_UNSUPPORTED and "Open MPI" in message,
          "hcoll_initialize itself refuses two MPIs", message)


if __name__ == "__main__":
    scenario = sys.argv[1]
    if scenario in ("raise", "abort-hook"):
        scenario_raise(hook=scenario == "abort-hook")
    elif scenario == "sigint":
        scenario_sigint()
    elif scenario == "mixed-mpi":
        scenario_mixed_mpi()
    else:
        sys.exit(f"unknown scenario {scenario}")
