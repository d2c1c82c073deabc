#!/usr/bin/env python3
"""Medians over several `hcoll-bench --json` runs: the MET/MISS targets, the scenario ratios and
the sweep's hcoll/MPI ratios per output mode (owned/caller), each with its min-max over the runs,
the informational references (broadcast against a checked MPI broadcast) and the protocol floor
(raw MPI doing what hcoll's protocol does) where the runs have it.
Usage: bench/median.py run1.json run2.json run3.json"""
import json
import statistics
import sys


def main(paths):
    runs = [json.load(open(p))["records"] for p in paths]

    def section(run, name):
        return [r for r in run if r["section"] == name]

    print(f"# targets: median of {len(runs)} runs (min-max)")
    for k, rec in enumerate(section(runs[0], "target")):
        vals = [section(run, "target")[k]["measured"] for run in runs]
        m = statistics.median(vals)
        met = m <= rec["limit"] if rec["comparison"] == "<=" else m >= rec["limit"]
        print(f"  {'MET ' if met else 'MISS'} {rec['name']:44s} {m:8.3f} {rec['comparison']} "
              f"{rec['limit']:7.3f}  ({min(vals):.2f}-{max(vals):.2f})")
    for rec in section(runs[0], "reference"):
        vals = [r["ratio"] for run in runs for r in section(run, "reference")
                if r["name"] == rec["name"]]
        print(f"  info {rec['name']}: {statistics.median(vals):.3f} "
              f"({min(vals):.2f}-{max(vals):.2f})")
    print("# scenarios: hcoll / baseline")
    for rec in section(runs[0], "scenario"):
        if "ratio" not in rec:
            continue
        rs = [r for run in runs for r in section(run, "scenario") if r["name"] == rec["name"]]
        vals = [r["ratio"] for r in rs]
        mid = sorted(rs, key=lambda r: r["ratio"])[len(rs) // 2]
        print(f"  {rec['name']:20s} {statistics.median(vals):6.2f} ({min(vals):.2f}-{max(vals):.2f})"
              f"  middle run: {mid['hcoll_us']:.1f} us vs {mid['baseline_us']:.1f} us")
    print("# sweep: hcoll / MPI time, median (owned/caller where both exist)")
    for coll in ["allreduce", "allgather", "broadcast", "alltoall", "reducescatter"]:
        sizes = [r["size"] for r in section(runs[0], "sweep") if r["name"] == coll]
        cells = []
        for size in sizes:
            parts = []
            for key in ("owned_ratio", "caller_ratio"):
                vals = [r.get(key) for run in runs for r in section(run, "sweep")
                        if r["name"] == coll and r["size"] == size]
                if vals and None not in vals:
                    parts.append(f"{statistics.median(vals):.2f}")
            cells.append(f"{int(size)}:{'/'.join(parts)}")
        print(f"  {coll:13s} " + " ".join(cells))
    if section(runs[0], "floor"):
        print("# protocol floor (raw MPI): readiness AND + non-blocking collective / blocking, median")
        for coll in ["allreduce", "allgather", "broadcast", "alltoall", "reducescatter"]:
            sizes = [r["size"] for r in section(runs[0], "floor") if r["name"] == coll]
            cells = []
            for size in sizes:
                vals = [r["ratio"] for run in runs for r in section(run, "floor")
                        if r["name"] == coll and r["size"] == size]
                cells.append(f"{int(size)}:{statistics.median(vals):.2f}")
            print(f"  {coll:13s} " + " ".join(cells))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
