#!/usr/bin/env bash
# Sets up a fresh Debian machine, builds hcoll and runs the whole test suite:
#   1. the MPICH build (the default) under CTest: unit tests and multi-rank tests (2, 3, 4 ranks);
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh test
jobs=$(nproc)

echo "== MPICH build: unit and multi-rank tests"
cmake -S . -B build-test -DHCOLL_MPI=mpich -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build-test -j"$jobs"
ctest --test-dir build-test --output-on-failure --timeout 300

echo "== all test stages passed"
