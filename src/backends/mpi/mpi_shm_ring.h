#pragma once
// One ring of a shared-memory lane (mpi_shm.h), over any memory: kChunks chunks of kChunkBytes
// behind two counters, each on a cache line of its own (the writer's stores must not evict the
// reader's) and each written by one side only: `published` by the writer, `consumed` by the
// reader. Both only grow, across transfers and operations: the ring is a FIFO byte stream. Kept
// apart from ShmLanes (which needs an MPI communicator to set up) so that the protocol is
// unit-tested with two threads (tests/unit/test_shm_ring.cc).
//
// Beside its counter, each side's line holds what the other needs for the choice of stores
// (mpi_shm_store_choice.h): the writer's says how each chunk slot was stored, the reader's which
// stores the writer should use and what the reader measured.

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backends/mpi/mpi_shm_store_choice.h"
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

  // How the writer stores chunks: as its reader finds fastest, or (tests) always one way.
  enum class Stores { kAdaptive, kCached, kStreaming };

  explicit ShmRing(void* at, Stores stores = Stores::kAdaptive)
      : writerLine_(static_cast<WriterLine*>(at)),
        readerLine_(reinterpret_cast<ReaderLine*>(static_cast<char*>(at) + kLine)),
        chunks_(static_cast<char*>(at) + kHeaderBytes),
        stores_(stores) {}

  // Writer: copies up to `bytes` of `data` in whole chunks while there is room; returns how many
  // bytes it copied (0: the ring is full, the reader has not caught up).
  size_t push(const char* data, size_t bytes) {
    uint64_t published = writerLine_->published;  // only this side writes it
    const uint64_t consumed = __atomic_load_n(&readerLine_->consumed, __ATOMIC_ACQUIRE);
    size_t done = 0;
    while (done < bytes && published - consumed < kChunks) {
      const size_t n = std::min(kChunkBytes, bytes - done);
      const size_t slot = published % kChunks;
      const bool timed = stores_ == Stores::kAdaptive && n >= StoreChoice::kLearnFrom;
      const ChunkStores how = storesForNextChunk(timed);
      char* chunk = chunks_ + slot * kChunkBytes;
      const uint64_t start = timed ? copyTicks() : 0;
      if (how == ChunkStores::kStreaming) {
        streamBytes(chunk, data + done, n);  // fenced: seen before `published` below
      } else {
        copyBytes(chunk, data + done, n);
      }
      const uint64_t ticks = timed ? copyTicksSince(start) : 0;
      __atomic_store_n(&writerLine_->chunk[slot], ticks << 1 | static_cast<uint64_t>(how),
                       __ATOMIC_RELAXED);
      done += n;
      __atomic_store_n(&writerLine_->published, ++published, __ATOMIC_RELEASE);
    }
    return done;
  }

  // Reader: copies up to `bytes` into `data`, chunk by chunk as they arrive; returns how many. A
  // transfer's chunks are cut alike on both sides (kChunkBytes from its start), so a pull of the
  // rest of a transfer never takes a chunk of the next one.
  size_t pull(char* data, size_t bytes) {
    uint64_t consumed = readerLine_->consumed;  // only this side writes it
    const uint64_t published = __atomic_load_n(&writerLine_->published, __ATOMIC_ACQUIRE);
    size_t done = 0;
    while (done < bytes && consumed < published) {
      const size_t n = std::min(kChunkBytes, bytes - done);
      const size_t slot = consumed % kChunks;
      const char* chunk = chunks_ + slot * kChunkBytes;
      if (stores_ == Stores::kAdaptive && n >= StoreChoice::kLearnFrom) {
        const uint64_t start = copyTicks();
        copyBytes(data + done, chunk, n);
        const uint64_t readTicks = copyTicksSince(start);
        const uint64_t written = __atomic_load_n(&writerLine_->chunk[slot], __ATOMIC_RELAXED);
        const uint64_t wanted = readerLine_->choice.observe(static_cast<ChunkStores>(written & 1),
                                                            n, (written >> 1) + readTicks);
        __atomic_store_n(&readerLine_->storesWanted, wanted, __ATOMIC_RELAXED);
      } else {
        copyBytes(data + done, chunk, n);
      }
      done += n;
      __atomic_store_n(&readerLine_->consumed, ++consumed, __ATOMIC_RELEASE);
    }
    return done;
  }

  // How the chunk last written into `slot` was stored (tests, diagnostics).
  ChunkStores lastStores(size_t slot) const {
    return static_cast<ChunkStores>(
        __atomic_load_n(&writerLine_->chunk[slot % kChunks], __ATOMIC_RELAXED) & 1);
  }

 private:
  // The ring's first line: written by the writer only.
  struct WriterLine {
    uint64_t published;       // chunks the writer has filled
    // Per chunk slot, its last chunk's ChunkStores (bit 0) and the writer's ticks to copy it in
    // (the rest; 0 when not timed).
    uint64_t chunk[kChunks];
    uint64_t explorationsMade;  // single chunks of the other kind stored when the reader asked
  };
  // The second: written by the reader only.
  struct ReaderLine {
    uint64_t consumed;      // chunks the reader has emptied
    uint64_t storesWanted;  // StoreChoice::observe's word: how the writer should store chunks
    StoreChoice choice;     // the reader's own measurements (the writer never reads them)
  };
  static_assert(sizeof(WriterLine) <= kLine && sizeof(ReaderLine) <= kLine,
                "each side's words fit its own cache line");

  ChunkStores storesForNextChunk(bool timed) {
    switch (stores_) {
      case Stores::kCached:
        return ChunkStores::kCached;
      case Stores::kStreaming:
        return ChunkStores::kStreaming;
      case Stores::kAdaptive:
        break;
    }
    return storesFor(__atomic_load_n(&readerLine_->storesWanted, __ATOMIC_RELAXED), timed,
                     &writerLine_->explorationsMade);
  }

  WriterLine* writerLine_;
  ReaderLine* readerLine_;
  char* chunks_;
  Stores stores_;
};

}  // namespace hcoll::backends::mpi
