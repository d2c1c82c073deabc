#include "bench_util.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace hbench {

bool parseOptions(int argc, char** argv, int rank, Options* out) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") {
      out->quick = true;
    } else if (a == "--json" && i + 1 < argc) {
      out->jsonPath = argv[++i];
    } else if (a == "--max-size" && i + 1 < argc) {
      out->maxSize = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--only" && i + 1 < argc) {
      std::string list = argv[++i];
      size_t start = 0;
      while (start <= list.size()) {
        size_t comma = list.find(',', start);
        if (comma == std::string::npos) comma = list.size();
        if (comma > start) out->only.insert(list.substr(start, comma - start));
        start = comma + 1;
      }
    } else {
      if (rank == 0) {
        std::fprintf(stderr,
                     "usage: hcoll-bench [--quick] [--json PATH] [--only LIST] [--max-size BYTES]\n"
                     "  LIST: comma-separated of sweep, allreduce, allgather, broadcast, alltoall,\n"
                     "        reducescatter, floor, a, b, c, d, e, f, adasum, rss\n");
      }
      return false;
    }
  }
  return true;
}

double medianAcrossRanks(std::vector<double> samples) {
  double median = 0;
  if (!samples.empty()) {
    std::sort(samples.begin(), samples.end());
    size_t n = samples.size();
    median = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  }
  return maxAcrossRanks(median);
}

double maxAcrossRanks(double v) {
  double out = v;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return out;
}

uint64_t sumAcrossRanks(uint64_t v) {
  uint64_t out = v;
  MPI_Allreduce(&v, &out, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  return out;
}

bool check(Context& ctx, hcoll_status_t s, const char* what) {
  if (s == HCOLL_SUCCESS) return true;
  ++ctx.errors;
  std::fprintf(stderr, "[rank %d] %s failed: %s: %s\n", ctx.rank, what, hcoll_status_string(s),
               hcoll_last_error());
  return false;
}

bool waitFree(Context& ctx, hcoll_request_t req, const char* what) {
  hcoll_status_t s = hcoll_wait(req, 20.0);
  bool ok = s == HCOLL_SUCCESS;
  if (!ok) {
    ++ctx.errors;
    std::fprintf(stderr, "[rank %d] %s: wait -> %s: %s\n", ctx.rank, what, hcoll_status_string(s),
                 hcoll_request_error(req));
  }
  if (s != HCOLL_IN_PROGRESS) hcoll_request_free(req);
  return ok;
}

hcoll_tensor_t tensor(void* data, hcoll_dtype_t dtype, const int64_t* shape, int ndim) {
  hcoll_tensor_t t;
  std::memset(&t, 0, sizeof t);
  t.data = data;
  t.dtype = dtype;
  t.ndim = ndim;
  t.shape = shape;
  t.device = HCOLL_DEVICE_HOST;
  t.stream = nullptr;
  return t;
}

std::vector<double> timeInterleaved(const Options& o,
                                    const std::vector<std::function<void()>>& bodies) {
  double slowest = 0;
  for (const auto& body : bodies) {
    // Warm-up: connections, caches, pooled buffers. Twice: on the test VM a buffer's first
    // touches cost ~100 ms per 16 MiB and the second call was still ~30 ms, while the largest
    // sizes time as few as 2 calls (32 MiB reducescatter measured its warm-up, 1.0-4.4x).
    body();
    body();
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = now();
    body();
    slowest = std::max(slowest, maxAcrossRanks(now() - t0));
  }
  const double budget = o.quick ? 0.005 : 0.2;  // per body, as when they were timed one by one
  // Operations of a few microseconds get many calls and more, shorter blocks: 200 calls in 5
  // blocks of 40 (the earlier cap) were ~50 us per block at 8 bytes, where one preemption by
  // another process on this shared VM moved a median by several microseconds.
  const int maxIters = o.quick ? 3 : 20000;
  const int iters = std::clamp(static_cast<int>(budget / std::max(slowest, 1e-7)), 2, maxIters);
  const int maxRounds = o.quick ? 1 : iters >= 2000 ? 21 : 5;
  int counts[2] = {std::clamp(iters / 2, 1, maxRounds), 0};  // rounds, calls per block
  counts[1] = std::max(1, iters / counts[0]);
  MPI_Bcast(counts, 2, MPI_INT, 0, MPI_COMM_WORLD);
  const int rounds = counts[0], block = counts[1];
  std::vector<std::vector<double>> blocks(bodies.size());
  for (int round = 0; round < rounds; ++round) {
    for (size_t k = 0; k < bodies.size(); ++k) {
      const size_t b = (k + static_cast<size_t>(round)) % bodies.size();
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = now();
      for (int i = 0; i < block; ++i) bodies[b]();
      blocks[b].push_back(maxAcrossRanks((now() - t0) / block));
    }
  }
  std::vector<double> perCall;
  for (auto& samples : blocks) {
    std::sort(samples.begin(), samples.end());
    perCall.push_back(samples[samples.size() / 2]);
  }
  return perCall;
}

double medianTime(int reps, const std::function<void()>& body, bool barrierEach) {
  body();
  MPI_Barrier(MPI_COMM_WORLD);
  std::vector<double> samples;
  samples.reserve(reps);
  for (int i = 0; i < reps; ++i) {
    if (barrierEach) MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    body();
    samples.push_back(now() - t0);
  }
  return medianAcrossRanks(std::move(samples));
}

namespace {
struct Target {
  std::string name, detail;
  double measured, limit;
  bool atMost;
};
std::vector<Target>& targets() {
  static std::vector<Target> t;
  return t;
}
}  // namespace

void addTarget(const std::string& name, double measured, double limit, bool atMost,
               const std::string& detail) {
  targets().push_back({name, detail, measured, limit, atMost});
  auto& rec = json().add("target", name);
  rec.numbers = {{"measured", measured}, {"limit", limit}};
  rec.strings["comparison"] = atMost ? "<=" : ">=";
  rec.strings["met"] = (atMost ? measured <= limit : measured >= limit) ? "yes" : "no";
}

void printTargets(const Context& ctx) {
  say(ctx, "\n# targets (informational; this machine is shared and noisy)\n");
  for (const Target& t : targets()) {
    bool met = t.atMost ? t.measured <= t.limit : t.measured >= t.limit;
    say(ctx, "  %-4s %-44s %8.3f %s %6.3f   %s\n", met ? "MET" : "MISS", t.name.c_str(),
        t.measured, t.atMost ? "<=" : ">=", t.limit, t.detail.c_str());
  }
}

Json::Record& Json::add(const std::string& section, const std::string& name) {
  records_.emplace_back();
  records_.back().strings["section"] = section;
  records_.back().strings["name"] = name;
  return records_.back();
}

bool Json::write(const std::string& path, const Context& ctx) const {
  std::ofstream f(path);
  if (!f) return false;
  f << "{\n  \"ranks\": " << ctx.size << ",\n  \"quick\": " << (ctx.options.quick ? "true" : "false")
    << ",\n  \"records\": [\n";
  for (size_t i = 0; i < records_.size(); ++i) {
    const Record& r = records_[i];
    f << "    {";
    bool first = true;
    for (const auto& [k, v] : r.strings) {
      f << (first ? "" : ", ") << '"' << k << "\": \"" << v << '"';
      first = false;
    }
    for (const auto& [k, v] : r.numbers) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.9g", v);
      f << ", \"" << k << "\": " << buf;
    }
    f << "}" << (i + 1 < records_.size() ? "," : "") << "\n";
  }
  f << "  ]\n}\n";
  return static_cast<bool>(f);
}

Json& json() {
  static Json j;
  return j;
}

void say(const Context& ctx, const char* fmt, ...) {
  if (ctx.rank != 0) return;
  va_list args;
  va_start(args, fmt);
  std::vfprintf(stdout, fmt, args);
  va_end(args);
  std::fflush(stdout);
}

long peakRssKiB() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

long currentRssKiB() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

}  // namespace hbench
