// hcoll-bench: collectives through hcoll against raw MPI on the same buffers, then scenarios
// (fusion, response cache, latency, bandwidth, isolation of communicators, memory).
// Run as `mpiexec.mpich -n 2 hcoll-bench [--quick] [--json PATH] [--only LIST]`.
#include <cstdio>

#include "scenarios.h"

using namespace hbench;

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  Context ctx;
  MPI_Comm_rank(MPI_COMM_WORLD, &ctx.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ctx.size);
  if (provided < MPI_THREAD_MULTIPLE) {
    if (ctx.rank == 0) std::fprintf(stderr, "MPI does not provide MPI_THREAD_MULTIPLE\n");
    MPI_Finalize();
    return 2;
  }
  if (!parseOptions(argc, argv, ctx.rank, &ctx.options)) {
    MPI_Finalize();
    return 2;
  }
  // MPI is already initialized, so hcoll shares it and leaves finalization to us.
  if (hcoll_initialize(nullptr) != HCOLL_SUCCESS || hcoll_comm_world(&ctx.world) != HCOLL_SUCCESS) {
    std::fprintf(stderr, "[rank %d] hcoll_initialize failed: %s\n", ctx.rank, hcoll_last_error());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int major, minor, patch;
  hcoll_version(&major, &minor, &patch);
  say(ctx, "# hcoll-bench: hcoll %d.%d.%d, %d ranks%s\n", major, minor, patch, ctx.size,
      ctx.options.quick ? " (quick)" : "");

  // RSS first: later parts touch 64 MiB buffers and would hide growth in ru_maxrss.
  if (ctx.options.wants("rss")) runRss(ctx);
  runSweep(ctx);
  if (ctx.options.wants("floor")) runFloor(ctx);
  if (ctx.options.wants("a")) runScenarioA(ctx);
  if (ctx.options.wants("b")) runScenarioB(ctx);
  if (ctx.options.wants("c")) runScenarioC(ctx);
  if (ctx.options.wants("d")) runScenarioD(ctx);
  if (ctx.options.wants("e")) runScenarioE(ctx);
  if (ctx.options.wants("f")) runScenarioF(ctx);
  if (ctx.options.wants("adasum")) runAdasum(ctx);

  printTargets(ctx);
  const uint64_t errors = sumAcrossRanks(ctx.errors);
  const uint64_t wrong = ctx.wrong;  // already summed over ranks, held by rank 0
  say(ctx, "\n# Out of bounds values : %llu %s\n# hcoll errors        : %llu\n",
      static_cast<unsigned long long>(wrong), wrong ? "FAILED" : "OK",
      static_cast<unsigned long long>(errors));
  if (ctx.rank == 0 && !ctx.options.jsonPath.empty() && !json().write(ctx.options.jsonPath, ctx)) {
    std::fprintf(stderr, "could not write %s\n", ctx.options.jsonPath.c_str());
  }
  int failed = wrong != 0 || errors != 0;
  MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
  hcoll_shutdown();
  MPI_Finalize();
  return failed ? 1 : 0;
}
