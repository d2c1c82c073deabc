#!/usr/bin/python3
"""Turns hcoll-bench's JSON (--json PATH) into PNGs with matplotlib's Agg backend.

    /usr/bin/python3 bench/plot.py bench.json [--out DIR]

Writes, for whatever the JSON holds:
  sweep_<collective>.png  algbw (GB/s) vs message size, one line per implementation (every
                          numeric key "<impl>_algbw" of the records sharing a name: hcoll, mpi)
  sweep.png               all collectives side by side
  sweep_ratio.png         hcoll time / raw MPI time vs message size, one line per collective and
                          output mode (records' "<mode>_ratio" keys, else "ratio"), with the
                          1.1x and 1.5x target lines
  scenarios.png           bars of time per scenario: hcoll (grouped) vs its baseline (separate
                          calls / hand-packed MPI), from records with "<x>_us" keys
The reader is deliberately lenient: records may be a top-level list or under "records", the
section may be missing, unknown keys are ignored, and records it cannot use are counted, not fatal.
Exits 1 only when nothing at all could be plotted.
"""

import argparse
import collections
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load_records(path):
    with open(path) as f:
        doc = json.load(f)
    if isinstance(doc, list):
        return doc, {}
    records = doc.get("records") or doc.get("results") or []
    meta = {k: v for k, v in doc.items() if not isinstance(v, (list, dict))}
    return [r for r in records if isinstance(r, dict)], meta


def number(r, key):
    v = r.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def sweep_series(records):
    """{collective: {impl: [(size, algbw)]}} from records that have a size and *_algbw keys."""
    out = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in records:
        size = number(r, "size") or number(r, "bytes") or number(r, "size_bytes")
        if size is None or r.get("section", "sweep") not in ("sweep", None):
            continue
        name = str(r.get("name") or r.get("collective") or "collective")
        for key in r:
            if key.endswith("_algbw") and number(r, key) is not None:
                out[name][key[: -len("_algbw")]].append((size, number(r, key)))
    return out


def ratio_series(records):
    """{"<collective> (<mode>)": [(size, ratio)]} from sweep records' *_ratio (or ratio) keys."""
    out = collections.defaultdict(list)
    for r in records:
        size = number(r, "size")
        if size is None or r.get("section", "sweep") not in ("sweep", None):
            continue
        name = str(r.get("name") or "collective")
        keys = [k for k in r if k.endswith("_ratio") and number(r, k) is not None]
        if not keys and number(r, "ratio") is not None:
            keys = ["ratio"]
        for key in keys:
            mode = key[: -len("_ratio")] if key != "ratio" else ""
            out[f"{name} ({mode})" if mode else name].append((size, number(r, key)))
    return out


def scenario_bars(records):
    """[(scenario, [(label, microseconds)])] from records with two or more *_us keys."""
    bars = []
    for r in records:
        if r.get("section") not in (None, "scenario"):
            continue
        times = [(k[:-3], number(r, k)) for k in r if k.endswith("_us") and number(r, k) is not None]
        if len(times) < 2:
            continue
        labels = {"hcoll": "hcoll (grouped)", "baseline": str(r.get("baseline") or "baseline")}
        times.sort(key=lambda kv: kv[0] != "hcoll")  # hcoll first, so colors mean the same thing
        bars.append((str(r.get("name", "?")), [(labels.get(k, k), v) for k, v in times]))
    return bars


def human_bytes(x):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if x < 1024 or unit == "GiB":
            return f"{x:g} {unit}"
        x /= 1024


def draw_sweep(ax, name, series):
    for impl, points in sorted(series.items()):
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=impl)
    ax.set_xscale("log", base=2)
    ax.set_title(name)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("algbw (GB/s)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()


def plot_all(records, meta, outdir):
    written = []
    sweeps = sweep_series(records)
    suffix = f" ({meta['ranks']} ranks)" if "ranks" in meta else ""
    for name, series in sorted(sweeps.items()):
        fig, ax = plt.subplots(figsize=(6, 4))
        draw_sweep(ax, name + suffix, series)
        path = os.path.join(outdir, f"sweep_{name.replace('/', '_')}.png")
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    if sweeps:
        n = len(sweeps)
        cols = min(n, 3)
        rows = (n + cols - 1) // cols
        fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
        for ax, (name, series) in zip(axes.flat, sorted(sweeps.items())):
            draw_sweep(ax, name, series)
        for ax in list(axes.flat)[n:]:
            ax.axis("off")
        fig.suptitle("hcoll vs raw MPI" + suffix)
        fig.tight_layout()
        path = os.path.join(outdir, "sweep.png")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)

    ratios = ratio_series(records)
    if ratios:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for label, points in sorted(ratios.items()):
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
        for limit in (1.1, 1.5):
            ax.axhline(limit, color="gray", linestyle="--", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("hcoll time / raw MPI time")
        ax.set_title("ratio to raw MPI (same run)" + suffix)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = os.path.join(outdir, "sweep_ratio.png")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)

    bars = scenario_bars(records)
    if bars:
        fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(bars)), 4.5))
        width = 0.8 / max(len(b[1]) for b in bars)
        for i, (name, entries) in enumerate(bars):
            for j, (label, us) in enumerate(entries):
                x = i + (j - (len(entries) - 1) / 2) * width
                ax.bar(x, us, width, color=f"C{j}")
                ax.text(x, us / 2, label, rotation=90, ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(bars)))
        ax.set_xticklabels([b[0] for b in bars], rotation=20)
        ax.set_ylabel("time per step (us)")
        ax.set_title("grouped vs separate" + suffix)
        fig.tight_layout()
        path = os.path.join(outdir, "scenarios.png")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written, sum(len(s) for s in sweeps.values()), len(bars)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", help="hcoll-bench --json output")
    ap.add_argument("--out", default=".", help="directory for the PNGs (created)")
    args = ap.parse_args(argv)
    records, meta = load_records(args.json)
    os.makedirs(args.out, exist_ok=True)
    written, nseries, nbars = plot_all(records, meta, args.out)
    print(f"{len(records)} records: {nseries} sweep series, {nbars} scenarios")
    for p in written:
        print("wrote", p)
    if not written:
        print("nothing to plot in", args.json, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
