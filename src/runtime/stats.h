#pragma once
// Counters of one communicator, updated by whoever runs its rounds and read by any thread.

#include <atomic>
#include <cstdint>

namespace hcoll::runtime {

struct CommStats {
  std::atomic<uint64_t> cycles{0};
  std::atomic<uint64_t> slowPath{0};
  std::atomic<uint64_t> cacheHits{0};
  std::atomic<uint64_t> backendCalls{0};
  std::atomic<uint64_t> fusedTensors{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> callerRounds{0};  // of cycles: run by a waiting caller (drive())
  // Allreduces whose data rode in their round's readiness exchange (the small-message fold).
  std::atomic<uint64_t> foldedOps{0};
};

}  // namespace hcoll::runtime
