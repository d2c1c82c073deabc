// Adasum allreduce (HCOLL_ADASUM) next to a SUM allreduce through hcoll and MPI_Allreduce, on the
// same float32 buffers, timed interleaved. No target: Adasum does more than a sum (a dot product
// and two norms per tensor, the tree's extra rounds of three doubles), and this row shows what
// that costs. Every rank passes the same vector, so adasum(a, a) = a exactly: checked.
#include <cstring>
#include <vector>

#include "scenarios.h"

namespace hbench {

void runAdasum(Context& ctx) {
  const std::vector<size_t> sizes = ctx.options.quick
                                        ? std::vector<size_t>{4096, 262144}
                                        : std::vector<size_t>{4096, 262144, 4u << 20, 32u << 20};
  say(ctx,
      "\n# (adasum) float32 allreduce, out of place: HCOLL_ADASUM, HCOLL_SUM, MPI_Allreduce"
      " (SUM)\n# %11s | %12s %12s %12s | %10s %10s %6s\n",
      "size", "adasum us", "sum us", "mpi us", "adasum/sum", "adasum/mpi", "#wrong");
  for (size_t bytes : sizes) {
    const size_t count = bytes / sizeof(float);
    std::vector<float> in(count), out(count), sum(count), mpiOut(count);
    for (size_t i = 0; i < count; ++i) in[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
    int64_t shape[1] = {static_cast<int64_t>(count)};
    hcoll_tensor_t ti = tensor(in.data(), HCOLL_FLOAT32, shape, 1);
    hcoll_tensor_t to = tensor(out.data(), HCOLL_FLOAT32, shape, 1);
    hcoll_tensor_t ts = tensor(sum.data(), HCOLL_FLOAT32, shape, 1);
    const std::vector<double> t = timeInterleaved(
        ctx.options,
        {[&] {
           hcoll_request_t r;
           if (check(ctx,
                     hcoll_allreduce(ctx.world, "adasum.bench", &ti, &to, HCOLL_ADASUM, 1, 1, &r),
                     "adasum allreduce"))
             waitFree(ctx, r, "adasum.bench");
         },
         [&] {
           hcoll_request_t r;
           if (check(ctx,
                     hcoll_allreduce(ctx.world, "adasum.bench.sum", &ti, &ts, HCOLL_SUM, 1, 1, &r),
                     "sum allreduce"))
             waitFree(ctx, r, "adasum.bench.sum");
         },
         [&] {
           MPI_Allreduce(in.data(), mpiOut.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                         MPI_COMM_WORLD);
         }});
    const uint64_t wrong =
        sumAcrossRanks(static_cast<uint64_t>(std::memcmp(out.data(), in.data(), bytes) != 0));
    if (ctx.rank == 0) ctx.wrong += wrong;
    say(ctx, "  %11zu | %12.1f %12.1f %12.1f | %10.2f %10.2f %6llu\n", bytes, t[0] * 1e6,
        t[1] * 1e6, t[2] * 1e6, t[0] / t[1], t[0] / t[2], static_cast<unsigned long long>(wrong));
    json().add("adasum", "allreduce").numbers = {
        {"size", double(bytes)},          {"adasum_time_us", t[0] * 1e6},
        {"sum_time_us", t[1] * 1e6},      {"mpi_time_us", t[2] * 1e6},
        {"adasum_over_sum", t[0] / t[1]}, {"adasum_over_mpi", t[0] / t[2]},
        {"wrong", double(wrong)}};
  }
}

}  // namespace hbench
