// The lazy NCCL bootstrap's unique-id exchange over a communicator's control plane, with a fake
// channel: rank 0 makes the id, others receive it; a failure on rank 0 fails every rank.

#include "hcoll/config.h"
#if HCOLL_WITH_NCCL  // the backend sources are built with it

#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "backends/nccl/nccl_bootstrap.h"
#include "fusion/fusion_allocator.h"

namespace {

using hcoll::Code;
using hcoll::Status;
using hcoll::backends::Channel;
using hcoll::backends::PendingPtr;

// A channel whose broadcastBytes replaces *buf with `fromRoot` (what rank 0 would have sent).
class FakeChannel final : public Channel {
 public:
  FakeChannel(int rank, std::vector<uint8_t>* wire) : rank_(rank), wire_(wire) {}
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  int localRank() const override { return rank_; }
  int localSize() const override { return 2; }
  PendingPtr allreduceBitsAnd(uint64_t*, size_t) override { return unused(); }
  PendingPtr gatherBytes(std::vector<uint8_t>, std::vector<std::vector<uint8_t>>*) override {
    return unused();
  }
  PendingPtr broadcastBytes(std::vector<uint8_t>* buf) override {
    ++broadcasts;
    if (rank_ == 0) {
      *wire_ = *buf;
    } else {
      *buf = *wire_;
    }
    return hcoll::backends::finished();
  }
  Status split(int, int, std::unique_ptr<Channel>*) override { return Status::ok(); }
  Status create(const std::vector<int32_t>&, std::unique_ptr<Channel>*) override {
    return Status::ok();
  }
  PendingPtr allreduce(void*, size_t, hcoll::DataType, hcoll::ReduceOp) override { return unused(); }
  PendingPtr allgatherv(const void*, size_t, void*, const std::vector<size_t>&) override {
    return unused();
  }
  PendingPtr broadcast(void*, size_t, int) override { return unused(); }
  PendingPtr alltoallv(const void*, const std::vector<size_t>&, void*,
                       const std::vector<size_t>&) override {
    return unused();
  }
  PendingPtr reduceScatter(const void*, void*, const std::vector<size_t>&, hcoll::DataType,
                           hcoll::ReduceOp) override {
    return unused();
  }
  PendingPtr barrier() override { return unused(); }
  int broadcasts = 0;

 private:
  static PendingPtr unused() { return hcoll::backends::finished(Status(Code::kInternal, "unused")); }
  int rank_;
  std::vector<uint8_t>* wire_;
};

}  // namespace

TEST_CASE("NCCL bootstrap: rank 0's id reaches the other ranks over the control plane") {
  std::vector<uint8_t> wire;
  FakeChannel root(0, &wire), other(1, &wire);
  int made = 0;
  auto makeId = [&](std::vector<uint8_t>* id) {
    ++made;
    *id = {1, 2, 3, 4};
    return Status::ok();
  };
  std::vector<uint8_t> id0, id1;
  REQUIRE(hcoll::backends::nccl::shareUniqueId(root, 4, makeId, &id0).isOk());
  REQUIRE(hcoll::backends::nccl::shareUniqueId(other, 4, makeId, &id1).isOk());
  CHECK(made == 1);  // only rank 0 creates it
  CHECK(id0 == std::vector<uint8_t>{1, 2, 3, 4});
  CHECK(id1 == id0);
  CHECK(root.broadcasts == 1);
  CHECK(other.broadcasts == 1);
}

TEST_CASE("NCCL bootstrap: a failure on rank 0 fails every rank instead of hanging one") {
  std::vector<uint8_t> wire{9, 9};
  FakeChannel root(0, &wire), other(1, &wire);
  auto fails = [](std::vector<uint8_t>*) { return Status(Code::kBackend, "no NCCL"); };
  std::vector<uint8_t> id0, id1;
  Status s0 = hcoll::backends::nccl::shareUniqueId(root, 4, fails, &id0);
  Status s1 = hcoll::backends::nccl::shareUniqueId(other, 4, fails, &id1);
  CHECK(s0.code() == Code::kBackend);
  CHECK(s1.code() == Code::kBackend);  // got an empty id: fails too
  CHECK(root.broadcasts == 1);         // but still took part in the broadcast
  CHECK(wire.empty());
}

TEST_CASE("NCCL bootstrap: an id of the wrong size is rejected") {
  std::vector<uint8_t> wire;
  FakeChannel root(0, &wire);
  auto shortId = [](std::vector<uint8_t>* id) {
    *id = {1};
    return Status::ok();
  };
  std::vector<uint8_t> id;
  CHECK(hcoll::backends::nccl::shareUniqueId(root, 128, shortId, &id).code() == Code::kBackend);
}

TEST_CASE("Fusion allocator: device buffers are keyed by (device, stream) through a provider") {
  struct Provider : hcoll::fusion::MemoryProvider {
    std::vector<hcoll::fusion::BufferKey> keys;
    std::vector<std::unique_ptr<uint8_t[]>> blocks;
    void* allocate(const hcoll::fusion::BufferKey& key, size_t bytes) override {
      keys.push_back(key);
      blocks.emplace_back(new uint8_t[bytes]);
      return blocks.back().get();
    }
    void release(const hcoll::fusion::BufferKey&, void*) override {}
  } provider;
  hcoll::fusion::FusionAllocator alloc;
  alloc.setDeviceProvider(&provider);
  int s1 = 0, s2 = 0;
  {
    hcoll::fusion::Lease a, b;
    REQUIRE(alloc.acquire({0, &s1}, 64, &a).isOk());
    REQUIRE(alloc.acquire({0, &s2}, 64, &b).isOk());
    CHECK(a.data() != b.data());
  }
  hcoll::fusion::Lease again;
  REQUIRE(alloc.acquire({0, &s1}, 32, &again).isOk());  // reused from the (0, s1) pool
  CHECK(provider.keys.size() == 2);
  CHECK(provider.keys[0].stream == &s1);
  CHECK(provider.keys[1].stream == &s2);
  again.reset();
  alloc.trim();
}

#endif  // HCOLL_WITH_NCCL
