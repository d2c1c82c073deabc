#!/usr/bin/env bash
# Builds hcoll with the NCCL backend from what is on the machine (no network needed) and runs, on
# a machine with at least one GPU, within DEADLINE_S seconds (default 450) all told:
#   1. the device unit tests ([device],[fusion_allocator]: stream/event bookkeeping, allocator,
#      bootstrap, kernels)
#   2. the GPU tests (tests/gpu: every NCCL dtype x op, caller streams, default stream, groups over
#      two streams, device fusion buffers, scale kernels) with 1 rank, and with 2 ranks only when
#      there are >= 2 GPUs (NCCL refuses two ranks of one communicator on one GPU)
#   3. the GPU bench (hcoll vs raw NCCL on the same buffers: allreduce, allgather, broadcast,
#      reducescatter; nccl-tests table + JSON) with 1 rank up to BENCH_MAX_BYTES, and with 2
#      processes only when there are >= 2 GPUs
#   4. the Python binding's torch CUDA tests (tests/python/*cuda*.py) with 1 rank, if any exist
# and ends with a PASS / FAIL / SKIPPED line per step. On a machine without MPI, spdlog or Catch2,
# tests/gpu/device_check.sh sets up the bundle of tests/gpu/make_bundle.sh and calls this.
# Environment: BUILD (build folder, default build-gpu), HCOLL_MPI (mpich, else openmpi if only
# that is installed), MPI_BINDIR (where mpicc.<mpi>/mpiexec.<mpi> are, default /usr/bin), JOBS
# (default nproc), OUT (logs and JSON, default $BUILD), CUDA_HOME (default /usr/local/cuda),
# NCCL_ROOT (NCCL's include/ + lib/ if not under CUDA_HOME), CMAKE_PREFIX_PATH (spdlog, Catch2),
# CMAKE_ARGS (more configure arguments), PYTHON (default python3), BENCH_MAX_BYTES (default 1 GiB),
# DEADLINE_S, BUILD_TIMEOUT_S (default 300). Exits non-zero if a step failed; SKIPPED steps say
# why.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build-gpu}
JOBS=${JOBS:-$(nproc)}
OUT=${OUT:-$BUILD}
MPI_BINDIR=${MPI_BINDIR:-/usr/bin}
PYTHON=${PYTHON:-python3}
BENCH_MAX_BYTES=${BENCH_MAX_BYTES:-1073741824}
DEADLINE_S=${DEADLINE_S:-450}
START=$SECONDS
mkdir -p "$OUT"
declare -a SUMMARY=()
FAILED=0
note() { echo "== $*"; }
record() { SUMMARY+=("$1"); case "$1" in FAIL*) FAILED=1 ;; esac; }
summary() {
  note "summary ($(( SECONDS - START )) s)"
  printf '  %s\n' "${SUMMARY[@]}"
  if [ $FAILED = 0 ]; then echo "RESULT: PASS"; else echo "RESULT: FAIL"; fi
}
# Seconds a step may take: its own bound, cut to what is left of DEADLINE_S (10 s kept for the
# summary). 0 when too little is left to start it.
allot() {
  local left=$(( DEADLINE_S - (SECONDS - START) - 10 ))
  if [ "$left" -lt 15 ]; then echo 0; elif [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}

# ---- what is installed ----------------------------------------------------------------------
missing=()
command -v cmake >/dev/null || missing+=("cmake (>= 3.25)")
command -v c++ >/dev/null || command -v g++ >/dev/null || missing+=("a C++17 compiler (g++)")
if [ -z "${HCOLL_MPI:-}" ]; then
  if [ -x "$MPI_BINDIR/mpicc.mpich" ]; then HCOLL_MPI=mpich
  elif [ -x "$MPI_BINDIR/mpicc.openmpi" ]; then HCOLL_MPI=openmpi
  else HCOLL_MPI=mpich; missing+=("MPI: $MPI_BINDIR/mpicc.mpich (libmpich-dev) or mpicc.openmpi")
  fi
fi
if [ "$HCOLL_MPI" = openmpi ]; then
  MPIEXEC=("$MPI_BINDIR/mpiexec.openmpi" --allow-run-as-root --oversubscribe)
else
  MPIEXEC=("$MPI_BINDIR/mpiexec.mpich")
fi
[ -x "$MPI_BINDIR/mpicc.$HCOLL_MPI" ] || missing+=("the wrapper $MPI_BINDIR/mpicc.$HCOLL_MPI")
[ -x "${MPIEXEC[0]}" ] || missing+=("the launcher ${MPIEXEC[0]}")
INCLUDES=()
IFS=: read -ra _prefixes <<<"${CMAKE_PREFIX_PATH:-}"
for p in "${_prefixes[@]}"; do [ -n "$p" ] && INCLUDES+=("-I$p/include"); done
have_header() { echo "#include <$1>" | c++ -x c++ -std=c++17 -fsyntax-only "${INCLUDES[@]}" - 2>/dev/null; }
have_header spdlog/spdlog.h || missing+=("spdlog headers (libspdlog-dev)")
have_header catch2/catch.hpp || missing+=("Catch2 v2 headers (catch2): the tests and the GPU bench need them")
CUDA=${CUDA_HOME:-/usr/local/cuda}
export CUDA_HOME=$CUDA  # cmake/HcollNccl.cmake looks there first
[ -f "$CUDA/include/cuda_runtime_api.h" ] || missing+=("CUDA headers under $CUDA/include (set CUDA_HOME)")
# Any one of the folders is enough (`ls a b` fails when either is missing: a toolkit with lib64/
# and no lib/ failed this check on the device machine).
has_lib() {  # folder-prefix name
  local f
  for f in "$1"/lib64/lib"$2".so* "$1"/lib/lib"$2".so*; do [ -e "$f" ] && return 0; done
  return 1
}
for lib in cudart nvrtc; do
  has_lib "$CUDA" $lib || missing+=("lib$lib.so under $CUDA/lib64 or $CUDA/lib")
done
if [ -n "${NCCL_ROOT:-}" ]; then
  export NCCL_ROOT  # cmake/HcollNccl.cmake then looks there and nowhere else
  [ -f "$NCCL_ROOT/include/nccl.h" ] || missing+=("nccl.h under NCCL_ROOT=$NCCL_ROOT/include")
  ls "$NCCL_ROOT"/lib/libnccl.so* >/dev/null 2>&1 || missing+=("libnccl.so* under $NCCL_ROOT/lib")
else
  [ -f "$CUDA/include/nccl.h" ] || [ -f /usr/include/nccl.h ] || missing+=("nccl.h (NCCL headers; or set NCCL_ROOT)")
  has_lib "$CUDA" nccl || compgen -G "/usr/lib/*/libnccl.so*" >/dev/null ||
    missing+=("libnccl.so (or set NCCL_ROOT)")
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "MISSING (this script does not install anything; the machine may have no network):"
  printf '  - %s\n' "${missing[@]}"
  record "FAIL    cannot build the GPU tests: ${missing[*]}"
  summary
  exit 2
fi

if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  IFS=, read -ra _ids <<<"$CUDA_VISIBLE_DEVICES"; GPUS=${#_ids[@]}
elif command -v nvidia-smi >/dev/null; then
  GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
else
  GPUS=0
fi
if [ "$GPUS" = 0 ]; then  # no nvidia-smi on the PATH: ask torch, if there is one
  GPUS=$("$PYTHON" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null | tail -1)
  [[ $GPUS =~ ^[0-9]+$ ]] || GPUS=0
fi
note "$GPUS GPU(s) visible; MPI = $HCOLL_MPI (${MPIEXEC[0]}); build in $BUILD with -j$JOBS"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null
fi
[ "$GPUS" -gt 0 ] || echo "note: no GPU visible: the GPU tests will report SKIPPED and the bench nothing"

# ---- build ------------------------------------------------------------------------------------
note "configure + build ($(( SECONDS - START )) s)"
generator=()
[ -z "${CMAKE_GENERATOR:-}" ] && command -v ninja >/dev/null && generator=(-G Ninja)
read -ra extra <<<"${CMAKE_ARGS:-}"
if ! cmake -S . -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DHCOLL_MPI="$HCOLL_MPI" \
     -DHCOLL_MPI_BINDIR="$MPI_BINDIR" -DHCOLL_WITH_NCCL=ON -DHCOLL_BUILD_BENCH=OFF \
     -DHCOLL_PYTHON="$(command -v "$PYTHON" || echo "$PYTHON")" "${extra[@]}" \
     >"$OUT/configure.log" 2>&1; then
  tail -30 "$OUT/configure.log"
  record "FAIL    configure (log: $OUT/configure.log)"; summary; exit 2
fi
grep -E 'hcoll: (MPI|NCCL)' "$OUT/configure.log"
COLLECTIVE_AREAS="allreduce allgather broadcast alltoall reducescatter into"
COLLECTIVE_TARGETS=$(for a in $COLLECTIVE_AREAS; do printf 'hcoll-test-%s ' "$a"; done)
t=$(allot "${BUILD_TIMEOUT_S:-300}")
if [ "$t" = 0 ] || ! timeout "$t" cmake --build "$BUILD" -j"$JOBS" \
     --target hcoll hcoll-unit-tests hcoll-test-gpu hcoll-bench-gpu $COLLECTIVE_TARGETS \
     >"$OUT/build.log" 2>&1; then
  grep -E 'error|Error' "$OUT/build.log" | head -30
  record "FAIL    build (log: $OUT/build.log)"; summary; exit 2
fi
record "PASS    configure + build, $(( SECONDS - START )) s"
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}

# Runs a step under its share of the deadline: step KIND LABEL BOUND LOG command... KIND "gpu"
# (every case needs a GPU: without one the step is SKIPPED if it skipped cleanly) or "any" (most
# cases run without a GPU: PASS, with the skipped cases named).
step() {
  local kind=$1 label=$2 bound=$3 log=$4; shift 4
  local t; t=$(allot "$bound")
  note "$label ($(( SECONDS - START )) s)"
  if [ "$t" = 0 ]; then record "SKIPPED $label: out of time (DEADLINE_S=$DEADLINE_S)"; return; fi
  if timeout "$t" "$@" 2>&1 | tee "$log"; then
    if [ "$kind" = gpu ] && [ "$GPUS" = 0 ] && grep -q "SKIPPED" "$log"; then
      record "SKIPPED $label: no GPU visible (ran; every GPU case skipped cleanly)"
    elif grep -q "SKIPPED" "$log"; then
      record "PASS    $label (some cases SKIPPED: $(grep -m1 -o 'SKIPPED: .*' "$log"))"
    else
      record "PASS    $label"
    fi
  else
    record "FAIL    $label (exit ${PIPESTATUS[0]}, log: $log)"
  fi
}

# ---- 1. device unit tests ----------------------------------------------------------------------
step any "unit tests [device],[fusion_allocator]" 120 "$OUT/unit_device.log" \
  "$BUILD"/tests/hcoll-unit-tests "[device],[fusion_allocator]"

# ---- 2. GPU tests ------------------------------------------------------------------------------
step gpu "GPU tests, 1 rank" 150 "$OUT/gpu_test_np1.log" "${MPIEXEC[@]}" -n 1 "$BUILD"/tests/hcoll-test-gpu
if [ "$GPUS" -ge 2 ]; then
  step gpu "GPU tests, 2 ranks" 150 "$OUT/gpu_test_np2.log" "${MPIEXEC[@]}" -n 2 "$BUILD"/tests/hcoll-test-gpu
else
  record "SKIPPED GPU tests, 2 ranks: need 2 GPUs, $GPUS visible (NCCL: \"Duplicate GPU detected\")"
fi

# ---- 2b. the collective tests (tests/collectives) in CUDA memory, 1 rank ----------------------
# The same test bodies as on the host (HCOLL_TEST_MEMORY=cuda: support/test_util.h), without the
# 16-bit float accumulation cases (NCCL rounds each step) and the 1M-element ones (time).
collectives_in_cuda() {
  local area
  for area in $COLLECTIVE_AREAS; do
    echo "== $area"
    HCOLL_TEST_MEMORY=cuda "$@" "$BUILD/tests/hcoll-test-$area" "~[half_accumulate]~[large]" || return 1
  done
}
# `timeout` runs programs, not shell functions: the step runs a child bash that has it.
export -f collectives_in_cuda
export COLLECTIVE_AREAS BUILD
step gpu "collective tests in CUDA memory, 1 rank" 150 "$OUT/collectives_cuda_np1.log" \
  bash -c 'collectives_in_cuda "$@"' collectives_in_cuda "${MPIEXEC[@]}" -n 1

# ---- 3. GPU bench ------------------------------------------------------------------------------
bench() {  # ranks
  if [ "$GPUS" -lt "$1" ]; then
    record "SKIPPED GPU bench, $1 process(es): need $1 GPU(s), $GPUS visible"; return
  fi
  step gpu "GPU bench, $1 process(es), up to $BENCH_MAX_BYTES bytes" 150 "$OUT/bench_gpu_np$1.log" \
    "${MPIEXEC[@]}" -n "$1" "$BUILD"/tests/hcoll-bench-gpu --max-bytes "$BENCH_MAX_BYTES" \
    --json "$OUT/bench_gpu_np$1.json"
}
bench 1
bench 2

# ---- 4. Python binding with torch CUDA tensors ------------------------------------------------
shopt -s nullglob
py_tests=(tests/python/*cuda*.py)
if [ ${#py_tests[@]} = 0 ]; then
  record "SKIPPED Python torch CUDA tests: none in tests/python (*cuda*.py); the C tests only"
elif ! "$PYTHON" -c "import torch" 2>/dev/null; then
  record "SKIPPED Python torch CUDA tests: $PYTHON cannot import torch"
else
  export HCOLL_LIBRARY=$(cd "$BUILD" && pwd)/libhcoll.so.0 PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
  for py in "${py_tests[@]}"; do
    name=$(basename "$py" .py)
    step gpu "Python $name, 1 rank" 120 "$OUT/$name.log" "${MPIEXEC[@]}" -n 1 "$PYTHON" "$py"
  done
fi

summary
exit $FAILED
