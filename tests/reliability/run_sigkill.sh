#!/usr/bin/env bash
# Runs test_sigkill under the MPI launcher and asserts that the job ends within a bound
# (rank 0 gets an error, or the launcher aborts the job after rank 1's death), never a hang.
# The timing, the hang check and the exit status are run_bounded.sh's; this adds what is
# particular to the scenario.
# Usage: run_sigkill.sh <mpiexec> <program> <bound seconds> [program arguments...]
set -u
mpiexec=$1 program=$2 bound=$3
shift 3
out=$("$(dirname "$0")/run_bounded.sh" "$bound" any "$mpiexec" -n 2 "$program" "$@")
rc=$?
echo "$out"
if [[ $rc != 0 ]]; then exit 1; fi
if ! grep -q "rank 1: warmed up" <<<"$out"; then echo "FAIL: rank 1 never got going"; exit 1; fi
if grep -q "rank 0: wait returned SUCCESS" <<<"$out"; then echo "FAIL: rank 0 succeeded"; exit 1; fi
# Shared-memory segments are named after rank 0's pid and unlinked once mapped: none may be left.
pid0=$(sed -n 's/^rank 0: warmed up (pid \([0-9]*\)).*/\1/p' <<<"$out")
if [[ -n $pid0 ]] && compgen -G "/dev/shm/hcoll.$pid0.*" >/dev/null; then
  echo "FAIL: shared-memory segments left: $(ls /dev/shm/hcoll."$pid0".*)"
  exit 1
fi
echo "PASS: the job ended within $bound s (rank 0 error or launcher abort)"
