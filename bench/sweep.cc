// The size sweep: each collective through hcoll and through raw MPI on the same buffers, printed
// like nccl-tests (size count type redop time algbw busbw #wrong) with the MPI time and the ratio,
// then checked against the sweep targets (alltoall from 128 KiB, every collective at 32 KiB and
// from 512 KiB up). hcoll may run in several output modes ("variants"): "owned" = outputs the
// runtime allocates (allgather, alltoall, reducescatter), "caller" = outputs in the caller's
// buffers, as MPI's (allreduce's out, broadcast's in-place buffer, the `_into` calls of the
// others). Both are timed in the same run; the targets compare like with like (caller).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
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

// One way of calling hcoll for a Case: its output mode and the call (false on an hcoll error).
struct Variant {
  std::string label;  // "owned" or "caller" (see the top of this file)
  std::function<bool()> run;
};

// Buffers and the actions (hcoll once per variant, MPI once, verify) for one collective and size.
struct Case {
  std::vector<float> in, out;
  size_t count = 0;       // elements reported in the table
  size_t sizeBytes = 0;   // bytes reported in the table (nccl-tests convention)
  std::vector<Variant> variants;  // the first one is printed in the main columns
  std::function<void()> runMpi;
  // Broadcast only: MPI_Bcast with the agreement hcoll's broadcast guarantees (see runSweep).
  std::function<void()> runCheckedMpi;
  std::function<uint64_t()> verify;  // wrong elements after a variant's call
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
    auto call = [ctxp, &c, name]() mutable {
      int64_t shape[1] = {static_cast<int64_t>(c.in.size())};
      hcoll_tensor_t in = tensor(c.in.data(), HCOLL_FLOAT32, shape, 1);
      hcoll_tensor_t out = tensor(c.out.data(), HCOLL_FLOAT32, shape, 1);
      hcoll_request_t req;
      if (!check(*ctxp, hcoll_allreduce(ctxp->world, name.c_str(), &in, &out, HCOLL_SUM, 1.0, 1.0, &req),
                 "hcoll_allreduce"))
        return false;
      return waitFree(*ctxp, req, "allreduce");
    };
    c.variants.push_back({"caller", call});  // out is the caller's, like MPI's recvbuf
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
    auto call = [ctxp, &c, name]() mutable {
      int64_t shape[1] = {static_cast<int64_t>(c.in.size())};
      hcoll_tensor_t buf = tensor(c.in.data(), HCOLL_FLOAT32, shape, 1);
      hcoll_request_t req;
      if (!check(*ctxp, hcoll_broadcast(ctxp->world, name.c_str(), &buf, 0, &req), "hcoll_broadcast"))
        return false;
      return waitFree(*ctxp, req, "broadcast");
    };
    c.variants.push_back({"caller", call});  // in place in the caller's buffer
    c.runMpi = [&c] {
      MPI_Bcast(c.in.data(), static_cast<int>(c.in.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
    };
    // What MPI pays for hcoll's contract: a mismatching shape, dtype or root fails on every rank,
    // the root included, so no rank may finish before it has heard every other's description.
    // One 8-byte allreduce of (description, -description) under MAX tells every rank whether all
    // agree; then the data.
    c.runCheckedMpi = [&c] {
      const int64_t description = static_cast<int64_t>(c.in.size());  // dtype, root: fixed here
      int64_t agree[2] = {description, -description}, seen[2];
      MPI_Allreduce(agree, seen, 2, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
      if (seen[0] != -seen[1]) std::abort();  // the bench's ranks always agree
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
    auto call = [ctxp, &c, name, coll]() mutable {
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
    c.variants.push_back({"owned", call});
    // The like-for-like comparison with MPI's preallocated receive buffer: the *_into calls.
    const std::string intoLabel = coll + "_into";
    auto into = [ctxp, &c, name, intoLabel, gather, scatter]() mutable {
      int64_t shape[1] = {static_cast<int64_t>(c.in.size())};
      int64_t outShape[1] = {static_cast<int64_t>(c.out.size())};
      hcoll_tensor_t in = tensor(c.in.data(), HCOLL_FLOAT32, shape, 1);
      hcoll_tensor_t out = tensor(c.out.data(), HCOLL_FLOAT32, outShape, 1);
      hcoll_request_t req;
      hcoll_status_t s =
          gather    ? hcoll_allgather_into(ctxp->world, name.c_str(), &in, &out, nullptr, &req)
          : scatter ? hcoll_reducescatter_into(ctxp->world, name.c_str(), &in, &out, HCOLL_SUM,
                                               1.0, 1.0, nullptr, &req)
                    : hcoll_alltoall_into(ctxp->world, name.c_str(), &in, nullptr, &out, nullptr,
                                          &req);
      if (!check(*ctxp, s, intoLabel.c_str())) return false;
      return waitFree(*ctxp, req, intoLabel.c_str());
    };
    c.variants.push_back({"caller", into});
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

// Worst ratio hcoll / MPI of one collective and output mode over a range of sizes.
struct Worst {
  double ratio = 0;
  size_t size = 0;
  void add(double r, size_t bytes) {
    if (r > ratio) {
      ratio = r;
      size = bytes;
    }
  }
};

std::string sizeLabel(size_t bytes) {
  if (bytes >= (1u << 20)) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1u << 10)) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
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
  const size_t maxBytes = ctx.options.maxSize > 0 ? std::max<size_t>(8, ctx.options.maxSize)
                          : ctx.options.quick     ? (1u << 20)
                                                  : (64u << 20);
  std::vector<size_t> sizes;
  for (size_t b = 8; b <= maxBytes; b *= 4) sizes.push_back(b);
  if (sizes.back() != maxBytes) sizes.push_back(maxBytes);
  // The 4 MiB point the core issue quotes.
  if (!ctx.options.quick && maxBytes >= (4u << 20) &&
      std::find(sizes.begin(), sizes.end(), size_t{4} << 20) == sizes.end()) {
    sizes.push_back(4u << 20);
  }
  std::sort(sizes.begin(), sizes.end());
  constexpr size_t kMid = 32u << 10, kLarge = 512u << 10, kAlltoallFrom = 128u << 10;
  constexpr size_t kSmallUpTo = 8u << 10;  // the small-message targets: 8 B to 8 KiB

  for (const Collective& coll : all) {
    if (!ctx.options.wants("sweep") && !ctx.options.wants(coll.name)) continue;
    say(ctx,
        "\n# %s on %d ranks (float32; time in us; bw in GB/s; hcoll vs raw MPI on the same "
        "buffers)\n",
        coll.name, ctx.size);
    std::map<std::string, Worst> large, alltoallFrom, small;  // by variant
    std::map<std::string, double> mid;
    Worst checkedWorst;  // broadcast against MPI_Bcast with hcoll's agreement, 8 B to 8 KiB
    bool header = false;
    for (size_t bytes : sizes) {
      Case c;
      makeCase(ctx, coll.name, bytes, c);
      if (!header) {
        std::string extra;
        for (size_t v = 1; v < c.variants.size(); ++v)
          extra += " | ratio(" + c.variants[v].label + ")";
        if (c.runCheckedMpi) extra += " | vs checked MPI (to 8 KiB)";
        say(ctx,
            "#%11s %11s %6s %5s | %10s %8s %8s %6s | %10s %8s %8s | %6s  (hcoll: %s outputs)%s\n",
            "size", "count", "type", "redop", "hcoll time", "algbw", "busbw", "#wrong", "mpi time",
            "algbw", "busbw", "ratio", c.variants[0].label.c_str(), extra.c_str());
        header = true;
      }
      // Verify one call of each variant on fresh buffers, then time them and MPI.
      uint64_t wrong = 0;
      for (Variant& v : c.variants) {
        c.copyOut = true;
        c.reset();
        MPI_Barrier(MPI_COMM_WORLD);
        bool ok = v.run();
        wrong += sumAcrossRanks(ok ? c.verify() : c.count);
      }
      c.copyOut = false;
      ctx.wrong += ctx.rank == 0 ? wrong : 0;
      std::vector<std::function<void()>> bodies;
      for (Variant& v : c.variants) bodies.push_back([&v] { v.run(); });
      const bool timeChecked = c.runCheckedMpi && bytes <= kSmallUpTo;
      if (timeChecked) bodies.push_back([&c] { c.runCheckedMpi(); });
      bodies.push_back([&c] { c.runMpi(); });
      std::vector<double> th = timeInterleaved(ctx.options, bodies);
      const double tm = th.back();
      th.pop_back();
      double tChecked = 0;
      if (timeChecked) {
        tChecked = th.back();
        th.pop_back();
      }
      const double algH = c.sizeBytes / th[0] / 1e9, algM = c.sizeBytes / tm / 1e9;
      std::string extra;
      for (size_t v = 1; v < th.size(); ++v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, " | %6.2f", th[v] / tm);
        extra += buf;
      }
      if (timeChecked) {
        char buf[48];
        std::snprintf(buf, sizeof buf, " | %6.2f (%.1f us)", th[0] / tChecked, tChecked * 1e6);
        extra += buf;
        checkedWorst.add(th[0] / tChecked, c.sizeBytes);
      }
      say(ctx, " %11zu %11zu %6s %5s | %10.1f %8.3f %8.3f %6llu | %10.1f %8.3f %8.3f | %6.2f%s\n",
          c.sizeBytes, c.count, "float", coll.redop, th[0] * 1e6, algH, algH * coll.busFactor,
          static_cast<unsigned long long>(wrong), tm * 1e6, algM, algM * coll.busFactor, th[0] / tm,
          extra.c_str());
      auto& rec = json().add("sweep", coll.name);
      rec.numbers = {{"size", double(c.sizeBytes)},
                     {"count", double(c.count)},
                     {"hcoll_time_us", th[0] * 1e6},
                     {"hcoll_algbw", algH},
                     {"hcoll_busbw", algH * coll.busFactor},
                     {"wrong", double(wrong)},
                     {"mpi_time_us", tm * 1e6},
                     {"mpi_algbw", algM},
                     {"mpi_busbw", algM * coll.busFactor},
                     {"ratio", th[0] / tm}};
      rec.strings["hcoll_outputs"] = c.variants[0].label;
      if (timeChecked) {
        rec.numbers["checked_mpi_time_us"] = tChecked * 1e6;
        rec.numbers["ratio_checked_mpi"] = th[0] / tChecked;
      }
      for (size_t v = 0; v < th.size(); ++v) {
        const std::string& label = c.variants[v].label;
        rec.numbers[label + "_time_us"] = th[v] * 1e6;
        rec.numbers[label + "_ratio"] = th[v] / tm;
        if (bytes >= kLarge) large[label].add(th[v] / tm, c.sizeBytes);
        if (bytes <= kSmallUpTo) small[label].add(th[v] / tm, c.sizeBytes);
        if (bytes >= kAlltoallFrom) alltoallFrom[label].add(th[v] / tm, c.sizeBytes);
        if (bytes == kMid) mid[label] = th[v] / tm;
      }
    }
    // Targets compare like with like: caller-provided outputs where the collective has them.
    const std::string like =
        large.count("caller") || mid.count("caller") || small.count("caller") ? "caller" : "owned";
    const std::string name = coll.name;
    if (small.count(like)) {
      addTarget("sweep " + name + " 8 B-8 KiB worst / MPI", small[like].ratio, 2.0, true,
                like + " outputs, worst at " + sizeLabel(small[like].size));
    }
    if (checkedWorst.size > 0) {
      // Not a target: what bounds the broadcast target above (README, "Performance").
      say(ctx,
          "  (broadcast 8 B-8 KiB worst / checked MPI broadcast, 8-byte MPI_Allreduce + MPI_Bcast: "
          "%.2f at %s)\n",
          checkedWorst.ratio, sizeLabel(checkedWorst.size).c_str());
      auto& rec = json().add("reference", "broadcast 8 B-8 KiB worst / checked MPI broadcast");
      rec.numbers = {{"ratio", checkedWorst.ratio}, {"size", double(checkedWorst.size)}};
    }
    if (mid.count(like)) {
      addTarget("sweep " + name + " @32 KiB / MPI", mid[like], 1.5, true, like + " outputs");
    }
    if (large.count(like)) {
      addTarget("sweep " + name + " >=512 KiB worst / MPI", large[like].ratio, 1.1, true,
                like + " outputs, worst at " + sizeLabel(large[like].size));
    }
    if (name == "alltoall") {
      if (alltoallFrom.count("owned")) {
        addTarget("sweep alltoall >=128 KiB worst / MPI", alltoallFrom["owned"].ratio, 1.3, true,
                  "owned outputs, worst at " + sizeLabel(alltoallFrom["owned"].size));
      }
      if (alltoallFrom.count("caller")) {
        addTarget("sweep alltoall >=128 KiB worst / MPI", alltoallFrom["caller"].ratio, 1.15, true,
                  "caller outputs, worst at " + sizeLabel(alltoallFrom["caller"].size));
      }
    }
  }
}

}  // namespace hbench
