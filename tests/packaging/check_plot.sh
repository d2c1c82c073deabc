#!/usr/bin/env bash
# Runs bench/plot.py on a bench JSON (the checked-in sample, or what bench.quick wrote) and checks
# it wrote real PNGs.
# Usage: check_plot.sh PYTHON PLOT_PY BENCH_JSON OUT_DIR
set -euo pipefail
python=$1 plot=$2 sample=$3 out=$4
rm -rf "$out"
"$python" "$plot" "$sample" --out "$out"
for f in sweep.png sweep_allreduce.png sweep_allgather.png sweep_ratio.png scenarios.png; do
  [ -s "$out/$f" ] || { echo "FAIL: $out/$f missing"; exit 1; }
  [ "$(head -c 8 "$out/$f" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] \
    || { echo "FAIL: $out/$f is not a PNG"; exit 1; }
done
# A JSON without anything plottable is an error, not an empty success.
echo '{"records": [{"section": "target", "name": "x"}]}' > "$out/empty.json"
if "$python" "$plot" "$out/empty.json" --out "$out/empty" 2>/dev/null; then
  echo "FAIL: plot.py succeeded on a JSON with nothing to plot"; exit 1
fi
echo "plots ok"
