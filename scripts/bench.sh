#!/usr/bin/env bash
# Sets up a fresh Debian machine, builds hcoll in Release mode and runs the benchmark on 2 ranks.
# Extra arguments go to hcoll-bench (e.g. --quick, --json out.json).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh bench
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DHCOLL_BUILD_TESTS=OFF
cmake --build build-release -j"$(nproc)"
mpiexec.mpich -n 2 build-release/bench/hcoll-bench "$@"
