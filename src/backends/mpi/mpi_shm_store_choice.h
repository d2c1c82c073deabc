#pragma once
// How a shared-memory lane's writer stores a chunk (mpi_shm_ring.h), chosen by its reader from
// what the chunks of each kind cost the two sides.
//
// Ordinary stores leave a chunk dirty in the writer's cache, and the reader's copy then pulls
// every line from there: cheap while the two cores share a cache, slow when they sit apart.
// Streaming (non-temporal) stores send the chunk to memory, which costs the writer more and
// which the reader then reads at memory's speed wherever it runs. On the test VM, whose two
// vCPUs are close in some runs and apart in others (a cache line's one-way trip 0.03-0.07 us or
// 0.22-0.27 us; it changes from process to process), a 2 MiB alltoall took 104-200 us with
// ordinary stores and 187-253 with streaming ones while close, 285-441 and 162-250 while apart.
// No fixed choice is right for both, and the state cannot be known in advance: each side times
// its copy of every large chunk (the writer passes its time along with the chunk), the reader
// keeps the sum per kind and tells the writer which kind is cheaper, asking for one chunk of the
// other kind now and then. The reader's time alone does not tell them apart while the cores are
// close: there the streaming writer's extra time is what makes streaming slower.
//
// The state lives in the ring's shared header, in the line only the reader writes, so it is
// zeroed with the ring and costs the writer no extra cache line. Any mix of kinds is correct
// (the writer fences streaming stores before publishing): the choice only moves time.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace hcoll::backends::mpi {

enum class ChunkStores : uint64_t { kCached = 0, kStreaming = 1 };

// A tick count for timing one core's copy against another of its copies: the TSC on x86 (~12 ns
// to read on the test VM, a precise clock ~31), else nanoseconds. Only compared with itself.
inline uint64_t copyTicks() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_lfence();  // the TSC is read after the copy's instructions, not while they still run
  return __rdtsc();
#else
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
#endif
}

// The most copyTicksSince reports: a thread moved between cores whose counters differ may see
// time go back (a huge unsigned difference), and the writer's and reader's times are added.
inline constexpr uint64_t kMaxCopyTicks = uint64_t{1} << 40;

// Ticks since `start` (a copyTicks() value), at most kMaxCopyTicks.
inline uint64_t copyTicksSince(uint64_t start) {
  const uint64_t now = copyTicks();
  return now >= start ? std::min<uint64_t>(now - start, kMaxCopyTicks) : kMaxCopyTicks;
}

struct StoreChoice {
  // Chunks at least this large are timed: a copy of 64 KiB takes 3 us or more, against 4 reads
  // of the tick counter; smaller ones are stored as the larger ones taught.
  static constexpr size_t kLearnFrom = size_t{64} << 10;
  // One timed chunk in this many goes the other way, to notice when the cores moved.
  static constexpr uint64_t kExploreEvery = 32;
  // And one more try early on: the first chunks' copies also page the ring in, which inflates
  // the first sample of each kind (the one of the kind not chosen would stand for 32 chunks).
  static constexpr uint64_t kRetryAt = 8;

  uint64_t learned;       // chunks timed so far
  uint64_t explorations;  // tries of the other kind asked for so far
  double cost[2];         // writer's + reader's ticks per KiB, by ChunkStores; 0: not measured yet

  // Which kind is cheaper by what was measured (cached until both were).
  ChunkStores preferred() const {
    if (cost[0] == 0 || cost[1] == 0) return ChunkStores::kCached;
    return cost[1] < cost[0] ? ChunkStores::kStreaming : ChunkStores::kCached;
  }

  // Records that a chunk of `bytes` stored `used`-wise took `ticks` to copy in and out (both
  // sides' copies). Returns the word the reader hands the writer (its `storesWanted`): the
  // preferred kind in bit 0 and, above it, how many single chunks of the other kind it asked
  // for so far (the writer stores one that way whenever the count moves).
  uint64_t observe(ChunkStores used, size_t bytes, uint64_t ticks) {
    const double perKiB = static_cast<double>(std::max<uint64_t>(ticks, 1)) * 1024.0 /
                          static_cast<double>(std::max<size_t>(bytes, 1));
    double& c = cost[static_cast<size_t>(used)];
    if (c == 0 || used != preferred()) {
      c = perKiB;  // first, or a try of the other kind: what it was before is stale
    } else {
      // The kind in use: a moving average, one sample (a preempted copy) moving it at most 1.25x.
      c += 0.25 * (std::min(perKiB, 2 * c) - c);
    }
    ++learned;
    if (cost[0] == 0 || cost[1] == 0 || learned == kRetryAt || learned % kExploreEvery == 0) {
      ++explorations;
    }
    return explorations << 1 | static_cast<uint64_t>(preferred());
  }
};

// The writer's side of that word: how to store the next chunk, given the word and the count of
// tries of the other kind it made so far (which it updates). A try is made only on a chunk the
// reader will time (`timed`): one it does not would teach it nothing, and a pattern of small
// chunks could swallow every try.
inline ChunkStores storesFor(uint64_t wanted, bool timed, uint64_t* explorationsMade) {
  const auto preferred = static_cast<ChunkStores>(wanted & 1);
  if (!timed || (wanted >> 1) == *explorationsMade) return preferred;
  *explorationsMade = wanted >> 1;
  return preferred == ChunkStores::kCached ? ChunkStores::kStreaming : ChunkStores::kCached;
}

}  // namespace hcoll::backends::mpi
