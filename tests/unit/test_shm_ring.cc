// The shared-memory lanes' ring (mpi_shm_ring.h) without MPI: a writer and a reader thread over
// one ring in ordinary memory. Transfers of every size around the chunk boundaries, back to back,
// so that the byte stream carries over from one transfer to the next exactly as the schedules
// rely on (both sides cut every transfer alike), with the writer's stores chosen by the reader,
// all ordinary or all streaming; a full ring refusing more; a transfer abandoned half-way, of
// which the reader gets exactly what was pushed and nothing else. And the reader's choice of
// stores (mpi_shm_store_choice.h) on made-up copy costs, and through a ring.

#include <catch2/catch.hpp>

#include <cstdint>
#include <thread>
#include <vector>

#include "backends/mpi/mpi_shm_ring.h"
#include "backends/mpi/mpi_shm_store_choice.h"

namespace {

using hcoll::backends::mpi::ChunkStores;
using hcoll::backends::mpi::ShmRing;
using hcoll::backends::mpi::StoreChoice;
using hcoll::backends::mpi::storesFor;
constexpr size_t kChunk = ShmRing::kChunkBytes;

// Zeroed memory for one ring, aligned for its counters.
struct RingMemory {
  std::vector<uint64_t> words = std::vector<uint64_t>(ShmRing::kBytes / sizeof(uint64_t) + 1, 0);
  ShmRing ring(ShmRing::Stores stores = ShmRing::Stores::kAdaptive) {
    return ShmRing(words.data(), stores);
  }
};

// Transfer t's byte i: differs between neighbouring transfers and within a chunk.
char pattern(size_t t, size_t i) {
  return static_cast<char>((t * 131 + i * 7 + i / kChunk) & 0xff);
}

std::vector<size_t> boundarySizes() {
  std::vector<size_t> sizes = {1, 2, 4095};
  for (size_t k = 1; k <= ShmRing::kChunks + 2; ++k) {
    for (size_t s : {k * kChunk - 1, k * kChunk, k * kChunk + 1}) sizes.push_back(s);
  }
  sizes.push_back(3 * kChunk / 2);
  sizes.push_back(17 * kChunk + 12345);  // several laps of the ring
  return sizes;
}

}  // namespace

TEST_CASE("shm ring: transfers of every size around the chunk boundaries, back to back",
          "[shm_ring]") {
  // The writer's stores as the reader asks (which always includes a streamed chunk early on: the
  // reader has to time one), or all ordinary, or all streaming.
  const ShmRing::Stores stores = GENERATE(ShmRing::Stores::kAdaptive, ShmRing::Stores::kCached,
                                          ShmRing::Stores::kStreaming);
  INFO("stores " << static_cast<int>(stores));
  RingMemory memory;
  const std::vector<size_t> sizes = boundarySizes();
  std::thread writer([&] {
    ShmRing ring = memory.ring(stores);
    for (size_t t = 0; t < sizes.size(); ++t) {
      std::vector<char> data(sizes[t]);
      for (size_t i = 0; i < data.size(); ++i) data[i] = pattern(t, i);
      for (size_t done = 0; done < data.size();) {
        const size_t n = ring.push(data.data() + done, data.size() - done);
        if (n == 0) std::this_thread::yield();
        done += n;
      }
    }
  });
  ShmRing ring = memory.ring(stores);
  size_t wrongTransfer = SIZE_MAX, wrongByte = 0;
  for (size_t t = 0; t < sizes.size(); ++t) {
    std::vector<char> got(sizes[t]);
    for (size_t done = 0; done < got.size();) {
      const size_t n = ring.pull(got.data() + done, got.size() - done);
      if (n == 0) std::this_thread::yield();
      done += n;
    }
    for (size_t i = 0; i < got.size() && wrongTransfer == SIZE_MAX; ++i) {
      if (got[i] != pattern(t, i)) wrongTransfer = t, wrongByte = i;
    }
  }
  writer.join();
  INFO("transfer " << wrongTransfer << " byte " << wrongByte);
  CHECK(wrongTransfer == SIZE_MAX);
  // Everything pushed was pulled: nothing is left for a next transfer to pick up.
  char extra;
  CHECK(ring.pull(&extra, 1) == 0);
}

TEST_CASE("shm ring: a full ring takes nothing until the reader frees a chunk", "[shm_ring]") {
  RingMemory memory;
  ShmRing ring = memory.ring();
  std::vector<char> data((ShmRing::kChunks + 1) * kChunk, 'x');
  CHECK(ring.push(data.data(), data.size()) == ShmRing::kChunks * kChunk);
  CHECK(ring.push(data.data(), 1) == 0);
  std::vector<char> got(kChunk);
  CHECK(ring.pull(got.data(), got.size()) == kChunk);
  CHECK(ring.push(data.data(), 10) == 10);  // one chunk, holding 10 bytes
  CHECK(ring.push(data.data(), 1) == 0);
}

TEST_CASE("shm ring: a transfer abandoned half-way gives the reader exactly what was pushed",
          "[shm_ring]") {
  // The writer gives up on a 6.5-chunk transfer once the ring is full (its peer stopped
  // reading): it pushed kChunks whole chunks, cut from the transfer's start as the reader cuts
  // them. The reader, asking for the whole transfer, gets exactly those and nothing beyond.
  RingMemory memory;
  const size_t size = 6 * kChunk + kChunk / 2;
  std::vector<char> data(size);
  for (size_t i = 0; i < size; ++i) data[i] = pattern(1, i);
  size_t pushed = 0;
  std::thread writer([&] { pushed = memory.ring().push(data.data(), size); });
  writer.join();
  REQUIRE(pushed == ShmRing::kChunks * kChunk);
  ShmRing ring = memory.ring();
  std::vector<char> got(size, 0);
  size_t done = 0;
  for (int tries = 0; tries < 3; ++tries) done += ring.pull(got.data() + done, size - done);
  CHECK(done == pushed);
  bool same = true;
  for (size_t i = 0; i < pushed; ++i) same = same && got[i] == data[i];
  CHECK(same);
  bool untouched = true;
  for (size_t i = pushed; i < size; ++i) untouched = untouched && got[i] == 0;
  CHECK(untouched);  // nothing beyond what was published was read
}

namespace {

// The reader's word after one timed chunk, and the writer's reading of it.
struct ChoiceLoop {
  StoreChoice choice{};
  uint64_t explorationsMade = 0;
  uint64_t wanted = 0;  // the zeroed ring's word: ordinary stores
  // The writer stores the next chunk as the word says; the chunk costs `cost(kind)` per KiB.
  template <typename Cost>
  ChunkStores step(Cost cost) {
    const ChunkStores kind = storesFor(wanted, /*timed=*/true, &explorationsMade);
    const size_t bytes = StoreChoice::kLearnFrom;
    wanted = choice.observe(kind, bytes, static_cast<uint64_t>(cost(kind) * bytes / 1024));
    return kind;
  }
};

}  // namespace

TEST_CASE("store choice: streams while that is cheaper, and comes back when it no longer is",
          "[shm_ring]") {
  ChoiceLoop loop;
  double cachedCost = 300, streamingCost = 100;  // the cores apart: pulling dirty lines is slow
  auto cost = [&](ChunkStores k) { return k == ChunkStores::kCached ? cachedCost : streamingCost; };
  // Ordinary stores first; the second chunk tries streaming (nothing measured for it yet).
  CHECK(loop.step(cost) == ChunkStores::kCached);
  CHECK(loop.step(cost) == ChunkStores::kStreaming);
  // From then on streaming, but for one chunk of the other kind every kExploreEvery, and one
  // early retry (the first samples were taken while the ring was paged in).
  size_t cached = 0, streamed = 0;
  for (int i = 0; i < 10 * static_cast<int>(StoreChoice::kExploreEvery); ++i) {
    (loop.step(cost) == ChunkStores::kCached ? cached : streamed) += 1;
  }
  CHECK(cached == 11);
  CHECK(streamed == 10 * StoreChoice::kExploreEvery - 11);
  CHECK(loop.choice.preferred() == ChunkStores::kStreaming);

  // The cores moved together: ordinary stores are cheap again. The next try of them says so.
  cachedCost = 50;
  size_t streamedAfter = 0;
  for (int i = 0; i < 2 * static_cast<int>(StoreChoice::kExploreEvery); ++i) {
    streamedAfter += loop.step(cost) == ChunkStores::kStreaming;
  }
  CHECK(loop.choice.preferred() == ChunkStores::kCached);
  CHECK(streamedAfter <= StoreChoice::kExploreEvery + 2);
}

TEST_CASE("store choice: one slow copy does not flip it", "[shm_ring]") {
  ChoiceLoop loop;
  bool preempted = false, apart = false;
  auto cost = [&](ChunkStores k) {
    // Close cores: ordinary stores are cheaper; apart: pulling dirty lines costs 3x.
    const double c = k == ChunkStores::kCached ? (apart ? 300 : 100) : 130;
    return preempted ? 50 * c : c;
  };
  // Past the early retry (StoreChoice::kRetryAt), far from the next try.
  for (int i = 0; i < 10; ++i) loop.step(cost);
  REQUIRE(loop.choice.learned > StoreChoice::kRetryAt);
  REQUIRE(loop.choice.preferred() == ChunkStores::kCached);
  preempted = true;  // a copy interrupted for a time slice: 50x its cost
  CHECK(loop.step(cost) == ChunkStores::kCached);
  preempted = false;
  // Its sample counts at most twice the average, which moves by a quarter of that: 1.25x.
  CHECK(loop.choice.preferred() == ChunkStores::kCached);
  // A lasting change does move it, within a few chunks.
  apart = true;
  for (int i = 0; i < 4; ++i) loop.step(cost);
  CHECK(loop.choice.preferred() == ChunkStores::kStreaming);
}

TEST_CASE("store choice: a try of the other kind is spent only on a chunk that is timed",
          "[shm_ring]") {
  const uint64_t wantCachedTryOnce = uint64_t{1} << 1 | static_cast<uint64_t>(ChunkStores::kCached);
  uint64_t made = 0;
  // A small chunk (not timed) keeps the preferred kind and leaves the try for a timed one.
  CHECK(storesFor(wantCachedTryOnce, /*timed=*/false, &made) == ChunkStores::kCached);
  CHECK(made == 0);
  CHECK(storesFor(wantCachedTryOnce, /*timed=*/true, &made) == ChunkStores::kStreaming);
  CHECK(made == 1);
  // Once only.
  CHECK(storesFor(wantCachedTryOnce, /*timed=*/true, &made) == ChunkStores::kCached);
}

TEST_CASE("shm ring: the reader's first timed chunk makes the writer stream one", "[shm_ring]") {
  RingMemory memory;
  ShmRing ring = memory.ring();
  std::vector<char> data(kChunk, 'd'), got(kChunk);
  REQUIRE(ring.push(data.data(), kChunk) == kChunk);  // slot 0: nothing measured, ordinary
  CHECK(ring.lastStores(0) == ChunkStores::kCached);
  REQUIRE(ring.pull(got.data(), kChunk) == kChunk);  // timed: the reader asks for a try
  REQUIRE(ring.push(data.data(), 10) == 10);          // slot 1: too small to time, ordinary
  CHECK(ring.lastStores(1) == ChunkStores::kCached);
  REQUIRE(ring.push(data.data(), kChunk) == kChunk);  // slot 2: the try
  CHECK(ring.lastStores(2) == ChunkStores::kStreaming);
  REQUIRE(ring.pull(got.data(), 10) == 10);
  REQUIRE(ring.pull(got.data(), kChunk) == kChunk);
  CHECK(got == data);
}

TEST_CASE("store choice: copy times are bounded", "[shm_ring]") {
  using hcoll::backends::mpi::copyTicks;
  using hcoll::backends::mpi::copyTicksSince;
  using hcoll::backends::mpi::kMaxCopyTicks;
  // A start in the future (a thread moved to a core whose counter is behind) counts as the most.
  CHECK(copyTicksSince(copyTicks() + (uint64_t{1} << 50)) == kMaxCopyTicks);
  CHECK(copyTicksSince(copyTicks()) < kMaxCopyTicks);
}
