"""Shared set-up of the torch.distributed backend tests (test_c10d*.py).

Runnable from the source tree (CTest sets PYTHONPATH to bindings/python, HCOLL_LIBRARY and
HCOLL_C10D_MODULE_DIR to the build tree) and against an installed package (none of them set,
HCOLL_TEST_INSTALLED=1: harness.py then leaves sys.path alone). Each test_* function of the
calling module runs in definition order on every rank (harness.run); the first failure prints the
traceback and ends the process at once, so the launcher tears the other ranks down instead of
leaving them waiting.
"""

from datetime import timedelta

import harness  # the shared runner

WAIT = timedelta(seconds=60)  # no single operation in these tests may take longer


def init(timeout=timedelta(seconds=120)):
    """Registers the backend and makes "hcoll" the default group (rank/size from hcoll's MPI
    world, the store bootstrapped over hcoll)."""
    import torch
    import hcoll.torch.distributed as hdist

    torch.set_num_threads(1)  # ranks share the machine's cores
    hdist.init_process_group(timeout=timeout)
    return hdist


def done(work):
    """Waits (bounded) for an async Work: a hang becomes a failure, not a stuck CI."""
    assert work.wait(WAIT), "Work.wait returned False"
    return work


def raises(fn, *fragments):
    """Runs fn, which must raise RuntimeError/ValueError/TypeError whose text contains every
    fragment; returns the message."""
    try:
        fn()
    except (RuntimeError, ValueError, TypeError) as e:
        text = str(e)
        for f in fragments:
            assert f in text, f"expected {f!r} in the error, got: {text}"
        return text
    raise AssertionError(f"no exception (expected one mentioning {fragments})")


def run(module_globals, teardown=None):
    """harness.run with the torch.distributed rank in its lines (the group is up by now)."""
    import torch.distributed as dist

    class _Ctx:
        rank = dist.get_rank()

    harness.run(module_globals, setup=lambda: _Ctx, teardown=teardown)
