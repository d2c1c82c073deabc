"""One rank of a Horovod test run: pytest on Horovod's test file with `horovod` resolved to the
shim package (horovod.torch = hcoll.torch). Launched by compat.py under mpiexec.

    run_rank.py OUT_DIR TEST_FILE [TEST_NAME ...]

Writes OUT_DIR/rank<R>.xml (JUnit) and exits with pytest's status.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")


class _RankSync:
    """Prints a failure's traceback when it happens, not at the end of the session (a job whose
    other ranks then stall still shows why), and re-synchronizes the ranks after each test."""

    def __init__(self, rank):
        self.rank = rank

    def pytest_runtest_teardown(self, item):
        # Every rank waits for the others after each test (Horovod's own tearDown does so under
        # its Gloo controller): a test that failed on some ranks only then costs one stall
        # timeout at most, instead of leaving the ranks a test apart for the rest of the file.
        hvd = sys.modules.get("hcoll.torch")
        if hvd is not None and hvd.is_initialized():
            try:
                hvd.barrier()
            except Exception as e:  # reported; the next test shows what it broke
                print(f"[rank {self.rank}] barrier after {item.nodeid} failed: {e}", flush=True)

    def pytest_runtest_logreport(self, report):
        if report.failed:
            print(f"\n[rank {self.rank}] FAILED {report.nodeid} ({report.when}):\n"
                  f"{report.longreprtext}", flush=True)


def main():
    out_dir, test_file, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    rank = os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    sys.path[:0] = [os.path.join(HERE, "shim"), os.path.join(ROOT, "bindings", "python")]
    import pytest

    selection = [f"{test_file}::TorchTests::{n}" for n in names] or [test_file]
    deselect = [n for n in os.environ.get("HCOLL_COMPAT_DESELECT", "").split(",") if n]
    if deselect:
        selection += ["-k", "not (" + " or ".join(deselect) + ")"]
    args = ["-v", "-p", "no:cacheprovider", "-rs", f"--junitxml={out_dir}/rank{rank}.xml",
            "-o", "junit_family=xunit1", "--rootdir", os.path.dirname(test_file)] + selection
    sys.stdout.flush()
    code = pytest.main(args, plugins=[_RankSync(rank)])
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(int(code))


if __name__ == "__main__":
    main()
