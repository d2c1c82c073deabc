"""A peer's clean exit is not a warning; a peer that leaves operations behind still is.

Launches two small 2-rank jobs (mpiexec from $HCOLL_MPIEXEC, default mpiexec.mpich) and reads
their output:
  clean    every rank does an allreduce and shuts down, rank 0 a second later than rank 1 (so
           rank 1's departure reaches a rank 0 that is still up): no hcoll warning or error line;
  pending  rank 0 waits on an allreduce rank 1 never submits, rank 1 shuts down: rank 0's
           operation fails with SHUT_DOWN and its log warns, naming the rank that left.
Run: /usr/bin/python3 tests/python/test_clean_exit.py (not under mpiexec)."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BINDINGS = os.path.join(HERE, "..", "..", "bindings", "python")

JOB = r"""
import sys, time
sys.path.insert(0, {bindings!r})
import torch, hcoll, hcoll.torch as hvd
hvd.init()
r = hvd.rank()
assert hvd.allreduce(torch.ones(4), name="both").tolist() == [1.0] * 4
if {pending} and r == 0:
    try:
        hvd.allreduce(torch.ones(4), name="only.rank0")
        raise SystemExit("rank 0: the allreduce rank 1 never submitted completed")
    except hcoll.HcollError as e:
        assert e.status == hcoll.ERR_SHUT_DOWN, e
        print("rank 0: SHUT_DOWN as expected", flush=True)
if r == 0:
    time.sleep(1)  # rank 1 leaves first
hvd.shutdown()
"""


def run(pending):
    mpiexec = os.environ.get("HCOLL_MPIEXEC", "mpiexec.mpich")
    flags = os.environ.get("HCOLL_MPIEXEC_FLAGS", "").split()
    code = JOB.format(bindings=BINDINGS, pending=pending)
    p = subprocess.run([mpiexec, "-n", "2"] + flags + [sys.executable, "-c", code],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    out = p.stdout.decode(errors="replace")
    hcoll_lines = [line for line in out.splitlines() if line.startswith("[hcoll")]
    return p.returncode, out, hcoll_lines


def main():
    rc, out, lines = run(pending=False)
    bad = [line for line in lines if "[warning]" in line or "[error]" in line]
    assert rc == 0, out
    assert not bad, "a clean 2-rank run logged:\n" + "\n".join(bad)
    print("ok   clean: no hcoll warning")

    rc, out, lines = run(pending=True)
    assert rc == 0, out
    assert "rank 0: SHUT_DOWN as expected" in out, out
    warned = [line for line in lines if "[warning]" in line and "rank 1 left" in line]
    assert warned and "pending here" in warned[0], "no warning for a pending operation:\n" + out
    print("ok   pending: warned:", warned[0])


if __name__ == "__main__":
    main()
