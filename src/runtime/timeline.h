#pragma once
// HCOLL_TIMELINE: a Chrome-trace JSON file per rank (viewable in Perfetto or chrome://tracing).
// Each communicator is a process track ("pid"); inside it, thread 0 shows negotiation cycles and
// every tensor name gets its own row with its NEGOTIATE (submission to response) and EXECUTE
// (its backend call, with how many tensors were fused into it) phases.
// The runtime always has one Timeline; it writes only between start() (HCOLL_TIMELINE at
// initialize, or hcoll_start_timeline at run time) and stop(). Stopped (the default), every hook
// is one relaxed atomic load.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace hcoll::runtime {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;

  Timeline(int worldRank, int worldSize) : worldRank_(worldRank), worldSize_(worldSize) {}
  ~Timeline();  // stop(): the file is valid JSON once hcoll shut down

  // Starts writing to the file for this rank: `path` with "%r" replaced by the rank, or `path`
  // itself on a single rank, or `path.<rank>` otherwise. A file being written is closed first
  // (stop()). Fails with INVALID_ARGUMENT, writing nothing, if `path` is empty, names a
  // directory or cannot be opened.
  Status start(const std::string& path);
  // Writes the closing bracket and closes the file; nothing is recorded until the next start().
  void stop();
  // Whether a file is being written (the hooks' cheap check; racing a stop() only drops events).
  bool active() const { return active_.load(std::memory_order_relaxed); }

  // A new communicator track (recorded even while stopped); returns its id.
  int registerCommunicator(const std::string& label);
  // A complete span on the communicator's cycle row (tid 0).
  void cycle(int comm, Clock::time_point start, Clock::time_point end, bool slowPath,
             size_t responses);
  // A complete span on the row of tensor `name`.
  void tensorSpan(int comm, const std::string& name, const char* phase, Clock::time_point start,
                  Clock::time_point end, const std::string& argsJson);

 private:
  int rowOf(int comm, const std::string& name);  // caller holds mutex_
  void writeEvent(const std::string& json);      // caller holds mutex_; no-op when stopped
  void writeTrackNames(int comm);                // caller holds mutex_
  void closeFile();                              // caller holds mutex_
  int64_t micros(Clock::time_point t) const;

  const int worldRank_;
  const int worldSize_;
  std::mutex mutex_;
  std::atomic<bool> active_{false};
  std::FILE* file_ = nullptr;
  Clock::time_point origin_ = Clock::now();
  bool first_ = true;
  std::vector<std::string> labels_;  // of every registered communicator, by id
  int nextComm_ = 0;
  std::unordered_map<std::string, int> rows_;  // "<comm>/<name>" -> tid
  std::unordered_map<int, int> nextRow_;
};

// Escapes a string for a JSON string literal.
std::string jsonEscape(const std::string& s);

}  // namespace hcoll::runtime
