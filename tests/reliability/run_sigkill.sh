#!/usr/bin/env bash
# Runs test_sigkill under the MPI launcher and asserts that the job ends within a bound
# (rank 0 gets an error, or the launcher aborts the job after rank 1's death), never a hang.
# Usage: run_sigkill.sh <mpiexec> <program> <bound seconds>
set -u
mpiexec=$1 program=$2 bound=$3
# Bash arithmetic on nanoseconds, no external calculator: a missing `bc` once made the bound
# check below evaluate nothing and silently pass.
start_ns=$(date +%s%N)
out=$(timeout --kill-after=5 "$((bound + 10))" "$mpiexec" -n 2 "$program" 2>&1)
rc=$?
elapsed_ms=$((($(date +%s%N) - start_ns) / 1000000))
elapsed=$(printf '%d.%03d' $((elapsed_ms / 1000)) $((elapsed_ms % 1000)))
echo "$out"
echo "exit status $rc after $elapsed s (bound $bound s)"
if [[ $rc == 124 || $rc == 137 ]]; then echo "FAIL: the job hung"; exit 1; fi
if ! grep -q "rank 1: warmed up" <<<"$out"; then echo "FAIL: rank 1 never got going"; exit 1; fi
if ((elapsed_ms > bound * 1000)); then echo "FAIL: took longer than $bound s"; exit 1; fi
if grep -q "rank 0: wait returned SUCCESS" <<<"$out"; then echo "FAIL: rank 0 succeeded"; exit 1; fi
echo "PASS: the job ended in $elapsed s (rank 0 error or launcher abort)"
