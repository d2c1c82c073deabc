"""A minimal test runner for multi-rank Python tests (no pytest on a bare Debian).

Runs every test_* function of the calling module in definition order on every rank. The first
failure prints the traceback and exits the process with status 1 at once: the launcher then
tears the other ranks down instead of letting them wait for a collective that never comes.
"""

import inspect
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
# The source tree's package, unless the installed one is under test (HCOLL_TEST_INSTALLED=1:
# scripts/test.sh's pip stage), which the source tree's must then not shadow.
if os.environ.get("HCOLL_TEST_INSTALLED") != "1":
    sys.path.insert(0, os.path.join(HERE, "..", "..", "bindings", "python"))

WAIT_S = 60  # no single operation in these tests may take longer


def done(req):
    """Waits for `req` (bounded) and returns it; a hang becomes a failure, not a stuck CI."""
    assert req.wait(timeout=WAIT_S), f"request did not complete within {WAIT_S} s"
    return req


def setup_world():
    """Initializes hcoll; returns (world communicator, rank, size) for a test module's globals."""
    import hcoll

    hcoll.initialize()
    world = hcoll.world()
    return world, world.rank, world.size


def run(module_globals, setup=None, teardown=None):
    tests = [(n, f) for n, f in module_globals.items() if n.startswith("test_") and callable(f)]
    tests.sort(key=lambda item: inspect.getsourcelines(item[1])[1])
    rank = None
    try:
        ctx = setup() if setup else None
        rank = getattr(ctx, "rank", "?")
        for name, fn in tests:
            fn()
            print(f"[rank {rank}] ok   {name}", flush=True)
        if teardown:
            teardown()
    except BaseException:
        print(f"[rank {rank}] FAIL", flush=True)
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
    print(f"[rank {rank}] {len(tests)} tests passed", flush=True)
