#!/usr/bin/env bash
# Runs a command (a whole MPI job) and asserts that it ends within a bound, with the expected
# kind of exit status, and that no rank printed a FAIL line: for the scenarios where a rank
# leaves, aborts or raises, the job itself ending is what is tested.
# Usage: run_bounded.sh <bound seconds> <zero|nonzero|any|any:N> <command...>
# any:N = any exit status, but at least N "rank R: PASS" lines: ranks whose communicator saw a
# peer leave skip MPI_Finalize, and the launcher then ends the job, sometimes killing a rank that
# had already finished its checks (status 9): the PASS lines are what proves the scenario ran.
set -u
bound=$1 expect=$2
shift 2
start_ns=$(date +%s%N)
out=$(timeout --kill-after=5 "$((bound + 20))" "$@" 2>&1)
rc=$?
elapsed_ms=$((($(date +%s%N) - start_ns) / 1000000))
elapsed=$(printf '%d.%03d' $((elapsed_ms / 1000)) $((elapsed_ms % 1000)))
echo "$out"
echo "exit status $rc after $elapsed s (bound $bound s, expected status: $expect)"
if [[ $rc == 124 || $rc == 137 ]]; then echo "FAIL: the job hung"; exit 1; fi
if ((elapsed_ms > bound * 1000)); then echo "FAIL: the job took longer than $bound s"; exit 1; fi
if grep -q "FAIL" <<<"$out"; then echo "FAIL: a rank reported a failure"; exit 1; fi
if [[ $expect == zero && $rc != 0 ]]; then echo "FAIL: non-zero exit status"; exit 1; fi
if [[ $expect == nonzero && $rc == 0 ]]; then echo "FAIL: exit status 0"; exit 1; fi
if [[ $expect == any:* ]]; then
  passes=$(grep -c "^rank [0-9]*: PASS" <<<"$out")
  if ((passes < ${expect#any:})); then
    echo "FAIL: $passes PASS lines from the ranks, expected at least ${expect#any:}"
    exit 1
  fi
fi
echo "PASS: the job ended in $elapsed s with status $rc"
