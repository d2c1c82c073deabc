#!/usr/bin/env bash
# Runs the smoke test on 2 ranks with HCOLL_TIMELINE set, then validates every rank's trace.
# Usage: check_timeline.sh PYTHON SMOKE_BINARY MPIEXEC [MPIEXEC_PREFLAGS...]
set -euo pipefail
python=$1 smoke=$2 mpiexec=$3
shift 3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
HCOLL_TIMELINE="$dir/trace.json" "$mpiexec" -n 2 "$@" "$smoke"
"$python" "$(dirname "$0")/check_timeline.py" "$dir/trace.json" 2
