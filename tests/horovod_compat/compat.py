#!/usr/bin/env python3
"""Runs Horovod's PyTorch test file against hcoll.torch (see docs/torch.md, "Horovod's own tests").

    HOROVOD_SOURCE=/path/to/horovod compat.py --np 2 --mode file    # the whole file in one job
    HOROVOD_SOURCE=/path/to/horovod compat.py --np 3 --mode each    # one job per test

HOROVOD_SOURCE is a checkout of github.com/horovod/horovod (its test/ and horovod/ folders); nothing
of Horovod is vendored here. Without it the run is skipped (exit status 77, CTest's SKIP).
Prints one line per test that did not pass, then the counts; exits 0 when no test failed or
errored on any rank and every rank reported.
"""

import argparse
import ast
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77
TEST_FILE = os.path.join("test", "parallel", "test_torch.py")

# Tests that cannot pass at 3 or more ranks on ANY implementation, Horovod's included (its CI runs
# this file at 2 ranks): with float16 inputs they compare the reduction, a float16 tensor, exactly
# (tolerance 0 up to 3 ranks) with size * x computed in float32, which float16 cannot hold for
# size 3 (x + x + x rounds). They fail on the ranks whose rows round, so the ranks leave the test
# at different points; in whole-file mode they are therefore left out at these sizes (listed as
# "deselected"); --mode each and --tests still run them.
FLOAT16_AT_3_RANKS = ("test_horovod_allreduce_prescale", "test_horovod_reducescatter_prescale",
                      "test_horovod_grouped_reducescatter_prescale")


def test_names(path):
    """The test methods of TorchTests in file order (without importing the file)."""
    tree = ast.parse(open(path).read())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "TorchTests":
            return [f.name for f in node.body
                    if isinstance(f, ast.FunctionDef) and f.name.startswith("test_")]
    return []


def read_results(out_dir):
    """{rank: {test: (outcome, message)}} from the ranks' JUnit files."""
    results = {}
    for xml in glob.glob(os.path.join(out_dir, "rank*.xml")):
        rank = int(os.path.basename(xml)[4:-4])
        per = results.setdefault(rank, {})
        for case in ET.parse(xml).getroot().iter("testcase"):
            outcome, message = "passed", ""
            for kind in ("failure", "error", "skipped"):
                el = case.find(kind)
                if el is not None:
                    outcome = "failed" if kind != "skipped" else "skipped"
                    message = (el.get("message") or "").splitlines()[0][:160] if el.get(
                        "message") else ""
                    break
            per[case.get("name")] = (outcome, message)
    return results


def launch(args, out_dir, names):
    cmd = [args.mpiexec, "-n", str(args.np)] + args.mpiexec_flags.split() + [
        args.python, os.path.join(HERE, "run_rank.py"), out_dir,
        os.path.join(args.source, TEST_FILE)] + names
    env = dict(os.environ, HOROVOD_SOURCE=args.source)
    if args.deselect:
        env["HCOLL_COMPAT_DESELECT"] = ",".join(args.deselect)
    env.setdefault("HCOLL_STALL_SHUTDOWN_TIME_SECONDS", f"{args.stall_timeout:g}")
    env.setdefault("HCOLL_STALL_CHECK_TIME_SECONDS", f"{min(args.stall_timeout, 30) or 60:g}")
    log = open(os.path.join(out_dir, "log.txt"), "ab")
    try:
        return subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                              timeout=args.timeout, start_new_session=True).returncode
    except subprocess.TimeoutExpired:
        return "timeout"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--mode", choices=("file", "each"), default="file")
    p.add_argument("--source", default=os.environ.get("HOROVOD_SOURCE", ""))
    p.add_argument("--tests", nargs="*", default=[], help="only these tests")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds per job (default 1800 for a file, 180 per test)")
    p.add_argument("--mpiexec", default=os.environ.get("HCOLL_MPIEXEC", "mpiexec.mpich"))
    p.add_argument("--mpiexec-flags", default=os.environ.get("HCOLL_MPIEXEC_FLAGS", ""))
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--keep", help="write logs and JUnit files here (default: a temp dir)")
    p.add_argument("--stall-timeout", type=float, default=60,
                   help="HCOLL_STALL_SHUTDOWN_TIME_SECONDS for the job (default 60; 0 = never): "
                        "a test that fails on some ranks only leaves the others' operations "
                        "unmatched; they then fail after this long instead of hanging the job")
    args = p.parse_args()

    test_file = os.path.join(args.source, TEST_FILE)
    if not args.source or not os.path.isfile(test_file):
        print(f"SKIP: no Horovod checkout (set HOROVOD_SOURCE to one; {test_file!r} not found)")
        return SKIP
    if args.timeout is None:
        args.timeout = 1800 if args.mode == "file" else 180
    names = args.tests or test_names(test_file)
    args.deselect = []
    if args.mode == "file" and not args.tests and args.np >= 3:
        args.deselect = [n for n in FLOAT16_AT_3_RANKS if n in names]
    out_root = args.keep or tempfile.mkdtemp(prefix="hcoll-horovod-")
    os.makedirs(out_root, exist_ok=True)

    results, problems = {}, []
    jobs = [(None, names if args.tests else [])] if args.mode == "file" else [(n, [n])
                                                                              for n in names]
    for label, selection in jobs:
        out_dir = os.path.join(out_root, label or "file")
        shutil.rmtree(out_dir, ignore_errors=True)
        os.makedirs(out_dir)
        rc = launch(args, out_dir, selection)
        got = read_results(out_dir)
        if len(got) != args.np:
            problems.append(f"{label or 'file'}: {len(got)} of {args.np} ranks reported "
                            f"(launcher: {rc}); log {out_dir}/log.txt")
        for rank, per in got.items():
            results.setdefault(rank, {}).update(per)
        if label is not None:
            outcome = got.get(0, {}).get(label, ("missing", ""))[0]
            print(f"{label}: {outcome}", flush=True)

    counts = {}
    for name in names:
        if name in args.deselect:
            counts["deselected"] = counts.get("deselected", 0) + 1
            print(f"  deselected {name}  [float16 at {args.np} ranks: see FLOAT16_AT_3_RANKS]")
            continue
        outcomes = [results.get(r, {}).get(name, ("missing", ""))
                    for r in range(args.np)]
        kinds = {o for o, _ in outcomes}
        outcome = ("failed" if kinds & {"failed", "missing"}
                   else "skipped" if kinds == {"skipped"} else
                   "passed" if kinds == {"passed"} else "mixed")
        counts[outcome] = counts.get(outcome, 0) + 1
        if outcome != "passed":
            detail = "; ".join(f"rank {r}: {o} {m}".rstrip()
                               for r, (o, m) in enumerate(outcomes) if o != "passed")
            print(f"  {outcome:7} {name}  [{detail}]")
    for line in problems:
        print("  PROBLEM", line)
    summary = " ".join(f"{k}={counts.get(k, 0)}" for k in ("passed", "failed", "skipped",
                                                            "mixed", "deselected"))
    print(f"horovod_compat np={args.np} mode={args.mode}: {summary} of {len(names)} "
          f"(logs: {out_root})")
    bad = counts.get("failed", 0) + counts.get("mixed", 0) + len(problems)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
