#pragma once
// The coordinator (rank 0 of a communicator) collects every rank's announced operations, decides
// which are ready (announced by all ranks, or by all that have not joined for an allreduce or a
// barrier), validates that the ranks agree, and produces the responses every rank executes.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/message.h"

namespace hcoll::runtime {

class Coordinator {
 public:
  using Clock = std::chrono::steady_clock;

  // `maxVectorCount`: the backend's limit on one rank's part of a v-collective
  // (backends::Channel::maxVectorCount), checked on the assembled outputs.
  explicit Coordinator(int size, size_t maxVectorCount = SIZE_MAX,
                       std::string maxVectorCountReason = "the backend's limit")
      : size_(size),
        maxVectorCount_(maxVectorCount),
        maxVectorCountReason_(std::move(maxVectorCountReason)),
        joined_(static_cast<size_t>(size), false),
        joinedAt_(joined_.size()) {}

  // Records what `rank` announced this round.
  void add(int rank, RequestList list, Clock::time_point now);
  // Drops what is known about `name` (it was scheduled from the response cache).
  void forget(const std::string& name) { table_.erase(name); }
  // Responses for every operation that became ready or invalid, in first-announced order.
  std::vector<Response> takeReady();

  struct Stalled {
    std::string name;
    OpKind kind;
    std::vector<int> submitted;
    std::vector<int> missing;
    double waitedSeconds;
  };
  // Operations some ranks announced more than `seconds` ago that are still not ready.
  std::vector<Stalled> stalled(double seconds, Clock::time_point now) const;
  // Takes operations out of the table, failing them with `code` and the given message.
  Response fail(const std::string& name, Code code, const std::string& message);
  bool empty() const { return table_.empty(); }

 private:
  struct Entry {
    uint64_t order = 0;
    Clock::time_point firstSeen;
    std::vector<std::optional<OpSpec>> specs;
    int count = 0;
  };
  Response validate(const std::string& name, const Entry& entry) const;
  Response makeResponse(const Entry& entry) const;

  int size_;
  size_t maxVectorCount_;
  std::string maxVectorCountReason_;
  uint64_t nextOrder_ = 0;
  std::unordered_map<std::string, Entry> table_;
  std::vector<bool> joined_;
  // When each joined rank joined, in this coordinator's clock (arrival minus the join's age).
  std::vector<Clock::time_point> joinedAt_;
  int lastJoined() const;
};

}  // namespace hcoll::runtime
