#!/usr/bin/env bash
# Bounded exit (issue 29): both ranks close cleanly, then rank 1 never reaches its MPI_Finalize
# (test_leave's peer-dies-after-close: it stops itself, writing its pid) and is SIGKILLed; rank
# 0's exit's MPI_Finalize waits for rank 1 forever, so hcoll's watchdog must end rank 0 within
# the exit bound (min(stall shutdown time, 30 s)) with the status it was exiting with (0),
# saying why. MPICH's launcher runs with clean-up off (-disable-auto-cleanup, as fault-tolerant
# jobs run), so nothing but hcoll ends rank 0; a shell around rank 0 records its exit status and
# when it ended (MPMD launch).
# Usage: run_exit_bound.sh <mpiexec> <test-leave program> <exit bound seconds> <work dir>
set -u
mpiexec=$1 program=$2 bound=$3 dir=$4
mkdir -p "$dir"
pidfile=$dir/exit-bound.pid statusfile=$dir/exit-bound.status outfile=$dir/exit-bound.out
rm -f "$pidfile" "$statusfile"
: >"$outfile"  # a previous run's output must not satisfy the waits below
"$mpiexec" -disable-auto-cleanup \
  -n 1 sh -c '"$0" peer-dies-after-close; echo "$? $(date +%s%N)" > "$1"' "$program" "$statusfile" : \
  -n 1 "$program" peer-dies-after-close "$pidfile" >"$outfile" 2>&1 &
launcher=$!
fail() {
  echo "FAIL: $*"
  [[ -s $pidfile ]] && kill -KILL "$(cat "$pidfile")" 2>/dev/null
  kill "$launcher" 2>/dev/null
  cat "$outfile"
  exit 1
}
# Rank 0 returns from main: its exit starts then.
for ((i = 0; i < 600; i++)); do
  grep -q "rank 0: returning 0" "$outfile" && break
  sleep 0.1
done
grep -q "rank 0: returning 0" "$outfile" || fail "rank 0 never got to its exit"
exit_start=$(date +%s%N)
limit_ms=$((bound * 1000 + 5000))  # the bound, plus slack for a loaded machine
while [[ ! -s $statusfile ]] && (($(date +%s%N) - exit_start < limit_ms * 1000000)); do
  sleep 0.1
done
[[ -s $statusfile ]] || fail "rank 0's exit did not end within $bound s (+5 s slack): it hangs"
read -r status ended <"$statusfile"
exit_ms=$(((ended - exit_start) / 1000000))
# Rank 1 has been stopped all along: killing it now ends the job.
kill -KILL "$(cat "$pidfile")"
wait "$launcher"
cat "$outfile"
grep -q "rank 0: PASS: clean close" "$outfile" || fail "rank 0 did not close cleanly"
grep -q "rank 1: PASS: clean close" "$outfile" || fail "rank 1 did not close cleanly"
grep -q "MPI_Finalize did not return within" "$outfile" || fail "rank 0 did not say why it ended"
[[ $status == 0 ]] || fail "rank 0 ended with status $status, not the 0 it returned"
echo "PASS: rank 0's exit ended after ~$exit_ms ms (bound $bound s) with status 0"
