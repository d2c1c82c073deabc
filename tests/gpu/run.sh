#!/usr/bin/env bash
# Builds hcoll with the NCCL backend from what is installed (no network needed) and runs, on a
# machine with at least one GPU, in well under 5 minutes:
#   1. the device unit tests ([device]: stream/event bookkeeping, allocator, bootstrap, kernels)
#   2. the GPU tests with 1 rank, and with 2 ranks only when there are >= 2 GPUs (NCCL refuses
#      two ranks of one communicator on one GPU: "Duplicate GPU detected")
#   3. the GPU bench (hcoll vs raw NCCL, nccl-tests table + JSON) with 1 rank, and with 2
#      processes only when there are >= 2 GPUs.
# Environment: BUILD (build folder, default build-gpu), HCOLL_MPI (mpich, else openmpi if only
# that is installed), JOBS (build parallelism, default nproc), OUT (JSON folder, default $BUILD).
# Exits non-zero if a step failed; SKIPPED steps say why.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build-gpu}
JOBS=${JOBS:-$(nproc)}
OUT=${OUT:-$BUILD}
START=$SECONDS
declare -a SUMMARY=()
FAILED=0
note() { echo "== $*"; }
record() { SUMMARY+=("$1"); case "$1" in FAIL*) FAILED=1 ;; esac; }

# ---- what is installed ----------------------------------------------------------------------
missing=()
command -v cmake >/dev/null || missing+=("cmake (>= 3.25)")
command -v c++ >/dev/null || command -v g++ >/dev/null || missing+=("a C++17 compiler (g++)")
if [ -z "${HCOLL_MPI:-}" ]; then
  if [ -x /usr/bin/mpicc.mpich ]; then HCOLL_MPI=mpich
  elif [ -x /usr/bin/mpicc.openmpi ]; then HCOLL_MPI=openmpi
  else HCOLL_MPI=mpich; missing+=("MPI: /usr/bin/mpicc.mpich (libmpich-dev) or /usr/bin/mpicc.openmpi")
  fi
fi
if [ "$HCOLL_MPI" = openmpi ]; then
  MPIEXEC=(/usr/bin/mpiexec.openmpi --allow-run-as-root --oversubscribe)
else
  MPIEXEC=(/usr/bin/mpiexec.mpich)
fi
[ -x "${MPIEXEC[0]}" ] || missing+=("the launcher ${MPIEXEC[0]}")
have_header() { echo "#include <$1>" | c++ -x c++ -fsyntax-only ${2:-} - 2>/dev/null; }
have_header spdlog/spdlog.h || missing+=("spdlog headers (libspdlog-dev)")
have_header catch2/catch.hpp || missing+=("Catch2 v2 headers (catch2): the tests and the GPU bench need them")
CUDA=${CUDA_HOME:-/usr/local/cuda}
export CUDA_HOME=$CUDA  # cmake/HcollNccl.cmake looks there first
[ -f "$CUDA/include/cuda_runtime_api.h" ] || missing+=("CUDA headers under $CUDA/include (set CUDA_HOME)")
[ -f "$CUDA/include/nccl.h" ] || [ -f /usr/include/nccl.h ] || missing+=("nccl.h (NCCL headers)")
for lib in cudart nvrtc nccl; do
  ls "$CUDA"/lib64/lib$lib.so* "$CUDA"/lib/lib$lib.so* /usr/lib/*/lib$lib.so* >/dev/null 2>&1 ||
    missing+=("lib$lib.so")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "MISSING (this script does not install anything; the machine may have no network):"
  printf '  - %s\n' "${missing[@]}"
  echo "FAIL: cannot build the GPU tests"
  exit 2
fi

if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  IFS=, read -ra _ids <<<"$CUDA_VISIBLE_DEVICES"; GPUS=${#_ids[@]}
elif command -v nvidia-smi >/dev/null; then
  GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
else
  GPUS=0
fi
note "$GPUS GPU(s) visible; MPI = $HCOLL_MPI; build in $BUILD with -j$JOBS"
command -v nvidia-smi >/dev/null && nvidia-smi -L
[ "$GPUS" -gt 0 ] || echo "note: no GPU visible: the GPU tests will report SKIPPED and the bench nothing"

# ---- build ------------------------------------------------------------------------------------
note "configure + build ($(( SECONDS - START )) s)"
if ! cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DHCOLL_MPI="$HCOLL_MPI" \
     -DHCOLL_WITH_NCCL=ON -DHCOLL_BUILD_BENCH=OFF >"$BUILD.configure.log" 2>&1; then
  tail -30 "$BUILD.configure.log"; echo "FAIL: configure (log: $BUILD.configure.log)"; exit 2
fi
if ! cmake --build "$BUILD" -j"$JOBS" --target hcoll-unit-tests hcoll-test-gpu hcoll-bench-gpu \
     >"$BUILD.build.log" 2>&1; then
  grep -E 'error|Error' "$BUILD.build.log" | head -30; echo "FAIL: build (log: $BUILD.build.log)"; exit 2
fi
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}

# ---- 1. device unit tests ----------------------------------------------------------------------
note "unit tests [device] ($(( SECONDS - START )) s)"
if timeout 120 "$BUILD"/tests/hcoll-unit-tests "[device],[fusion_allocator]"; then
  record "PASS    unit tests [device],[fusion_allocator]"
else
  record "FAIL    unit tests [device],[fusion_allocator]"
fi

# ---- 2. GPU tests ------------------------------------------------------------------------------
gpu_test() {  # ranks
  local log="$BUILD/gpu_test_np$1.log"
  note "GPU tests, $1 rank(s) ($(( SECONDS - START )) s)"
  if timeout 150 "${MPIEXEC[@]}" -n "$1" "$BUILD"/tests/hcoll-test-gpu 2>&1 | tee "$log"; then
    if grep -q "SKIPPED" "$log"; then
      record "PASS    GPU tests, $1 rank(s) (some cases SKIPPED: $(grep -m1 -o 'SKIPPED: .*' "$log"))"
    else
      record "PASS    GPU tests, $1 rank(s)"
    fi
  else
    record "FAIL    GPU tests, $1 rank(s) (log: $log)"
  fi
}
gpu_test 1
if [ "$GPUS" -ge 2 ]; then
  gpu_test 2
else
  record "SKIPPED GPU tests, 2 ranks: need 2 GPUs, $GPUS visible (NCCL: \"Duplicate GPU detected\")"
fi

# ---- 3. GPU bench ------------------------------------------------------------------------------
bench() {  # ranks
  note "GPU bench, $1 rank(s) ($(( SECONDS - START )) s)"
  if timeout 120 "${MPIEXEC[@]}" -n "$1" "$BUILD"/tests/hcoll-bench-gpu --json "$OUT/bench_gpu_np$1.json"; then
    record "PASS    GPU bench, $1 rank(s) (JSON: $OUT/bench_gpu_np$1.json)"
  else
    record "FAIL    GPU bench, $1 rank(s)"
  fi
}
if [ "$GPUS" -ge 1 ]; then bench 1; else record "SKIPPED GPU bench: no GPU visible"; fi
if [ "$GPUS" -ge 2 ]; then
  bench 2
else
  record "SKIPPED GPU bench, 2 processes: need 2 GPUs, $GPUS visible"
fi

note "summary ($(( SECONDS - START )) s)"
printf '  %s\n' "${SUMMARY[@]}"
exit $FAILED
