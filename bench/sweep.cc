// The size sweep: each collective through hcoll and through raw MPI on the same buffers, printed
// like nccl-tests (size count type redop time algbw busbw #wrong) with the MPI time and the ratio.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "scenarios.h"

namespace hbench {
namespace {

struct Collective {
  const char* name;
  const char* redop;  // "sum" or "none"
  double busFactor;   // busbw = algbw * busFactor
  bool perRankMultiple;  // element count must divide by the communicator size
};

// Buffers and the three actions (hcoll once, MPI once, verify) for one collective and size.
struct Case {
  std::vector<float> in, out;
  size_t count = 0;       // elements reported in the table
  size_t sizeBytes = 0;   // bytes reported in the table (nccl-tests convention)
  std::function<bool()> runHcoll;
  std::function<void()> runMpi;
  std::function<uint64_t()> verify;  // wrong elements after runHcoll
  std::function<void()> reset;       // restores inputs the collective overwrites
  bool copyOut = true;               // runtime-owned outputs are copied into `out` to verify
};

float value(int rank, size_t i) { return static_cast<float>(rank + 1 + static_cast<int>(i % 5)); }

// Fills `c` in place: its actions refer to its own buffers, so it must not move afterwards.
void makeCase(Context& ctx, const std::string& coll, size_t bytes, Case& c) {
  const int n = ctx.size, r = ctx.rank;
  size_t elems = std::max<size_t>(1, bytes / sizeof(float));
  if (coll == "allgather" || coll == "alltoall" || coll == "reducescatter") {
    elems = std::max<size_t>(n, elems / n * n);
  }
  c.count = elems;
  c.sizeBytes = elems * sizeof(float);
  const std::string name = coll + "." + std::to_string(bytes);
  auto* ctxp = &ctx;
  if (coll == "allreduce") {
    c.in.resize(elems);
    c.out.resize(elems);
    for (size_t i = 0; i < elems; ++i) c.in[i] = value(r, i);
    c.runHcoll = [ctxp, &c, name]() mutable {
      int64_t shape[1] = {static_cast<int64_t>(c.in.size())};
      hcoll_tensor_t in = tensor(c.in.data(), HCOLL_FLOAT32, shape, 1);
      hcoll_tensor_t out = tensor(c.out.data(), HCOLL_FLOAT32, shape, 1);
      hcoll_request_t req;
      if (!check(*ctxp, hcoll_allreduce(ctxp->world, name.c_str(), &in, &out, HCOLL_SUM, 1.0, 1.0, &req),
                 "hcoll_allreduce"))
        return false;
      return waitFree(*ctxp, req, "allreduce");
    };
    c.runMpi = [&c] {
      MPI_Allreduce(c.in.data(), c.out.data(), static_cast<int>(c.in.size()), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
    };
    c.verify = [&c, n] {
      uint64_t wrong = 0;
      for (size_t i = 0; i < c.out.size(); ++i) {
        wrong += c.out[i] != static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(i % 5));
      }
      return wrong;
    };
    c.reset = [&c] { std::fill(c.out.begin(), c.out.end(), -1.f); };
  } else if (coll == "broadcast") {
    c.in.resize(elems);
    c.reset = [&c, r] {
      for (size_t i = 0; i < c.in.size(); ++i) c.in[i] = r == 0 ? value(0, i) : -1.f;
    };
    c.runHcoll = [ctxp, &c, name]() mutable {
      int64_t shape[1] = {static_cast<int64_t>(c.in.size())};
      hcoll_tensor_t buf = tensor(c.in.data(), HCOLL_FLOAT32, shape, 1);
      hcoll_request_t req;
      if (!check(*ctxp, hcoll_broadcast(ctxp->world, name.c_str(), &buf, 0, &req), "hcoll_broadcast"))
        return false;
      return waitFree(*ctxp, req, "broadcast");
    };
    c.runMpi = [&c] {
      MPI_Bcast(c.in.data(), static_cast<int>(c.in.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
    };
    c.verify = [&c] {
      uint64_t wrong = 0;
      for (size_t i = 0; i < c.in.size(); ++i) wrong += c.in[i] != value(0, i);
      return wrong;
    };
  } else {
    // allgather: in = one rank's share, out = everything. alltoall: block j goes to rank j.
    // reducescatter: in = everything, out = this rank's share.
    const size_t share = elems / n;
    const bool gather = coll == "allgather";
    const bool scatter = coll == "reducescatter";
    c.in.resize(gather ? share : elems);
    c.out.resize(scatter ? share : elems);
    for (size_t i = 0; i < c.in.size(); ++i) {
      c.in[i] = coll == "alltoall" ? static_cast<float>((r + 1) * 7 + static_cast<int>(i / share)) +
                                         static_cast<float>(i % 5)
                                   : value(r, i);
    }
    c.reset = [&c] { std::fill(c.out.begin(), c.out.end(), -1.f); };
    c.runHcoll = [ctxp, &c, name, coll]() mutable {
      int64_t shape[1] = {static_cast<int64_t>(c.in.size())};
      hcoll_tensor_t in = tensor(c.in.data(), HCOLL_FLOAT32, shape, 1);
      hcoll_request_t req;
      hcoll_status_t s =
          coll == "allgather" ? hcoll_allgather(ctxp->world, name.c_str(), &in, &req)
          : coll == "alltoall"
              ? hcoll_alltoall(ctxp->world, name.c_str(), &in, nullptr, &req)
              : hcoll_reducescatter(ctxp->world, name.c_str(), &in, HCOLL_SUM, 1.0, 1.0, &req);
      if (!check(*ctxp, s, coll.c_str())) return false;
      if (!check(*ctxp, hcoll_wait(req, 20.0), coll.c_str())) return false;
      hcoll_tensor_t out;
      bool ok = check(*ctxp, hcoll_request_output(req, 0, &out), "hcoll_request_output");
      // Only the verification call copies the result out: the timed calls use it in place, like
      // the MPI baseline does.
      if (ok && c.copyOut) {
        size_t got = 1;
        for (int d = 0; d < out.ndim; ++d) got *= static_cast<size_t>(out.shape[d]);
        std::copy_n(static_cast<const float*>(out.data), std::min(got, c.out.size()), c.out.data());
      }
      hcoll_request_free(req);
      return ok;
    };
    c.runMpi = [&c, coll, share] {
      const int k = static_cast<int>(share);
      if (coll == "allgather") {
        MPI_Allgather(c.in.data(), k, MPI_FLOAT, c.out.data(), k, MPI_FLOAT, MPI_COMM_WORLD);
      } else if (coll == "alltoall") {
        MPI_Alltoall(c.in.data(), k, MPI_FLOAT, c.out.data(), k, MPI_FLOAT, MPI_COMM_WORLD);
      } else {
        MPI_Reduce_scatter_block(c.in.data(), c.out.data(), k, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      }
    };
    c.verify = [&c, coll, share, n, r] {
      uint64_t wrong = 0;
      for (size_t i = 0; i < c.out.size(); ++i) {
        float want;
        if (coll == "allgather") {
          want = value(static_cast<int>(i / share), i % share);
        } else if (coll == "alltoall") {
          const int src = static_cast<int>(i / share);
          want = static_cast<float>((src + 1) * 7 + r) + static_cast<float>((r * share + i % share) % 5);
        } else {
          const size_t g = r * share + i;
          want = static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(g % 5));
        }
        wrong += c.out[i] != want;
      }
      return wrong;
    };
  }
  if (c.reset) c.reset();
}

// Average seconds per call of `body`, with the iteration count agreed on by all ranks.
double timeLoop(const Options& o, const std::function<void()>& body) {
  body();  // warm-up: connections, caches, pooled buffers
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = now();
  body();
  double one = maxAcrossRanks(now() - t0);
  const double budget = o.quick ? 0.005 : 0.2;
  const int maxIters = o.quick ? 3 : 200;
  int iters = std::clamp(static_cast<int>(budget / std::max(one, 1e-7)), 2, maxIters);
  MPI_Bcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  t0 = now();
  for (int i = 0; i < iters; ++i) body();
  return maxAcrossRanks((now() - t0) / iters);
}

}  // namespace

void runSweep(Context& ctx) {
  const std::vector<Collective> all = {
      {"allreduce", "sum", 2.0 * (ctx.size - 1) / ctx.size, false},
      {"allgather", "none", 1.0 * (ctx.size - 1) / ctx.size, true},
      {"broadcast", "none", 1.0, false},
      {"alltoall", "none", 1.0 * (ctx.size - 1) / ctx.size, true},
      {"reducescatter", "sum", 1.0 * (ctx.size - 1) / ctx.size, true},
  };
  const size_t maxBytes = ctx.options.quick ? (1u << 20) : (64u << 20);
  std::vector<size_t> sizes;
  for (size_t b = 8; b <= maxBytes; b *= 4) sizes.push_back(b);
  if (sizes.back() != maxBytes) sizes.push_back(maxBytes);
  if (!ctx.options.quick) sizes.push_back(4u << 20);  // the 4 MiB point the core issue quotes
  std::sort(sizes.begin(), sizes.end());

  for (const Collective& coll : all) {
    if (!ctx.options.wants("sweep") && !ctx.options.wants(coll.name)) continue;
    say(ctx, "\n# %s on %d ranks (float32; time in us; bw in GB/s; hcoll vs raw MPI on the same "
             "buffers)\n", coll.name, ctx.size);
    say(ctx, "#%11s %11s %6s %5s | %10s %8s %8s %6s | %10s %8s %8s | %6s\n", "size", "count",
        "type", "redop", "hcoll time", "algbw", "busbw", "#wrong", "mpi time", "algbw", "busbw",
        "ratio");
    for (size_t bytes : sizes) {
      Case c;
      makeCase(ctx, coll.name, bytes, c);
      // Verify one hcoll call on fresh buffers, then time both.
      c.reset();
      MPI_Barrier(MPI_COMM_WORLD);
      bool ok = c.runHcoll();
      uint64_t wrong = sumAcrossRanks(ok ? c.verify() : c.count);
      c.copyOut = false;
      ctx.wrong += ctx.rank == 0 ? wrong : 0;
      double th = timeLoop(ctx.options, [&] { c.runHcoll(); });
      double tm = timeLoop(ctx.options, [&] { c.runMpi(); });
      const double algH = c.sizeBytes / th / 1e9, algM = c.sizeBytes / tm / 1e9;
      say(ctx, " %11zu %11zu %6s %5s | %10.1f %8.3f %8.3f %6llu | %10.1f %8.3f %8.3f | %6.2f\n",
          c.sizeBytes, c.count, "float", coll.redop, th * 1e6, algH, algH * coll.busFactor,
          static_cast<unsigned long long>(wrong), tm * 1e6, algM, algM * coll.busFactor, th / tm);
      auto& rec = json().add("sweep", coll.name);
      rec.numbers = {{"size", double(c.sizeBytes)}, {"count", double(c.count)},
                     {"hcoll_time_us", th * 1e6}, {"hcoll_algbw", algH},
                     {"hcoll_busbw", algH * coll.busFactor}, {"wrong", double(wrong)},
                     {"mpi_time_us", tm * 1e6}, {"mpi_algbw", algM},
                     {"mpi_busbw", algM * coll.busFactor}, {"ratio", th / tm}};
    }
  }
}

}  // namespace hbench
