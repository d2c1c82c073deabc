#!/usr/bin/env bash
# The GPU check in one call of the device machine (docs/gpu.md): that machine has CUDA, CMake,
# ninja and PyTorch with NCCL as the pip package nvidia-nccl-cu13, but no MPI, spdlog or Catch2
# and no network. This script puts the bundle of tests/gpu/make_bundle.sh (carried as
# .gpu-bundle) on PATH / LD_LIBRARY_PATH / CMAKE_PREFIX_PATH, takes NCCL from the Python
# environment's nvidia/nccl (never /usr/local/cuda's libnccl.so, too large to carry), then runs
# tests/gpu/run.sh. It writes under $OUT (default build-gpu/out), at most 8 files as the device
# tool returns them: device_check.log (everything printed, ending in the PASS/FAIL/SKIPPED
# summary), configure.log, build.log and the bench JSON (bench_gpu_np1.json).
# Environment: BUNDLE (default .gpu-bundle), PYTHON (default python3: the torch one), NCCL_ROOT
# and CUDA_HOME (found when unset), BUILD (default build-gpu), DEADLINE_S (default 450: the
# whole check stays under 8 minutes), and what run.sh reads.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUNDLE=$(cd "${BUNDLE:-.gpu-bundle}" 2>/dev/null && pwd || echo "${BUNDLE:-.gpu-bundle}")
export BUILD=${BUILD:-build-gpu}
case $BUILD in /*) B=$BUILD ;; *) B=$ROOT/$BUILD ;; esac
OUT=${OUT:-$B/out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export PYTHON=${PYTHON:-python3}
export DEADLINE_S=${DEADLINE_S:-450}
ARCH=x86_64-linux-gnu

# Prints the folder of Python package `mod` (a namespace package has no __file__), or nothing.
py_dir() {
  "$PYTHON" -c "import $1 as m; print(list(m.__path__)[0])" 2>/dev/null
}

main() {
  echo "== device_check: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  local U=$BUNDLE/usr
  if [ ! -x "$U/bin/mpiexec.mpich" ] || [ ! -x "$U/bin/mpicc.mpich" ]; then
    echo "FAIL: no MPICH bundle at $BUNDLE: run tests/gpu/make_bundle.sh on Debian 12 and carry .gpu-bundle"
    return 2
  fi
  export PATH=$U/bin:$PATH
  export LD_LIBRARY_PATH=$U/lib/$ARCH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export CMAKE_PREFIX_PATH=$U${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export MPI_BINDIR=$U/bin HCOLL_MPI=mpich
  # Every rank runs on this machine: start them directly, not through ssh (which may be absent).
  export HYDRA_LAUNCHER=fork

  # NCCL from the Python environment: <site-packages>/nvidia/nccl/{include,lib/libnccl.so.2}.
  if [ -z "${NCCL_ROOT:-}" ]; then
    NCCL_ROOT=$(py_dir nvidia.nccl)
    if [ -z "$NCCL_ROOT" ]; then
      for d in /opt/*/.venv/lib/python3*/site-packages/nvidia/nccl /usr/local/lib/python3*/dist-packages/nvidia/nccl; do
        [ -f "$d/include/nccl.h" ] && NCCL_ROOT=$d && break
      done
    fi
  fi
  if [ -z "${NCCL_ROOT:-}" ] || [ ! -f "$NCCL_ROOT/include/nccl.h" ]; then
    echo "FAIL: no NCCL found in $PYTHON's environment (nvidia-nccl-cu13); set NCCL_ROOT"
    return 2
  fi
  export NCCL_ROOT
  export LD_LIBRARY_PATH=$NCCL_ROOT/lib:$LD_LIBRARY_PATH

  # CUDA (cudart, nvrtc, headers): the toolkit at /usr/local/cuda, else pip's nvidia/cu13.
  has_cuda() { [ -f "$1/include/cuda_runtime_api.h" ] && ls "$1"/lib*/libnvrtc.so* >/dev/null 2>&1 &&
               ls "$1"/lib*/libcudart.so* >/dev/null 2>&1; }
  if [ -z "${CUDA_HOME:-}" ]; then
    if has_cuda /usr/local/cuda; then CUDA_HOME=/usr/local/cuda
    else
      local cu; cu=$(py_dir nvidia.cu13)
      if [ -n "$cu" ] && has_cuda "$cu"; then CUDA_HOME=$cu; fi
    fi
  fi
  if [ -z "${CUDA_HOME:-}" ]; then
    echo "FAIL: no CUDA toolkit (include/cuda_runtime_api.h, libcudart, libnvrtc) found; set CUDA_HOME"
    return 2
  fi
  export CUDA_HOME
  # NVRTC opens libnvrtc-builtins at run time from the loader's path.
  for d in "$CUDA_HOME"/lib64 "$CUDA_HOME"/lib; do
    [ -d "$d" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d && break
  done

  echo "== environment"
  echo "bundle:    $BUNDLE ($(du -sh "$BUNDLE" | cut -f1); $(paste -sd, "$BUNDLE/PACKAGES" 2>/dev/null))"
  echo "NCCL_ROOT: $NCCL_ROOT ($(ls "$NCCL_ROOT"/lib/libnccl.so* | xargs -n1 basename | paste -sd' '))"
  echo "CUDA_HOME: $CUDA_HOME"
  "$PYTHON" - <<'EOF' 2>&1 || true
import importlib.metadata as md, sys
try:
    import torch
    cuda = torch.cuda.is_available()
    print(f"python:    {sys.executable} {sys.version.split()[0]}; torch {torch.__version__}, "
          f"CUDA available: {cuda}" + (f", {torch.cuda.get_device_name(0)}" if cuda else ""))
except Exception as e:  # the C tests do not need torch
    print(f"python:    {sys.executable}: no torch ({e})")
for dist in ("nvidia-nccl-cu13", "nvidia-nccl-cu12"):
    try:
        print(f"pip NCCL:  {dist} {md.version(dist)}")
    except md.PackageNotFoundError:
        pass
EOF
  command -v nvcc >/dev/null && nvcc --version | tail -2 | head -1
  cmake --version | head -1
  command -v ninja >/dev/null && echo "ninja $(ninja --version)"
  c++ --version | head -1
  echo "ldd mpiexec.mpich / libmpich (should resolve into the bundle or glibc):"
  ldd "$U/bin/hydra_pmi_proxy" "$U/lib/$ARCH/libmpich.so.12" | grep -E 'not found|=>' | sort -u |
    grep -v -E '/(lib|lib64|usr/lib)/x86_64-linux-gnu/lib(c|m|dl|rt|pthread|resolv)\.so' | sed 's/^/  /'

  OUT="$B/logs" bash tests/gpu/run.sh
  local rc=$?
  if [ -f "$B/libhcoll.so.0" ]; then
    echo "== ldd libhcoll.so.0 (MPI, spdlog, NCCL, CUDA):"
    ldd "$B/libhcoll.so.0" | grep -E 'mpich|spdlog|fmt|nccl|cudart|nvrtc|not found' | sed 's/^/  /'
  fi
  return $rc
}

main 2>&1 | tee "$OUT/device_check.log"
rc=${PIPESTATUS[0]}
for f in configure.log build.log bench_gpu_np1.json bench_gpu_np2.json; do
  [ -f "$B/logs/$f" ] && cp "$B/logs/$f" "$OUT/"
done
echo "device_check: exit $rc; files in $OUT: $(ls "$OUT" | paste -sd' ')"
exit $rc
