#!/usr/bin/env bash
# Rehearses tests/gpu/device_check.sh on this Debian machine, everything but the GPU: in a private
# mount namespace (root, `unshare -m`; nothing outside this process tree sees it) Debian's own
# MPICH, hwloc, UCX, spdlog, fmt and Catch2 are hidden (empty folders and /dev/null bound over
# them), as is /usr/local/cuda's nccl.h. A copy of the working tree (tracked and
# untracked-not-ignored files, plus the bundle) at another path, a fake pip layout
# <site>/nvidia/nccl/{include/nccl.h,lib/libnccl.so.2} (found through `import nvidia.nccl`) and
# /usr/bin/python3 then stand in for the device machine. It checks that:
#   - device_check.sh configures and builds with the bundle and the pip-layout NCCL, and the GPU
#     steps report SKIPPED (no GPU) with no FAIL;
#   - ldd of libhcoll.so.0, the GPU tests and the bundle's launcher resolve MPI/spdlog/fmt/hwloc/UCX
#     into the bundle and NCCL into the pip layout;
#   - the bundle's mpiexec.mpich runs 2-rank CPU tests (smoke.np2, gpu_2 through CTest);
#   - the Python step runs (a throwaway tests/python/test_rehearsal_cuda.py in the copy).
# Usage: tests/gpu/rehearse_bundle.sh [WORKDIR]  (default /tmp/hcoll-gpu-rehearsal; needs the
# bundle: tests/gpu/make_bundle.sh). JOBS, DEADLINE_S and BUILD_TIMEOUT_S pass through (defaults
# 2, 3000 and 2400: this machine is slow, the device is not).
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC=$PWD
R=${1:-/tmp/hcoll-gpu-rehearsal}
[ -x .gpu-bundle/usr/bin/mpiexec.mpich ] || { echo "no .gpu-bundle: run tests/gpu/make_bundle.sh" >&2; exit 2; }

if [ "${_HCOLL_IN_NS:-}" != 1 ]; then
  rm -rf "$R/repo" "$R/site" "$R/out"
  mkdir -p "$R/repo" "$R/site/nvidia/nccl/lib" "$R/out"
  # What the device tool sends: tracked and untracked-not-ignored files, and the carried bundle.
  git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$R/repo"
  cp -a .gpu-bundle "$R/repo/"
  git -C "$R/repo" init -q && git -C "$R/repo" add -A &&
    git -C "$R/repo" -c user.name=rehearsal -c user.email=r@localhost commit -qm rehearsal
  cat >"$R/repo/tests/python/test_rehearsal_cuda.py" <<'EOF'
"""Throwaway (rehearsal only): the Python step of run.sh loads hcoll through the bundle's MPI."""
import harness  # noqa: F401  (puts bindings/python on sys.path)
import hcoll
import torch

hcoll.initialize()
w = hcoll.world()
assert (w.rank, w.size) == (0, 1), (w.rank, w.size)
hcoll.shutdown()
if not torch.cuda.is_available():
    print("SKIPPED: no CUDA device (torch.cuda.is_available() is False)")
EOF
  # pip's layout of nvidia-nccl-cu13, made from /usr/local/cuda's files.
  mkdir -p "$R/site/nvidia/nccl/include"
  cp -r /usr/local/cuda/include/nccl.h /usr/local/cuda/include/nccl_device.h \
        /usr/local/cuda/include/nccl_device "$R/site/nvidia/nccl/include/"
  ln -sf "$(readlink -f /usr/local/cuda/lib64/libnccl.so.2)" "$R/site/nvidia/nccl/lib/libnccl.so.2"
  exec env _HCOLL_IN_NS=1 unshare -m --propagation private "$0" "$R"
fi

# ---- inside the private mount namespace ---------------------------------------------------------
EMPTY=$(mktemp -d)
hide() { for p in "$@"; do
  [ -e "$p" ] || continue
  if [ -d "$p" ]; then mount --bind "$EMPTY" "$p"; else mount --bind /dev/null "$(readlink -f "$p")"; fi
done; }
L=/usr/lib/x86_64-linux-gnu
hide /usr/include/spdlog /usr/include/fmt /usr/include/catch2 /usr/include/x86_64-linux-gnu/mpich \
     $L/cmake/spdlog $L/cmake/fmt /usr/lib/cmake/Catch2 $L/ucx $L/hwloc \
     /usr/bin/mpicc.mpich /usr/bin/mpiexec.hydra /usr/bin/hydra_pmi_proxy \
     $L/libmpich.so.12.2.2 $L/libhwloc.so.15.6.1 $L/libucp.so.0.0.0 $L/libucs.so.0.0.0 \
     $L/libuct.so.0.0.0 $L/libucm.so.0.0.0 $L/libspdlog.so.1.10.0 $L/libfmt.so.9.1.0 \
     $L/libslurm.so.38.0.0 $L/libnuma.so.1.0.0 \
     /usr/local/cuda/include/nccl.h
# (/usr/local/cuda's nccl.h is now an empty file: a build that included it instead of NCCL_ROOT's
# would fail. Its libnccl.so symlink cannot be hidden without hiding the pip layout's target.)
echo "== hidden: Debian's MPICH, hwloc, UCX, spdlog, fmt, Catch2; /usr/local/cuda's nccl.h"
echo "#include <spdlog/spdlog.h>" | c++ -x c++ -fsyntax-only - 2>/dev/null &&
  { echo "FAIL: Debian's spdlog is still visible" >&2; exit 1; }

cd "$R/repo"
fails=0
check() { if eval "$2"; then echo "PASS    $1"; else echo "FAIL    $1"; fails=1; fi; }
export PYTHON=/usr/bin/python3 PYTHONPATH=$R/site JOBS=${JOBS:-2} DEADLINE_S=${DEADLINE_S:-3000} \
       BUILD_TIMEOUT_S=${BUILD_TIMEOUT_S:-2400}
OUT=$R/out tests/gpu/device_check.sh && rc=0 || rc=$?
B=$R/repo/build-gpu
BU=$R/repo/.gpu-bundle
export LD_LIBRARY_PATH=$BU/usr/lib/x86_64-linux-gnu:$R/site/nvidia/nccl/lib:/usr/local/cuda/lib64
echo "== rehearsal checks"
LOG=$R/out/device_check.log
check "device_check.sh exit 0 (got $rc)" '[ $rc = 0 ]'
check "no FAIL line in the summary" '! grep -q "^  FAIL" $LOG'
check "device unit tests PASS without a GPU" 'grep -q "^  PASS    unit tests" $LOG'
check "GPU tests 1 rank SKIPPED (no GPU)" 'grep -q "SKIPPED GPU tests, 1 rank: no GPU" $LOG'
check "Python step ran (SKIPPED: no GPU)" 'grep -q "SKIPPED Python test_rehearsal_cuda" $LOG'
check "configure used NCCL_ROOT's libnccl.so.2" \
  'grep -q "NCCL backend ON ($R/site/nvidia/nccl/lib/libnccl.so.2" $R/out/configure.log'
check "configure used the bundle's MPICH" 'grep -q "hcoll: MPI = mpich ($BU/" $R/out/configure.log'
SOS='(mpich|spdlog|fmt|hwloc|uc[mpst]|slurm|numa|udev)'
resolved() {  # file: every MPI/spdlog/fmt/hwloc/UCX/NCCL library resolves where it should
  local bad
  [ -e "$1" ] || { echo "  $1: missing"; return 1; }
  bad=$(ldd "$1" | grep -E "not found|$SOS.*=> /(usr/)?lib/" || true)
  bad+=$(ldd "$1" | grep nccl | grep -v "$R/site/nvidia/nccl/lib" || true)
  [ -z "$bad" ] || { echo "  $1:"; echo "$bad" | sed 's/^/    /'; return 1; }
}
for f in "$B/libhcoll.so.0" "$B/tests/hcoll-test-gpu" "$B/tests/hcoll-bench-gpu" \
         "$B/tests/hcoll-unit-tests" "$BU/usr/bin/mpiexec.hydra" "$BU/usr/bin/hydra_pmi_proxy"; do
  check "ldd $(basename "$f") resolves into the bundle / pip NCCL" "resolved $f"
done
ldd "$B/libhcoll.so.0" | grep -E 'mpich|spdlog|fmt|nccl|hwloc|ucp' | sed 's/^/  /'
export PATH=$BU/usr/bin:$PATH HYDRA_LAUNCHER=fork
check "the GPU bench says SKIPPED and exits 0 without a GPU" \
  'mpiexec.mpich -n 1 "$B/tests/hcoll-bench-gpu" --max-bytes 65536 --ops allgather | grep -q SKIPPED'
check "the GPU bench refuses an unknown --ops name" \
  '! mpiexec.mpich -n 1 "$B/tests/hcoll-bench-gpu" --ops allreduce,bogus 2>/dev/null'
cmake --build "$B" -j"$JOBS" --target hcoll-test-smoke >/dev/null
check "2-rank CPU tests through the bundle's mpiexec.mpich (ctest smoke.np2, gpu_2)" \
  'ctest --test-dir "$B" -R "^(smoke.np2|gpu_2)$" --output-on-failure >$R/out/ctest.log;
   grep -q "100% tests passed, 0 tests failed out of 2" $R/out/ctest.log'
grep -h -o "$BU/usr/bin/mpiexec.mpich\" \"-n\" \"2\"" "$B"/tests/CTestTestfile.cmake | sort -u |
  sed 's/^/  (CTest runs: /; s/$/ ...)/'
sent=$(cd "$R/repo" && git ls-files -co --exclude-standard -z | du -cb --files0-from=- | tail -1)
echo "== bundle $(du -sh "$BU" | cut -f1); tree sent besides it: ${sent%%[[:space:]]*} bytes"
[ $fails = 0 ] && echo "REHEARSAL: PASS" || { echo "REHEARSAL: FAIL"; exit 1; }
