#!/usr/bin/env bash
# hcoll (MPICH build, scripts/bench.sh's) against Open MPI, measured: builds bench/mpi_peer.cc
# with Open MPI's mpicxx, then runs it under mpiexec.openmpi (shared memory: ob1 + vader, without
# the CMA single copy, which this VM's ptrace settings refuse) alternately with hcoll-bench under
# mpiexec.mpich, REPEATS times (default 3), and prints bench/compare_peer.py's ratios and targets
# (the 8-byte allreduce; allgather from 32 KiB to 4 MiB).
# Usage: scripts/bench-openmpi.sh [BUILD_DIR (default build-release)] [REPEATS] [RANKS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-release} repeats=${2:-3} ranks=${3:-2}
if [[ ! -x $build/bench/hcoll-bench ]]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DHCOLL_BUILD_TESTS=OFF
  cmake --build "$build" -j"$(nproc)" --target hcoll-bench
fi
out=$build/bench-openmpi
mkdir -p "$out"
mpicxx.openmpi -O2 -std=c++17 bench/mpi_peer.cc -o "$out/mpi-peer-openmpi"
ompi_flags=()
if [[ $(id -u) == 0 ]]; then ompi_flags=(--allow-run-as-root --oversubscribe); fi
files=()
for i in $(seq 1 "$repeats"); do
  mpiexec.mpich -n "$ranks" "$build/bench/hcoll-bench" --only allreduce,allgather,broadcast,alltoall,reducescatter,d \
    --max-size $((4 << 20)) --json "$out/hcoll-$i.json" >"$out/hcoll-$i.txt"
  OMPI_MCA_btl_vader_single_copy_mechanism=none mpiexec.openmpi "${ompi_flags[@]}" -n "$ranks" \
    "$out/mpi-peer-openmpi" "$out/openmpi-$i.json" $((4 << 20)) >"$out/openmpi-$i.txt"
  files+=("$out/hcoll-$i.json" "$out/openmpi-$i.json")
done
uptime
python3 bench/compare_peer.py "Open MPI" "${files[@]}"
