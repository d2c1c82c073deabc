// The lazy NCCL bootstrap's unique-id exchange over a communicator's control plane, with fake
// channels: rank 0 makes the id, others receive it; a failure on any rank, before the NCCL
// initialization, fails every rank and leaves none waiting (ranks as threads).

#include "hcoll/config.h"
#if HCOLL_WITH_NCCL  // the backend sources are built with it

#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/nccl/nccl_bootstrap.h"
#include "fusion/fusion_allocator.h"
#include "stub_channel.h"

namespace {

using hcoll::Code;
using hcoll::Status;
using hcoll::backends::Channel;
using hcoll::backends::PendingPtr;

// A channel whose broadcastBytes replaces *buf with `fromRoot` (what rank 0 would have sent).
class FakeChannel final : public htest::StubChannel {
 public:
  FakeChannel(int rank, std::vector<uint8_t>* wire)
      : StubChannel(rank, 2, htest::unusedCall()), wire_(wire) {}
  PendingPtr broadcastBytes(std::vector<uint8_t>* buf) override {
    ++broadcasts;
    if (rank() == 0) {
      *wire_ = *buf;
    } else {
      *buf = *wire_;
    }
    return hcoll::backends::finished();
  }
  int broadcasts = 0;

 private:
  std::vector<uint8_t>* wire_;
};

// Ranks as threads: each rank's k-th control-plane call meets the other ranks' k-th call.
class ThreadWorld {
 public:
  explicit ThreadWorld(int size) : size_(size) {}
  int size() const { return size_; }

  struct Round {
    std::vector<uint8_t> root;
    bool rootSent = false;
    uint64_t bits = ~uint64_t{0};
    int arrived = 0;
  };
  std::mutex mutex;
  std::map<int, Round> rounds;

 private:
  int size_;
};

class ThreadChannel final : public htest::StubChannel {
 public:
  ThreadChannel(ThreadWorld& world, int rank)
      : StubChannel(rank, world.size(), htest::unusedCall()), world_(world) {}
  PendingPtr allreduceBitsAnd(uint64_t* words, size_t count) override {
    if (count != 1) return stub();  // (no Catch2 assertions off the main thread)
    const int round = calls_++;
    {
      std::lock_guard<std::mutex> lock(world_.mutex);
      world_.rounds[round].bits &= words[0];
      ++world_.rounds[round].arrived;
    }
    return std::make_unique<Poll>([this, round, words] {
      std::lock_guard<std::mutex> lock(world_.mutex);
      if (world_.rounds[round].arrived < world_.size()) return false;
      words[0] = world_.rounds[round].bits;
      return true;
    });
  }
  PendingPtr broadcastBytes(std::vector<uint8_t>* buf) override {
    const int round = calls_++;
    if (rank() == 0) {
      std::lock_guard<std::mutex> lock(world_.mutex);
      world_.rounds[round].root = *buf;
      world_.rounds[round].rootSent = true;
      return hcoll::backends::finished();
    }
    return std::make_unique<Poll>([this, round, buf] {
      std::lock_guard<std::mutex> lock(world_.mutex);
      if (!world_.rounds[round].rootSent) return false;
      *buf = world_.rounds[round].root;
      return true;
    });
  }

 private:
  class Poll final : public hcoll::backends::Pending {
   public:
    explicit Poll(std::function<bool()> done) : done_(std::move(done)) {}
    bool poll(Status* status) override {
      *status = Status::ok();
      return done_();
    }

   private:
    std::function<bool()> done_;
  };
  ThreadWorld& world_;
  int calls_ = 0;
};

// Runs prepareBootstrap on `n` thread ranks, rank r's local preparation giving local[r].
std::vector<Status> bootstrapAll(const std::vector<Status>& local, int* idsMade,
                                 std::vector<std::vector<uint8_t>>* ids) {
  const int n = static_cast<int>(local.size());
  ThreadWorld world(n);
  std::vector<Status> out(n);
  ids->assign(n, {});
  std::mutex madeMutex;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      ThreadChannel channel(world, r);
      out[r] = hcoll::backends::nccl::prepareBootstrap(
          channel, 4, local[r],
          [&](std::vector<uint8_t>* id) {
            std::lock_guard<std::mutex> lock(madeMutex);
            ++*idsMade;
            *id = {7, 7, 7, 7};
            return Status::ok();
          },
          &(*ids)[r]);
    });
  }
  for (auto& t : threads) t.join();  // a rank left waiting would hang the test here
  return out;
}

}  // namespace

TEST_CASE("NCCL bootstrap: rank 0's id reaches the other ranks over the control plane",
          "[device]") {
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

TEST_CASE("NCCL bootstrap: a failure on rank 0 fails every rank instead of hanging one",
          "[device]") {
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

TEST_CASE("NCCL bootstrap: an id of the wrong size is rejected", "[device]") {
  std::vector<uint8_t> wire;
  FakeChannel root(0, &wire);
  auto shortId = [](std::vector<uint8_t>* id) {
    *id = {1};
    return Status::ok();
  };
  std::vector<uint8_t> id;
  CHECK(hcoll::backends::nccl::shareUniqueId(root, 128, shortId, &id).code() == Code::kBackend);
}

TEST_CASE("NCCL bootstrap: every rank ready, every rank gets rank 0's id", "[device]") {
  int made = 0;
  std::vector<std::vector<uint8_t>> ids;
  auto s = bootstrapAll({Status::ok(), Status::ok(), Status::ok()}, &made, &ids);
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r << ": " << s[r].message());
    CHECK(s[r].isOk());
    CHECK(ids[r] == std::vector<uint8_t>{7, 7, 7, 7});
  }
  CHECK(made == 1);
}

TEST_CASE("NCCL bootstrap: a rank that failed to prepare fails every rank, none waits",
          "[device]") {
  int made = 0;
  std::vector<std::vector<uint8_t>> ids;
  SECTION("a rank other than 0 (e.g. its stream could not be created)") {
    auto s = bootstrapAll(
        {Status::ok(), Status(Code::kBackend, "cudaStreamCreate: out of memory"), Status::ok()},
        &made, &ids);
    CHECK(s[1].message() == "cudaStreamCreate: out of memory");  // its own reason
    for (int r : {0, 2}) {
      CHECK(s[r].code() == Code::kBackend);
      CHECK(s[r].message().find("another rank") != std::string::npos);
    }
    CHECK(made == 1);
  }
  SECTION("rank 0 (e.g. cudaSetDevice failed): it makes no id") {
    auto s = bootstrapAll({Status(Code::kBackend, "cudaSetDevice: invalid device"), Status::ok()},
                          &made, &ids);
    CHECK(s[0].message() == "cudaSetDevice: invalid device");
    CHECK(s[1].code() == Code::kBackend);
    CHECK(made == 0);
  }
}

TEST_CASE("Fusion allocator: device buffers are keyed by (device, stream) through a provider",
          "[device]") {
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
