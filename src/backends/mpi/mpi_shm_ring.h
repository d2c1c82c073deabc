#pragma once
// One ring of a shared-memory lane (mpi_shm.h), over any memory: kChunks chunks of kChunkBytes
// behind two counters, each on a cache line of its own (the writer's stores must not evict the
// reader's) and each written by one side only: `published` by the writer, `consumed` by the
// reader. Both only grow, across transfers and operations: the ring is a FIFO byte stream. Kept
// apart from ShmLanes (which needs an MPI communicator to set up) so that the protocol is
// unit-tested with two threads (tests/unit/test_shm_ring.cc).

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "common/copy_bytes.h"

namespace hcoll::backends::mpi {

class ShmRing {
 public:
  static constexpr size_t kChunkBytes = size_t{128} << 10;
  static constexpr size_t kChunks = 4;
  static constexpr size_t kLine = 64;
  static constexpr size_t kHeaderBytes = 2 * kLine;
  // What one ring occupies, header included; `at` must be aligned to kLine and zeroed once.
  static constexpr size_t kBytes = kHeaderBytes + kChunks * kChunkBytes;

  explicit ShmRing(void* at)
      : published_(static_cast<uint64_t*>(at)),
        consumed_(reinterpret_cast<uint64_t*>(static_cast<char*>(at) + kLine)),
        chunks_(static_cast<char*>(at) + kHeaderBytes) {}

  // Writer: copies up to `bytes` of `data` in whole chunks while there is room; returns how many
  // bytes it copied (0: the ring is full, the reader has not caught up).
  size_t push(const char* data, size_t bytes) {
    uint64_t published = *published_;  // only this side writes it
    const uint64_t consumed = __atomic_load_n(consumed_, __ATOMIC_ACQUIRE);
    size_t done = 0;
    while (done < bytes && published - consumed < kChunks) {
      const size_t n = std::min(kChunkBytes, bytes - done);
      copyBytes(chunks_ + (published % kChunks) * kChunkBytes, data + done, n);
      done += n;
      __atomic_store_n(published_, ++published, __ATOMIC_RELEASE);
    }
    return done;
  }

  // Reader: copies up to `bytes` into `data`, chunk by chunk as they arrive; returns how many. A
  // transfer's chunks are cut alike on both sides (kChunkBytes from its start), so a pull of the
  // rest of a transfer never takes a chunk of the next one.
  size_t pull(char* data, size_t bytes) {
    uint64_t consumed = *consumed_;  // only this side writes it
    const uint64_t published = __atomic_load_n(published_, __ATOMIC_ACQUIRE);
    size_t done = 0;
    while (done < bytes && consumed < published) {
      const size_t n = std::min(kChunkBytes, bytes - done);
      copyBytes(data + done, chunks_ + (consumed % kChunks) * kChunkBytes, n);
      done += n;
      __atomic_store_n(consumed_, ++consumed, __ATOMIC_RELEASE);
    }
    return done;
  }

 private:
  uint64_t* published_;  // chunks the writer has filled
  uint64_t* consumed_;   // chunks the reader has emptied
  char* chunks_;
};

}  // namespace hcoll::backends::mpi
