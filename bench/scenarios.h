#pragma once
// The benchmark's parts; each prints its own section and adds its numbers to json().

#include "bench_util.h"

namespace hbench {

void runSweep(Context& ctx);
void runFloor(Context& ctx);  // the readiness-round protocol in raw MPI: reference for the sweep
void runScenarioA(Context& ctx);  // 100 x 4 KiB grouped allreduce
void runScenarioB(Context& ctx);  // training-like step of 200 named tensors
void runScenarioC(Context& ctx);  // SyncBatchNorm grouped allgather
void runScenarioD(Context& ctx);  // small-message latency and wake-up round trip
void runScenarioE(Context& ctx);  // 64 MiB allreduce bandwidth
void runScenarioF(Context& ctx);  // a stalled communicator next to a busy one
void runAdasum(Context& ctx);      // HCOLL_ADASUM next to SUM and MPI_Allreduce
void runRss(Context& ctx);        // peak RSS over 1,000 repeated small steps

// Scenario (c)'s grouped allgather on `comm`, `iters` times; calls per second (slowest rank).
double syncBnThroughput(Context& ctx, hcoll_comm_t comm, int iters);

}  // namespace hbench
