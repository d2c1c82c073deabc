#pragma once
// Scratch memory a backend keeps across operations: the MPI backend's point-to-point
// reduce-scatter receive slots (mpi_p2p.h) and float32 copies of widened 16-bit reductions
// (mpi_widen.h), the loopback backend's allreduce results (loopback_group.h). The last buffer is
// kept for the next operation: fresh memory costs a page fault per 4 KiB on first touch (~200 ms
// per 64 MiB on the test VM, ten times the float16 conversions themselves), MPICH's own
// reduce-scatter allocating a temporary per call took ~1 ms at 128 KiB there once freed pages
// went back to the host, and MPI may have registered the old buffer already. One pool per use
// (operations of one use run one at a time; a concurrent one just allocates). Buffers above the
// pool's limit are not kept.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

namespace hcoll {

class ScratchPool {
 public:
  // Buffers above maxPooledBytes are freed when given back.
  explicit ScratchPool(size_t maxPooledBytes = size_t{1} << 30) : maxPooledBytes_(maxPooledBytes) {}
  struct Buffer {
    std::unique_ptr<uint8_t[]> bytes;
    size_t capacity = 0;
  };
  // At least `bytes` bytes: the kept buffer if it is large enough, else a fresh one (the kept
  // one, too small, is dropped; the fresh one replaces it when given back).
  Buffer take(size_t bytes);
  // Keeps `buffer` if it is larger than the kept one.
  void give(Buffer buffer);

 private:
  const size_t maxPooledBytes_;
  std::mutex mutex_;
  Buffer spare_;
};

}  // namespace hcoll
