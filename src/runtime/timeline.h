#pragma once
// HCOLL_TIMELINE: a Chrome-trace JSON file per rank (viewable in Perfetto or chrome://tracing).
// Each communicator is a process track ("pid"); inside it, thread 0 shows negotiation cycles and
// every tensor name gets its own row with its NEGOTIATE (submission to response) and EXECUTE
// (its backend call, with how many tensors were fused into it) phases.
// Disabled (the default), every hook is a null check.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "common/status.h"

namespace hcoll::runtime {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;

  // Opens the file for this rank: `path` with "%r" replaced by the rank, or `path` itself on a
  // single rank, or `path.<rank>` otherwise. Fails with INVALID_ARGUMENT if it cannot be opened
  // or `path` names a directory.
  static Status open(const std::string& path, int worldRank, int worldSize,
                     std::unique_ptr<Timeline>* out);
  ~Timeline();  // writes the closing bracket: the file is valid JSON once hcoll shut down

  // A new communicator track; returns its id.
  int registerCommunicator(const std::string& label);
  // A complete span on the communicator's cycle row (tid 0).
  void cycle(int comm, Clock::time_point start, Clock::time_point end, bool slowPath,
             size_t responses);
  // A complete span on the row of tensor `name`.
  void tensorSpan(int comm, const std::string& name, const char* phase, Clock::time_point start,
                  Clock::time_point end, const std::string& argsJson);

 private:
  Timeline(std::FILE* file, Clock::time_point origin) : file_(file), origin_(origin) {}
  int rowOf(int comm, const std::string& name);  // caller holds mutex_
  void writeEvent(const std::string& json);      // caller holds mutex_
  int64_t micros(Clock::time_point t) const;

  std::mutex mutex_;
  std::FILE* file_;
  Clock::time_point origin_;
  bool first_ = true;
  int nextComm_ = 0;
  std::unordered_map<std::string, int> rows_;  // "<comm>/<name>" -> tid
  std::unordered_map<int, int> nextRow_;
};

// Escapes a string for a JSON string literal.
std::string jsonEscape(const std::string& s);

}  // namespace hcoll::runtime
