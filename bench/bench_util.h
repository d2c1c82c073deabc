#pragma once
// Shared pieces of hcoll-bench: options, timing, medians across ranks, the nccl-tests style
// table and a JSON collector. Every rank runs the same code; only rank 0 prints and writes.

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "hcoll/hcoll.h"

namespace hbench {

struct Options {
  bool quick = false;
  std::string jsonPath;
  std::set<std::string> only;  // empty = everything
  size_t maxSize = 0;          // the sweep's largest size in bytes (0 = its default)
  bool wants(const std::string& what) const { return only.empty() || only.count(what) > 0; }
};

// Parses argv; returns false (after printing usage on rank 0) on a bad argument.
bool parseOptions(int argc, char** argv, int rank, Options* out);

struct Context {
  Options options;
  hcoll_comm_t world = nullptr;
  int rank = 0;
  int size = 1;
  uint64_t wrong = 0;   // result mismatches seen anywhere (summed over ranks when reported)
  uint64_t errors = 0;  // hcoll calls that failed
};

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median of this rank's samples, then the largest such median over the ranks (the collective
// is only as fast as its slowest member).
double medianAcrossRanks(std::vector<double> samples);
double maxAcrossRanks(double v);
uint64_t sumAcrossRanks(uint64_t v);

// Fails loudly (counted in ctx.errors, printed on every rank) when an hcoll call fails.
bool check(Context& ctx, hcoll_status_t s, const char* what);
// Waits for and frees a request; false (and counted) on failure.
bool waitFree(Context& ctx, hcoll_request_t req, const char* what);

hcoll_tensor_t tensor(void* data, hcoll_dtype_t dtype, const int64_t* shape, int ndim);

// A flat JSON document: a list of records, each a map of numbers and strings.
class Json {
 public:
  struct Record {
    std::map<std::string, double> numbers;
    std::map<std::string, std::string> strings;
  };
  Record& add(const std::string& section, const std::string& name);
  bool write(const std::string& path, const Context& ctx) const;

 private:
  std::vector<Record> records_;
};

Json& json();

// Times `body` `reps` times (after one warm-up call and a barrier) and returns the median over
// this rank's samples, maximized over ranks.
double medianTime(int reps, const std::function<void()>& body, bool barrierEach = true);

// Seconds per call of each body, measured interleaved: up to 5 rounds, each timing a block of
// calls of every body in turn (order rotating by round), median block per body; about 0.2 s
// per body in all (--quick: a few calls). On a shared 2-core machine a burst of noise then lands
// on one block of every body alike, or is voted out by the median, instead of inflating
// whichever body happened to be timed while it lasted. Block sizes and round counts are agreed
// on by all ranks; each entry is the slowest rank's.
std::vector<double> timeInterleaved(const Options& o,
                                    const std::vector<std::function<void()>>& bodies);

// A performance target, evaluated and printed in the final summary (never an exit status).
void addTarget(const std::string& name, double measured, double limit, bool atMost,
               const std::string& detail);
void printTargets(const Context& ctx);

// rank 0 only printf.
void say(const Context& ctx, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// Memory of this process: peak (ru_maxrss) and current (from /proc/self/statm), in KiB.
long peakRssKiB();
long currentRssKiB();

}  // namespace hbench
