#!/usr/bin/env python3
"""hcoll against another MPI library, measured: pairs of runs made alternately in one session,
`hcoll-bench --json` (its own MPICH baseline inside) and `mpi-peer` (bench/mpi_peer.cc, the same
sweep in raw MPI, built with the other library). Per pair the ratio hcoll / peer for every sweep
size (hcoll's caller-provided outputs where it has them, like the peer's MPI calls) and for (d)'s
8-byte allreduce; printed: the median over the pairs (min-max), and MET/MISS lines for the
targets against the peer.
Usage: bench/compare_peer.py LABEL hcoll1.json peer1.json [hcoll2.json peer2.json ...]"""
import json
import statistics
import sys


def records(path):
    return json.load(open(path))["records"]


def hcoll_times(run):
    times = {}
    for r in run:
        if r["section"] == "sweep":
            times[(r["name"], int(r["size"]))] = r.get("caller_time_us", r["hcoll_time_us"])
        elif r["section"] == "scenario" and r["name"] == "d.latency":
            times[("d.latency", 8)] = r["hcoll_us"]
    return times


def peer_times(run):
    return {(r["name"], int(r["size"])): r["time_us"] for r in run}


def main(label, paths):
    pairs = [(hcoll_times(records(h)), peer_times(records(p)))
             for h, p in zip(paths[0::2], paths[1::2])]
    keys = [k for k in pairs[0][0] if all(k in h and k in p for h, p in pairs)]
    ratios = {}
    print(f"# hcoll / {label} ({len(pairs)} pairs of runs; median, min-max; "
          f"absolute times from the first pair)")
    for key in keys:
        vals = [h[key] / p[key] for h, p in pairs]
        ratios[key] = statistics.median(vals)
        h, p = pairs[0][0][key], pairs[0][1][key]
        print(f"  {key[0]:14s} {key[1]:>9d} B  {ratios[key]:6.2f} ({min(vals):.2f}-{max(vals):.2f})"
              f"  {h:9.2f} us vs {p:9.2f} us")
    targets = []
    if ("d.latency", 8) in ratios:
        targets.append((f"(d) 8-byte allreduce / {label}", ratios[("d.latency", 8)], 1.0, ""))
    gather = [(ratios[k], k[1]) for k in ratios
              if k[0] == "allgather" and (32 << 10) <= k[1] <= (4 << 20)]
    if gather:
        worst = max(gather)
        targets.append((f"allgather 32 KiB-4 MiB worst / {label}", worst[0], 1.0,
                        f"worst at {worst[1]} B"))
    print(f"# targets against {label}")
    for name, measured, limit, detail in targets:
        print(f"  {'MET ' if measured <= limit else 'MISS'} {name:44s} {measured:8.3f} <= "
              f"{limit:6.3f}   {detail}")


if __name__ == "__main__":
    if len(sys.argv) < 4 or len(sys.argv) % 2 != 0:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
