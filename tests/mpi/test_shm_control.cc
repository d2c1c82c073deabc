// The MPI backend's small-message control block (mpi_shm_control.h), driven directly over
// MPI_COMM_WORLD on 2-4 ranks of one node: more operations in flight than it has slots, polled
// in reverse order (a later operation waits for its slot to be acked), every collective it
// carries with results computed directly, in place and out of place, a rank that starts late by
// milliseconds, sizes above its limit left to MPI on every rank alike, and the agreement at
// creation when HCOLL_MPI_SHM_SMALL=0 on some ranks (the job runs with it on one rank only too),
// the ack watermark a published word carries, and a long stream whose slots are reused on it.
#define CATCH_CONFIG_RUNNER
#include <algorithm>
#include <catch2/catch.hpp>

#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "backends/mpi/mpi_local_reduce.h"
#include "backends/backend.h"
#include "backends/mpi/mpi_shm_control.h"

namespace {

using hcoll::DataType;
using hcoll::ReduceOp;
using hcoll::Status;
using hcoll::backends::PendingPtr;
using hcoll::backends::mpi::reductionFor;
using hcoll::backends::mpi::ShmControl;

int gRank = 0, gSize = 1;

bool offHere() {
  const char* v = std::getenv("HCOLL_MPI_SHM_SMALL");
  return v != nullptr && std::strcmp(v, "0") == 0;
}

std::shared_ptr<ShmControl> makeBlock() {
  static uint64_t id = 0x5eed;
  return ShmControl::make(MPI_COMM_WORLD, gRank, gSize, gSize, ++id);
}

// Polls every operation, last first, until all finished; each status must be ok. A bound keeps
// a protocol error from hanging the test (the CTest timeout is the second line).
void pollAll(std::vector<PendingPtr>& ops) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::vector<bool> done(ops.size(), false);
  size_t left = ops.size();
  while (left > 0) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    for (size_t i = ops.size(); i-- > 0;) {
      if (done[i]) continue;
      Status s;
      if (ops[i]->poll(&s)) {
        REQUIRE(s.isOk());
        done[i] = true;
        --left;
      }
    }
  }
}

// One readiness AND through the block, polled to its end (`fold` null: this rank folds nothing).
void andBitsOnce(ShmControl& block, std::vector<uint64_t>& words,
                 const hcoll::backends::Channel::FoldedCollective* fold) {
  std::vector<PendingPtr> ops;
  ops.push_back(block.andBits(words.data(), words.size(), fold));
  REQUIRE(ops.back() != nullptr);
  pollAll(ops);
}

int allOf(int v, MPI_Op op) {
  int out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_INT, op, MPI_COMM_WORLD);
  return out;
}

TEST_CASE("a published word carries the publisher's ack watermark when it fits") {
  namespace d = hcoll::backends::mpi::shm_control_detail;
  // The operation's number reads back from the low bits whatever the lag.
  CHECK((d::publishedWord(7, 6) & d::kSeqMask) == 7);
  CHECK(d::carriedWatermark(d::publishedWord(7, 6)) == 6);
  CHECK(d::carriedWatermark(d::publishedWord(7, 0)) == 0);  // nothing acked yet
  CHECK(d::carriedWatermark(d::publishedWord(100000, 100000 - d::kMaxLag)) ==
        100000 - d::kMaxLag);
  // A lag past the field says nothing (0), which only costs the reader a look at the line.
  const uint64_t far = d::publishedWord(100000, 100000 - d::kMaxLag - 1);
  CHECK((far & d::kSeqMask) == 100000);
  CHECK(d::carriedWatermark(far) == 0);
  // Zeroed memory (no operation yet) carries nothing.
  CHECK(d::carriedWatermark(0) == 0);
}

TEST_CASE("ranks agree at creation whether they have the block") {
  auto block = makeBlock();
  const bool anyOff = allOf(offHere() ? 1 : 0, MPI_MAX) != 0;
  CHECK(allOf(block ? 1 : 0, MPI_MIN) == allOf(block ? 1 : 0, MPI_MAX));
  CHECK((block != nullptr) == !anyOff);
}

TEST_CASE("more operations in flight than slots, polled out of order") {
  auto block = makeBlock();
  if (!block) {
    SUCCEED("HCOLL_MPI_SHM_SMALL=0 on some rank: no block (checked above)");
    return;
  }
  const int n = gSize, me = gRank;
  const size_t rounds = 3 * ShmControl::kSlots;
  const bool late = GENERATE(false, true);
  if (late && me == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  struct Round {
    std::vector<int32_t> sum, sumIn;
    std::vector<char> gathered, bcast, a2aIn, a2aOut;
    std::vector<int32_t> rsIn, rsOut;
    std::vector<uint64_t> bits;
    std::vector<size_t> gatherBytes;
  };
  std::vector<Round> r(rounds);
  std::vector<PendingPtr> ops;
  const auto sum = reductionFor(DataType::kInt32, ReduceOp::kSum);
  for (size_t k = 0; k < rounds; ++k) {
    Round& x = r[k];
    const size_t count = 1 + k * 37;
    const bool inPlace = k % 2 == 1;
    x.sumIn.resize(count);
    x.sum.resize(count);
    for (size_t i = 0; i < count; ++i) x.sumIn[i] = static_cast<int32_t>((me + 1) * (i + k));
    if (inPlace) x.sum = x.sumIn;
    ops.push_back(block->allreduce(inPlace ? nullptr : x.sumIn.data(), x.sum.data(), count, sum));
    // allgatherv with uneven blocks (rank r gives r + k bytes), in place on odd rounds.
    for (int q = 0; q < n; ++q) x.gatherBytes.push_back(static_cast<size_t>(q) + k);
    const size_t total = std::accumulate(x.gatherBytes.begin(), x.gatherBytes.end(), size_t{0});
    const size_t at = std::accumulate(x.gatherBytes.begin(), x.gatherBytes.begin() + me, size_t{0});
    x.gathered.assign(total, 0);
    std::vector<char> mine(x.gatherBytes[me], static_cast<char>('a' + me));
    if (inPlace) std::memcpy(x.gathered.data() + at, mine.data(), mine.size());
    static std::vector<std::vector<char>> keep;  // send buffers live until polled
    keep.push_back(mine);
    ops.push_back(block->allgatherv(inPlace ? nullptr : keep.back().data(), mine.size(),
                                    x.gathered.data(), x.gatherBytes));
    const int root = static_cast<int>(k % n);
    x.bcast.assign(100 + k, me == root ? static_cast<char>(k) : char{-1});
    ops.push_back(block->broadcast(x.bcast.data(), x.bcast.size(), root));
    const size_t blockBytes = 3 + k;
    x.a2aIn.resize(blockBytes * n);
    x.a2aOut.assign(blockBytes * n, 0);
    for (size_t i = 0; i < x.a2aIn.size(); ++i) {
      x.a2aIn[i] = static_cast<char>(me * 16 + static_cast<int>(i / blockBytes) + i % 3);
    }
    ops.push_back(block->alltoall(x.a2aIn.data(), x.a2aOut.data(), blockBytes));
    std::vector<size_t> counts(n, 2 + k);
    x.rsIn.resize((2 + k) * n);
    for (size_t i = 0; i < x.rsIn.size(); ++i) x.rsIn[i] = static_cast<int32_t>(me * 1000 + i);
    x.rsOut.assign(2 + k, 0);
    ops.push_back(block->reduceScatter(x.rsIn.data(), x.rsOut.data(), counts, sum));
    x.bits.assign(3, ~uint64_t{0});
    x.bits[k % 3] &= ~(uint64_t{1} << me);  // every rank clears its own bit in one word
    ops.push_back(block->andBits(x.bits.data(), x.bits.size()));
    ops.push_back(block->barrier());
  }
  for (auto& op : ops) REQUIRE(op != nullptr);
  pollAll(ops);
  for (size_t k = 0; k < rounds; ++k) {
    Round& x = r[k];
    INFO("round " << k);
    for (size_t i = 0; i < x.sum.size(); ++i) {
      REQUIRE(x.sum[i] == static_cast<int32_t>(n * (n + 1) / 2 * (i + k)));
    }
    size_t at = 0;
    for (int q = 0; q < n; ++q) {
      for (size_t i = 0; i < x.gatherBytes[q]; ++i) REQUIRE(x.gathered[at + i] == 'a' + q);
      at += x.gatherBytes[q];
    }
    for (char c : x.bcast) REQUIRE(c == static_cast<char>(k));
    const size_t blockBytes = 3 + k;
    for (size_t i = 0; i < x.a2aOut.size(); ++i) {
      const int src = static_cast<int>(i / blockBytes);
      const size_t j = me * blockBytes + i % blockBytes;  // the sender's index
      REQUIRE(x.a2aOut[i] == static_cast<char>(src * 16 + me + j % 3));
    }
    for (size_t i = 0; i < x.rsOut.size(); ++i) {
      const size_t g = me * (2 + k) + i;
      REQUIRE(x.rsOut[i] == static_cast<int32_t>(1000 * n * (n - 1) / 2 + n * g));
    }
    for (size_t w = 0; w < 3; ++w) {
      const uint64_t cleared = (uint64_t{1} << n) - 1;
      REQUIRE(x.bits[w] == (w == k % 3 ? ~cleared : ~uint64_t{0}));
    }
  }
}

TEST_CASE("a long stream reuses slots on the carried watermarks, never overwriting unread data") {
  // Slot reuse is decided from the watermarks the published words carry (publishedWord): a
  // rank that reused a slot too early would overwrite a payload a peer has not read yet, and that
  // peer's sum would be wrong. Batches of 1..(kSlots + 2) operations in flight, polled newest
  // first, with one rank pausing now and then so that the others run ahead of it by a whole ring.
  auto block = makeBlock();
  if (!block) {
    SUCCEED("HCOLL_MPI_SHM_SMALL=0 on some rank: no block (checked above)");
    return;
  }
  const int n = gSize, me = gRank;
  const auto sum = reductionFor(DataType::kInt32, ReduceOp::kSum);
  const int lagging = n - 1;
  size_t op = 0;
  for (int batch = 0; batch < 400; ++batch) {
    const size_t inFlight = 1 + static_cast<size_t>(batch) % (ShmControl::kSlots + 2);
    std::vector<std::vector<int32_t>> values(inFlight);
    std::vector<std::vector<uint64_t>> bits(inFlight);
    std::vector<PendingPtr> ops;
    for (size_t i = 0; i < inFlight; ++i, ++op) {
      values[i].assign(3, static_cast<int32_t>((me + 1) * 1000 + op));
      ops.push_back(block->allreduce(nullptr, values[i].data(), values[i].size(), sum));
      bits[i].assign(2, ~uint64_t{0});
      bits[i][op % 2] &= ~(uint64_t{1} << me);
      ops.push_back(block->andBits(bits[i].data(), bits[i].size()));
    }
    if (me == lagging && batch % 37 == 5) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    pollAll(ops);
    for (size_t i = 0; i < inFlight; ++i) {
      const size_t k = op - inFlight + i;
      INFO("batch " << batch << ", operation " << k);
      const int32_t want = static_cast<int32_t>(1000 * n * (n + 1) / 2 + n * k);
      for (int32_t v : values[i]) REQUIRE(v == want);
      const uint64_t cleared = (uint64_t{1} << n) - 1;
      REQUIRE(bits[i][k % 2] == ~cleared);
      REQUIRE(bits[i][(k + 1) % 2] == ~uint64_t{0});
    }
  }
}

TEST_CASE("operations above the block's sizes are left to MPI on every rank") {
  auto block = makeBlock();
  if (!block) return;
  const auto sum = reductionFor(DataType::kFloat32, ReduceOp::kSum);
  const size_t fits = ShmControl::kDataSlotBytes / sizeof(float);
  std::vector<float> big(fits + 1, 1.f);
  CHECK(block->allreduce(nullptr, big.data(), fits + 1, sum) == nullptr);
  CHECK(block->broadcast(big.data(), ShmControl::kDataSlotBytes + 1, 0) == nullptr);
  std::vector<uint64_t> words(ShmControl::kControlSlotBytes / 8 + 1, ~uint64_t{0});
  CHECK(block->andBits(words.data(), words.size()) == nullptr);
  // The largest that fits does go through the block.
  std::vector<PendingPtr> ops;
  ops.push_back(block->allreduce(nullptr, big.data(), fits, sum));
  REQUIRE(ops.back() != nullptr);
  pollAll(ops);
  CHECK(big[0] == static_cast<float>(gSize));
  CHECK(big[fits - 1] == static_cast<float>(gSize));
}

// The readiness AND carrying a small allreduce (the fold): each case runs the same exchange on
// every rank and checks the words, the verdict (the same everywhere) and the result.
TEST_CASE("a folded allreduce stands only when every rank folded it alike") {
  auto block = makeBlock();
  if (!block) return;
  using Fold = hcoll::backends::Channel::FoldedCollective;
  // The header is one packed word (mpi_shm_control.cc): a tag too wide for it is not folded,
  // never mistaken for the tag it would alias.
  enum Case {
    kAllAlike, kOneOtherTag, kOneNotFolding, kOneOtherCount, kOneOtherOp, kOneOtherDtype,
    kOneTagTooWide, kEveryTagTooWide
  };
  for (int c = kAllAlike; c <= kEveryTagTooWide; ++c) {
    const bool odd = gRank == gSize - 1;  // the rank that differs, when one does
    std::vector<uint64_t> words = {~uint64_t{0}, uint64_t{1} << gRank | 1};
    double send[3] = {1.0 + gRank, 2.0 * gRank, -1.0};
    double recv[3] = {-7, -7, -7};
    bool agreed = true;
    Fold fold;
    constexpr uint64_t kTooWide = uint64_t{1} << 24;
    fold.tag = (c == kOneOtherTag && odd)                              ? 6
               : (c == kOneTagTooWide && odd) || c == kEveryTagTooWide ? kTooWide + 5
                                                                          : 5;
    fold.send = send;
    fold.recv = recv;
    fold.count = (c == kOneOtherCount && odd) ? 2 : 3;
    fold.dtype = (c == kOneOtherDtype && odd) ? DataType::kInt64 : DataType::kFloat64;
    fold.op = (c == kOneOtherOp && odd) ? ReduceOp::kMax : ReduceOp::kSum;
    fold.agreed = &agreed;
    andBitsOnce(*block, words, (c == kOneNotFolding && odd) ? nullptr : &fold);
    INFO("case " << c);
    CHECK(words[0] == ~uint64_t{0});
    CHECK(words[1] == (gSize == 1 ? 3u : 1u));  // only bit 0 is set on every rank
    const bool folding = !(c == kOneNotFolding && odd);
    if (folding) CHECK(agreed == (c == kAllAlike));
    // The same verdict on every rank that folded (a rank not folding has none: 0 here).
    const int verdict = folding && agreed ? 1 : 0;
    CHECK(allOf(verdict, MPI_MAX) == (c == kAllAlike ? 1 : 0));
    if (c == kAllAlike) CHECK(allOf(verdict, MPI_MIN) == 1);
    if (c == kAllAlike) {
      const double n = gSize;
      CHECK(recv[0] == n + n * (n - 1) / 2);
      CHECK(recv[1] == n * (n - 1));
      CHECK(recv[2] == -n);
    } else {
      CHECK(recv[0] == -7);  // discarded: untouched
    }
  }
  // Gathered and broadcast: every rank's elements in rank order, the root's; a root that differs
  // on one rank, or a rank that gathers where the others broadcast, leaves every result unused.
  using Combine = Fold::Combine;
  enum GatherCase { kGather, kBroadcastLast, kOneOtherRoot, kOneOtherCombine };
  for (int c = kGather; c <= kOneOtherCombine; ++c) {
    const bool odd = gRank == gSize - 1;
    std::vector<uint64_t> words = {~uint64_t{0}, 1};
    int32_t send[2] = {10 * gRank, 10 * gRank + 1};
    std::vector<int32_t> recv(2 * static_cast<size_t>(gSize), -7);
    bool agreed = false;
    Fold fold;
    fold.tag = 9;
    fold.send = send;
    fold.recv = recv.data();
    fold.count = 2;
    fold.dtype = DataType::kInt32;
    fold.combine = c == kGather || (c == kOneOtherCombine && odd) ? Combine::kGather
                                                                   : Combine::kBroadcast;
    fold.root = (c == kOneOtherRoot && odd) ? 0 : gSize - 1;
    fold.agreed = &agreed;
    andBitsOnce(*block, words, &fold);
    INFO("gather case " << c);
    const bool alike = c == kGather || c == kBroadcastLast || gSize == 1;
    CHECK(agreed == alike);
    if (c == kGather) {
      for (int r = 0; r < gSize; ++r) {
        CHECK(recv[2 * static_cast<size_t>(r)] == 10 * r);
        CHECK(recv[2 * static_cast<size_t>(r) + 1] == 10 * r + 1);
      }
    } else if (c == kBroadcastLast) {
      CHECK(recv[0] == 10 * (gSize - 1));
      CHECK(recv[1] == 10 * (gSize - 1) + 1);
      if (gSize > 1) CHECK(recv[2] == -7);  // a broadcast writes `count` elements only
    } else if (!alike) {
      CHECK(recv[0] == -7);  // discarded: untouched
    }
  }
  // What one rank can fold shrinks with the words; past it a rank takes part without folding.
  CHECK(block->foldableBytes(2) == ShmControl::kControlSlotBytes - 8 - 16);
  CHECK(block->foldableBytes(ShmControl::kControlSlotBytes / 8) == 0);
}

// The words from FoldedCollective::alikeFrom on travel after the folded data, and a rank leaves
// the others' unread when every rank folded alike (they are its own then). Whatever the layout
// and whoever folds, every rank ends with the AND of every rank's words, and a fold that stands
// finds its data.
TEST_CASE("the words after the folded data are ANDed unless every rank folded alike") {
  auto block = makeBlock();
  if (!block) return;
  using Fold = hcoll::backends::Channel::FoldedCollective;
  // Data of 3 floats goes before the alike words (it fits the published line), of 12 after them.
  enum Case { kAlike, kOneOtherTag, kOneNotFolding, kNoAlikeWords, kAlikePastTheHeader };
  for (int step = 0; step < 2 * (kAlikePastTheHeader + 1); ++step) {
    const int c = step / 2;
    const size_t elements = step % 2 == 0 ? 3 : 12;
    const bool odd = gRank == gSize - 1;
    const bool alike = c == kAlike || c == kNoAlikeWords || c == kAlikePastTheHeader;
    const size_t count = c == kAlikePastTheHeader ? 40 : 150;
    const size_t alikeFrom = c == kNoAlikeWords ? SIZE_MAX : c == kAlikePastTheHeader ? 35 : 2;
    // Leading words differ per rank; the rest are the same on every rank where the fold is
    // alike (as the runtime's slot words are), and differ where it is not.
    auto wordOf = [&](int r, size_t i) -> uint64_t {
      if (i < std::min(alikeFrom, count) || !alike) {
        return ((i + static_cast<size_t>(r)) % 3 == 0) ? 0 : ~(uint64_t{1} << (r + i % 7));
      }
      return i == 77 ? 0x5a5a : 0;
    };
    std::vector<uint64_t> words(count);
    for (size_t i = 0; i < count; ++i) words[i] = wordOf(gRank, i);
    std::vector<float> send(elements, 0.5f), recv(elements, -7.0f);
    send[0] = 1.0f + gRank;
    send[2] = -2.0f * gRank;
    bool agreed = false;
    Fold fold;
    fold.tag = (c == kOneOtherTag && odd) ? 12 : 11;
    fold.send = send.data();
    fold.recv = recv.data();
    fold.count = elements;
    fold.dtype = DataType::kFloat32;
    fold.alikeFrom = alikeFrom;
    fold.agreed = &agreed;
    andBitsOnce(*block, words, (c == kOneNotFolding && odd) ? nullptr : &fold);
    INFO("case " << c << ", " << elements << " floats");
    for (size_t i = 0; i < count; ++i) {
      uint64_t want = ~uint64_t{0};
      for (int r = 0; r < gSize; ++r) want &= wordOf(r, i);
      CHECK(words[i] == want);
    }
    if (!(c == kOneNotFolding && odd)) CHECK(agreed == (alike || gSize == 1));
    if (alike) {
      const float n = static_cast<float>(gSize);
      CHECK(recv[0] == n + n * (n - 1) / 2);
      CHECK(recv[1] == 0.5f * n);
      CHECK(recv[2] == -n * (n - 1));
      if (elements > 3) CHECK(recv[elements - 1] == 0.5f * n);
    } else if (gSize > 1) {
      CHECK(recv[0] == -7);  // discarded: untouched
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &gRank);
  MPI_Comm_size(MPI_COMM_WORLD, &gSize);
  const int failed = Catch::Session().run(argc, argv);
  int anyFailed = 0;
  MPI_Allreduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return anyFailed != 0 ? 1 : 0;
}
