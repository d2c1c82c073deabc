#!/usr/bin/env python3
"""Checks the HCOLL_TIMELINE files of a 2-rank run of hcoll-test-smoke: each rank's file is valid
JSON (Chrome trace: a list of events), names its communicator tracks, has negotiation cycles
(some on the slow path), and gives tensors their own rows with NEGOTIATE before EXECUTE; the
10-member grouped allreduce ran as one backend call of 10 tensors.
Usage: check_timeline.py PREFIX NRANKS"""
import json
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(path):
    try:
        with open(path) as f:
            events = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: not a readable JSON trace: {e}")
    if not isinstance(events, list) or not events:
        fail(f"{path}: expected a non-empty list of events")
    tracks = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    if not any("world" in name for name in tracks.values()):
        fail(f"{path}: no world communicator track in {tracks}")
    rows = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
            if e.get("name") == "thread_name"}
    spans = [e for e in events if e.get("ph") == "X"]
    for e in spans:
        if not all(k in e for k in ("pid", "tid", "ts", "dur")) or e["dur"] < 0 or e["ts"] < 0:
            fail(f"{path}: malformed span {e}")
        if (e["pid"], e["tid"]) not in rows:
            fail(f"{path}: span on an unnamed row {e}")
    cycles = [e for e in spans if e["name"] == "CYCLE"]
    if not cycles or not any(e["args"]["slow_path"] for e in cycles):
        fail(f"{path}: expected negotiation cycles, some on the slow path")
    by_tensor = {}
    for e in spans:
        if e["name"] in ("NEGOTIATE", "EXECUTE"):
            by_tensor.setdefault(rows[(e["pid"], e["tid"])], []).append(e)
    for name in ("ar", "ag", "bc", "a2a", "rs", "g"):
        phases = sorted(by_tensor.get(name, []), key=lambda e: e["ts"])
        kinds = [e["name"] for e in phases]
        if kinds[:2] != ["NEGOTIATE", "EXECUTE"]:
            fail(f"{path}: tensor '{name}' has phases {kinds}, expected NEGOTIATE then EXECUTE")
        if phases[0]["ts"] + phases[0]["dur"] > phases[1]["ts"] + 1:
            fail(f"{path}: tensor '{name}' executed before its negotiation ended")
    grouped = [e for e in by_tensor["g"] if e["name"] == "EXECUTE"]
    if grouped[0]["args"].get("tensors_in_call") != 10:
        fail(f"{path}: the 10-member group did not run as one fused call: {grouped[0]['args']}")
    print(f"ok: {path}: {len(spans)} spans, {len(rows)} rows, {len(tracks)} communicator track(s)")


def main():
    prefix, nranks = sys.argv[1], int(sys.argv[2])
    for rank in range(nranks):
        check(f"{prefix}.{rank}")


if __name__ == "__main__":
    main()
