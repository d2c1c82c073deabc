#!/usr/bin/env bash
# Builds hcoll with the NCCL backend and runs the GPU tests and a small GPU bench (1 rank, then
# 2 processes sharing the GPU(s)). Meant for a machine with at least one GPU; < 5 minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build-gpu}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
nvidia-smi -L || echo "nvidia-smi not available"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DHCOLL_WITH_NCCL=ON -DHCOLL_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target hcoll-unit-tests hcoll-test-gpu hcoll-bench-gpu
"$BUILD"/tests/hcoll-unit-tests "[device]*,NCCL*,Device*,StreamOrder*,Fusion allocator*" || \
  "$BUILD"/tests/hcoll-unit-tests
(cd "$BUILD" && ctest -L gpu --output-on-failure --timeout 180)
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
echo "== bench: 1 rank"
timeout 120 "$MPIEXEC" -n 1 "$BUILD"/tests/hcoll-bench-gpu
echo "== bench: 2 processes"
timeout 120 "$MPIEXEC" -n 2 "$BUILD"/tests/hcoll-bench-gpu
