#pragma once
// Scratch memory an MPI operation keeps across calls: the point-to-point reduce-scatter's
// receive slots (mpi_p2p.h) and the float32 copies of widened 16-bit reductions (mpi_widen.h).
// The last buffer is kept for the next operation: fresh memory costs a page fault per 4 KiB on
// first touch (~200 ms per 64 MiB on the test VM, ten times the float16 conversions themselves),
// MPICH's own reduce-scatter allocating a temporary per call took ~1 ms at 128 KiB there once
// freed pages went back to the host, and MPI may have registered the old buffer already. One
// pool per use per channel (operations on a channel run one at a time; a concurrent one just
// allocates). Buffers above kMaxPooledBytes are not kept.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

namespace hcoll::backends::mpi {

class ScratchPool {
 public:
  static constexpr size_t kMaxPooledBytes = size_t{1} << 30;
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
  std::mutex mutex_;
  Buffer spare_;
};

}  // namespace hcoll::backends::mpi
