#!/usr/bin/env bash
# Sets up a fresh Debian machine, builds hcoll and runs the whole test suite:
#   1. the MPICH build (the default) under CTest: unit tests and multi-rank tests (2, 3, 4 ranks);
#   2. an Open MPI build of the library only, for the Python tests with Debian's mpi4py (built
#      against Open MPI; one process never loads two MPIs);
#   3. the wire-format fuzzer (libFuzzer, ASan + UBSan) for HCOLL_FUZZ_SECONDS (45) seconds;
#   4. an ASan + UBSan build running the unit, multi-rank and loopback tests with zero reports
#      allowed;
#   5. a TSan build running the multi-threaded tests (smoke, stall, shutdown, soak) and the
#      collective tests on the loopback backend (every rank a thread of one process);
#   6. pip: the wheel built (`pip wheel --no-build-isolation`) and installed into a clean venv
#      with Debian's packages visible, then the Python checks run from that install, outside
#      the source tree.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh test
jobs=$(nproc)

# The Python, example and plot tests are registered only when their modules import, so a bare
# machine still configures. Here, after install-deps, every one must exist: an unregistered test
# is one that silently never runs (CI sets CI=true; the check holds for local runs as well).
require_tests() {
  local dir=$1
  shift
  local t listed missing=()
  # Exact names from the full listing (-R would also count a test's fixture setup tests).
  listed=$(ctest --test-dir "$dir" -N | sed -n 's/^ *Test *#[0-9]*: //p')
  for t in "$@"; do
    grep -qxF "$t" <<<"$listed" || missing+=("$t")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "FAIL: not registered in $dir (CI=${CI:-unset}): ${missing[*]}"
    echo "      does /usr/bin/python3 import numpy, torch, mpi4py and matplotlib?"
    exit 1
  fi
}

echo "== MPICH build: unit and multi-rank tests"
cmake -S . -B build-test -DHCOLL_MPI=mpich -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build-test -j"$jobs"
require_tests build-test python.numpy.np2 python.abi.np2 python.torch_errors.np2 examples.syncbn.np2 \
  bench.plot bench.plot_quick python.torch_api.np2 python.torch_optimizer.np2 python.torch_syncbn.np3 \
  examples.torch_train.np2 bench.torch_quick.np2 python.failures.raise.np2 \
  python.failures.abort-hook.np2 python.failures.sigint.np2 python.failures.mixed-mpi \
  python.failures.mixed-mpi-late packaging.python_package \
  python.c10d.np2 python.c10d_errors.np2 python.c10d_ddp.np2 examples.torch_ddp.np2
ctest --test-dir build-test --output-on-failure --timeout 300

echo "== Open MPI build: Python binding with mpi4py"
cmake -S . -B build-test-openmpi -DHCOLL_MPI=openmpi -DHCOLL_BUILD_BENCH=OFF -DHCOLL_WITH_NCCL=OFF \
      -DHCOLL_WITH_TORCH=OFF \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build-test-openmpi -j"$jobs" --target hcoll
require_tests build-test-openmpi python.numpy.np2 python.abi.np2 python.torch_errors.np2 examples.syncbn.np2 \
  python.mpi4py.np2 python.torch_mpi4py.np2 python.failures.raise.np2 \
  python.failures.abort-hook.np2 python.failures.sigint.np2 packaging.python_package
# As root (CI) Open MPI needs --allow-run-as-root --oversubscribe: the build passes them. In
# containers its shared-memory transport cannot use CMA (ptrace), so it is told to copy instead.
OMPI_MCA_btl_vader_single_copy_mechanism=none \
  ctest --test-dir build-test-openmpi -L python --output-on-failure --timeout 300

echo "== Wire-format fuzzing: libFuzzer with ASan + UBSan, bounded time"
cmake -S tests/fuzz -B build-test-fuzz -DCMAKE_CXX_COMPILER=clang++-14
cmake --build build-test-fuzz -j"$jobs"
mkdir -p build-test-fuzz/corpus  # new inputs land here; the checked-in seeds stay untouched
build-test-fuzz/hcoll-fuzz-wire -max_total_time="${HCOLL_FUZZ_SECONDS:-45}" -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 build-test-fuzz/corpus tests/fuzz/corpus

echo "== AddressSanitizer + UBSan build: unit, core, fusion, reliability and loopback tests"
cmake -S . -B build-test-asan -DHCOLL_MPI=mpich -DCMAKE_BUILD_TYPE=Debug \
      -DHCOLL_SANITIZE=address,undefined -DHCOLL_BUILD_BENCH=OFF -DHCOLL_WITH_NCCL=OFF \
      -DHCOLL_WITH_TORCH=OFF
cmake --build build-test-asan -j"$jobs"
# Any report fails the test (halt_on_error); tests/sanitizers/lsan.supp hides hwloc's (and the
# transports') one-time allocations and, of MPICH, only the split/dup communicators abandoned
# requests keep alive, so leaks of hcoll's own memory and of other MPI objects are reported;
# the slow unwinder is needed because hwloc plugins MPICH unloads leave frames fast unwinding
# cannot cross.
ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:fast_unwind_on_malloc=0 \
LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0" \
UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$PWD/tests/sanitizers/ubsan.supp" \
  ctest --test-dir build-test-asan -L "unit|mpi|loopback" -LE "python|packaging|examples|bench" \
        --output-on-failure --timeout 300

echo "== ThreadSanitizer build: the multi-threaded tests (smoke, stall, shutdown, soak, loopback)"
cmake -S . -B build-test-tsan -DHCOLL_MPI=mpich -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DHCOLL_SANITIZE=thread -DHCOLL_BUILD_BENCH=OFF -DHCOLL_WITH_NCCL=OFF \
      -DHCOLL_WITH_TORCH=OFF
cmake --build build-test-tsan -j"$jobs" \
  --target hcoll-test-smoke hcoll-test-stall hcoll-test-shutdown hcoll-test-soak \
           hcoll-test-allreduce hcoll-test-allgather hcoll-test-broadcast hcoll-test-alltoall \
           hcoll-test-reducescatter hcoll-test-into hcoll-test-names hcoll-test-mismatch \
           hcoll-test-join_barrier hcoll-test-fusion hcoll-test-cache hcoll-test-progress \
           hcoll-test-adasum hcoll-test-fold
# UCX's memory hooks (libucm, below MPICH) crash inside TSan's interceptors at thread exit, so
# they are off; MPICH's locks are pthread mutexes TSan sees, so no MPICH suppressions are needed.
UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_MALLOC_HOOKS=no UCX_MEM_EVENTS=no \
TSAN_OPTIONS="halt_on_error=1:suppressions=$PWD/tests/sanitizers/tsan.supp" \
  ctest --test-dir build-test-tsan -R "^(smoke|stall|shutdown|soak)\.|\.loopback\." \
        --output-on-failure --timeout 300

echo "== pip: the wheel in a clean venv, the Python checks from the install"
pip_start=$SECONDS
pip_dir=$PWD/build-test-pip
rm -rf "$pip_dir/venv" "$pip_dir/dist"
/usr/bin/python3 -m venv --system-site-packages "$pip_dir/venv"
venv_python=$pip_dir/venv/bin/python
# No network (--no-index): the build backend is Debian's setuptools + wheel (--no-build-isolation),
# numpy/torch/mpi4py are Debian's, seen through --system-site-packages. Release, no tests, no bench.
HCOLL_BUILD_DIR=$pip_dir/cmake CMAKE_BUILD_PARALLEL_LEVEL=$jobs \
  "$venv_python" -m pip wheel --no-build-isolation --no-index --no-deps --no-cache-dir \
    -w "$pip_dir/dist" .
"$venv_python" -m pip install --no-index "$pip_dir"/dist/hcoll-*.whl
# Outside the source tree, with the check script copied out of it: neither the working directory
# nor the script's folder can put the source tree's bindings/python/hcoll before the install.
pip_run=$(mktemp -d)
cp tests/packaging/pip_installed.py tests/python/harness.py tests/python/c10d_testing.py tests/python/test_c10d.py \
   tests/python/test_c10d_errors.py tests/python/test_c10d_ddp.py examples/torch_ddp.py "$pip_run/"
# Every module listed must import from the venv's install: a part missing from the wheel fails here
# instead of its tests silently not running.
require_installed() {
  local m
  for m in "$@"; do
    (cd "$pip_run" && env -u PYTHONPATH -u HCOLL_LIBRARY "$venv_python" -c "
import os, sys, $m as m
assert os.path.realpath(m.__file__).startswith(os.path.realpath(sys.prefix) + '/'), m.__file__
") || { echo "FAIL: $m does not import from the pip install in $pip_dir/venv"; exit 1; }
  done
}
require_installed hcoll hcoll.torch hcoll.torch._c10d hcoll.torch.distributed
# The checks run from the install. Tests added here must not put the source tree on sys.path
# (tests/python/harness.py does unless HCOLL_TEST_INSTALLED=1) and must name mpiexec.mpich.
pip_install_tests() {
  local mpirun=(timeout 120 mpiexec.mpich -n 2 "$venv_python")
  "$venv_python" pip_installed.py where
  "${mpirun[@]}" pip_installed.py numpy
  "${mpirun[@]}" pip_installed.py torch
  # The torch.distributed backend (hcoll.torch._c10d from the wheel): its tests and the DDP example.
  "${mpirun[@]}" test_c10d.py
  "${mpirun[@]}" test_c10d_errors.py
  timeout 240 mpiexec.mpich -n 2 "$venv_python" test_c10d_ddp.py
  "${mpirun[@]}" torch_ddp.py --steps 3
}
(cd "$pip_run" && unset PYTHONPATH HCOLL_LIBRARY && export HCOLL_TEST_INSTALLED=1 &&
  pip_install_tests)
rm -rf "$pip_run"
echo "pip stage: $((SECONDS - pip_start)) s"

echo "== all test stages passed"
