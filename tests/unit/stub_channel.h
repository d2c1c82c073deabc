#pragma once
// A Channel for unit tests of code that uses only part of one: every operation finishes at once
// with the status given at construction (an error for calls a test expects never to happen, or
// success for a one-rank channel whose data plane is a no-op). Fakes derive from it and override
// what they exercise.

#include <memory>
#include <utility>
#include <vector>

#include "backends/backend.h"

namespace htest {

class StubChannel : public hcoll::backends::Channel {
 public:
  using PendingPtr = hcoll::backends::PendingPtr;

  StubChannel(int rank, int size, hcoll::Status result)
      : rank_(rank), size_(size), result_(std::move(result)) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int localRank() const override { return rank_; }
  int localSize() const override { return size_; }
  PendingPtr allreduceBitsAnd(uint64_t*, size_t) override { return stub(); }
  PendingPtr gatherBytes(std::vector<uint8_t>, std::vector<std::vector<uint8_t>>*) override {
    return stub();
  }
  PendingPtr broadcastBytes(std::vector<uint8_t>*) override { return stub(); }
  hcoll::Status split(int, int, std::unique_ptr<Channel>*) override { return result_; }
  hcoll::Status create(const std::vector<int32_t>&, std::unique_ptr<Channel>*) override {
    return result_;
  }
  PendingPtr allreduce(const void*, void*, size_t, hcoll::DataType, hcoll::ReduceOp) override {
    return stub();
  }
  PendingPtr allgatherv(const void*, size_t, void*, const std::vector<size_t>&) override {
    return stub();
  }
  PendingPtr broadcast(void*, size_t, int) override { return stub(); }
  PendingPtr alltoallv(const void*, const std::vector<size_t>&, void*,
                       const std::vector<size_t>&) override {
    return stub();
  }
  PendingPtr reduceScatter(const void*, void*, const std::vector<size_t>&, hcoll::DataType,
                           hcoll::ReduceOp) override {
    return stub();
  }
  PendingPtr barrier() override { return stub(); }

 protected:
  PendingPtr stub() const { return hcoll::backends::finished(result_); }

 private:
  int rank_;
  int size_;
  hcoll::Status result_;
};

// For calls a test never expects: they fail with INTERNAL "unused".
inline hcoll::Status unusedCall() {
  return hcoll::Status(hcoll::Code::kInternal, "unused");
}

}  // namespace htest
