#!/usr/bin/env python3
"""Checks the HCOLL_TIMELINE files of a 2-rank run of hcoll-test-smoke: each rank's file is valid
JSON (Chrome trace: a list of events), names its communicator tracks, has negotiation cycles
(some on the slow path), and gives tensors their own rows with NEGOTIATE before EXECUTE; the
10-member grouped allreduce ran as one backend call of 10 tensors. Each communicator is its own
track: the world's tensors are on the world track only, the split communicator's ("sub.ar") on
a second track only, and each track has its own negotiation cycles.
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
    named = [e for e in events if e.get("name") == "process_name"]
    tracks = {e["pid"]: e["args"]["name"] for e in named}
    if len(tracks) != len(named):
        fail(f"{path}: a communicator track is named twice: {named}")
    worlds = [pid for pid, name in tracks.items() if "world" in name]
    others = [pid for pid, name in tracks.items() if "world" not in name]
    if len(worlds) != 1 or not others:
        fail(f"{path}: expected one world track and a split communicator's track, got {tracks}")
    world = worlds[0]
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
    cycle_tracks = {e["pid"] for e in cycles}
    if world not in cycle_tracks or not cycle_tracks & set(others):
        fail(f"{path}: the world and the split communicator need cycles on their own tracks, "
             f"got cycles on {sorted(cycle_tracks)} of {tracks}")
    by_tensor = {}  # (track, tensor name) -> its phases
    for e in spans:
        if e["name"] in ("NEGOTIATE", "EXECUTE"):
            by_tensor.setdefault((e["pid"], rows[(e["pid"], e["tid"])]), []).append(e)

    def on_tracks(name):
        return sorted(pid for pid, tensor in by_tensor if tensor == name)

    expected = [(world, name) for name in ("ar", "ag", "bc", "a2a", "rs", "g", "ar.again")]
    sub_tracks = on_tracks("sub.ar")
    if len(sub_tracks) != 1 or sub_tracks[0] not in others:
        fail(f"{path}: 'sub.ar' (split communicator) is on tracks {sub_tracks}, expected one "
             f"of {others}, not the world's ({world})")
    expected.append((sub_tracks[0], "sub.ar"))
    for track, name in expected:
        if on_tracks(name) != [track]:
            fail(f"{path}: tensor '{name}' is on tracks {on_tracks(name)}, expected only {track}")
        phases = sorted(by_tensor[(track, name)], key=lambda e: e["ts"])
        kinds = [e["name"] for e in phases]
        if kinds[:2] != ["NEGOTIATE", "EXECUTE"]:
            fail(f"{path}: tensor '{name}' has phases {kinds}, expected NEGOTIATE then EXECUTE")
        if phases[0]["ts"] + phases[0]["dur"] > phases[1]["ts"] + 1:
            fail(f"{path}: tensor '{name}' executed before its negotiation ended")
    # "ar.again" ran five times: replayed from the cache after the first (on one node, folded
    # into its rounds' readiness exchange), and every call traced.
    again = sorted(by_tensor[(world, "ar.again")], key=lambda e: e["ts"])
    negotiated = [e for e in again if e["name"] == "NEGOTIATE"]
    executed = [e for e in again if e["name"] == "EXECUTE"]
    if len(negotiated) != 5 or len(executed) != 5:
        fail(f"{path}: 'ar.again' ran 5 times, traced {len(negotiated)} NEGOTIATE and "
             f"{len(executed)} EXECUTE spans")
    if not any(e["args"].get("cached") for e in negotiated):
        fail(f"{path}: no call of 'ar.again' was replayed from the cache: {negotiated}")
    # The smoke run's name with invalid UTF-8 bytes (0xff 0xfe) and a valid "\u00e9": json.load
    # above already proved the file is valid; the row keeps the bytes visible as \u00XX.
    odd = "bad\u00ff\u00fe name \u00e9"
    if on_tracks(odd) != [world]:
        fail(f"{path}: the non-UTF-8 name is not traced as {odd!r}; rows: {sorted(rows.values())}")
    grouped = [e for e in by_tensor[(world, "g")] if e["name"] == "EXECUTE"]
    if grouped[0]["args"].get("tensors_in_call") != 10:
        fail(f"{path}: the 10-member group did not run as one fused call: {grouped[0]['args']}")
    print(f"ok: {path}: {len(spans)} spans, {len(rows)} rows, {len(tracks)} communicator track(s)")


def main():
    prefix, nranks = sys.argv[1], int(sys.argv[2])
    for rank in range(nranks):
        check(f"{prefix}.{rank}")


if __name__ == "__main__":
    main()
