#pragma once
// Counters of one communicator, updated by whoever runs its rounds and read by any thread.

#include <atomic>
#include <cstdint>

namespace hcoll::runtime {

// Written only by whoever holds the communicator's seat (one thread at a time, ordered by the
// seat's mutex), read by any thread: adding is a load and a store, not a locked read-modify-write
// (about 5 ns each on the test VM, four of them per small operation).
class SeatCounter {
 public:
  void add(uint64_t n) {
    value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  uint64_t load() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

struct CommStats {
  SeatCounter cycles;
  SeatCounter slowPath;
  SeatCounter cacheHits;
  SeatCounter backendCalls;
  SeatCounter fusedTensors;
  SeatCounter bytes;
  SeatCounter callerRounds;  // of cycles: run by a waiting caller (drive())
  // Operations whose data rode in their round's readiness exchange (the small-message fold).
  SeatCounter foldedOps;
};

}  // namespace hcoll::runtime
