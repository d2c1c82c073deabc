// The process-wide fusion-buffer pool: exclusive leases under concurrency, reuse at steady state
// (no new allocations), bounded pooling, and separate pools per (device, stream) key.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "fusion/fusion_allocator.h"

using hcoll::fusion::BufferKey;
using hcoll::fusion::FusionAllocator;
using hcoll::fusion::Lease;

namespace {

// A private allocator per test case (the process-wide instance is shared by the whole binary).
struct TestAllocator {
  FusionAllocator a;
  ~TestAllocator() { a.trim(); }
};

}  // namespace

TEST_CASE("fusion allocator: concurrent leases never share a buffer", "[fusion_allocator]") {
  TestAllocator t;
  t.a.setThreshold(1 << 20);
  constexpr int kThreads = 6, kIters = 1500;
  std::mutex liveMutex;
  std::set<void*> live;
  std::atomic<int> shared{0}, corrupted{0}, failed{0};
  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id) {
    threads.emplace_back([&, id] {
      std::mt19937 rng(id);
      std::uniform_int_distribution<size_t> size(1, 300 * 1024);
      for (int i = 0; i < kIters; ++i) {
        Lease lease;
        const size_t bytes = size(rng);
        if (!t.a.acquire({}, bytes, &lease).isOk()) {
          ++failed;
          continue;
        }
        if (lease.capacity() < bytes) ++failed;
        {
          std::lock_guard<std::mutex> lock(liveMutex);
          if (!live.insert(lease.data()).second) ++shared;
        }
        // Write this thread's mark over the range, let others run, check nobody overwrote it.
        auto* p = static_cast<unsigned char*>(lease.data());
        std::memset(p, id + 1, bytes);
        std::this_thread::yield();
        if (p[0] != id + 1 || p[bytes / 2] != id + 1 || p[bytes - 1] != id + 1) ++corrupted;
        {
          std::lock_guard<std::mutex> lock(liveMutex);
          live.erase(lease.data());
        }
      }  // the lease goes back to the pool here
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failed == 0);
  CHECK(shared == 0);
  CHECK(corrupted == 0);
  auto s = t.a.stats();
  CHECK(s.leasedNow == 0);
  CHECK(s.leases == static_cast<uint64_t>(kThreads) * kIters);
  // Pooling works under concurrency too: far fewer raw allocations than leases.
  CHECK(s.allocations < s.leases / 10);
}

TEST_CASE("fusion allocator: steady state reuses buffers", "[fusion_allocator]") {
  TestAllocator t;
  t.a.setThreshold(8 << 20);
  // A cycle-like pattern: two leases at once, sizes varying from step to step.
  const size_t sizes[] = {4096, 200 * 1024, 70 * 1024, 1 << 20, 123};
  auto step = [&](int i) {
    Lease x, y;
    REQUIRE(t.a.acquire({}, sizes[i % 5], &x).isOk());
    REQUIRE(t.a.acquire({}, sizes[(i + 2) % 5], &y).isOk());
    REQUIRE(x.data() != y.data());
  };
  for (int i = 0; i < 20; ++i) step(i);
  const uint64_t warm = t.a.stats().allocations;
  const size_t held = t.a.stats().bytesHeld;
  for (int i = 0; i < 1000; ++i) step(i);
  CHECK(t.a.stats().allocations == warm);
  CHECK(t.a.stats().bytesHeld == held);
  CHECK(t.a.stats().leasedNow == 0);
}

TEST_CASE("fusion allocator: the pool is bounded", "[fusion_allocator]") {
  TestAllocator t;
  const size_t threshold = 256 * 1024;
  t.a.setThreshold(threshold);

  SECTION("at most kMaxPooledPerKey buffers stay pooled per key") {
    {
      std::vector<Lease> many(3 * FusionAllocator::kMaxPooledPerKey);
      for (auto& l : many) REQUIRE(t.a.acquire({}, 64 * 1024, &l).isOk());
      CHECK(t.a.stats().leasedNow == many.size());
    }
    auto s = t.a.stats();
    CHECK(s.leasedNow == 0);
    CHECK(s.bytesHeld <= FusionAllocator::kMaxPooledPerKey * threshold);
  }
  SECTION("a buffer above the threshold is freed when its lease ends") {
    const size_t before = t.a.stats().bytesHeld;
    {
      Lease big;
      REQUIRE(t.a.acquire({}, 4 * threshold, &big).isOk());
      CHECK(big.capacity() >= 4 * threshold);
      CHECK(t.a.stats().bytesHeld >= before + 4 * threshold);
    }
    CHECK(t.a.stats().bytesHeld == before);
  }
  SECTION("a lease never exceeds the threshold when the request fits it") {
    Lease l;
    REQUIRE(t.a.acquire({}, threshold - 1, &l).isOk());
    CHECK(l.capacity() <= threshold);
    CHECK(l.capacity() >= threshold - 1);
  }
  SECTION("trim frees every pooled buffer") {
    { Lease l; REQUIRE(t.a.acquire({}, 1000, &l).isOk()); }
    CHECK(t.a.stats().bytesHeld > 0);
    t.a.trim();
    CHECK(t.a.stats().bytesHeld == 0);
  }
}

TEST_CASE("fusion allocator: different (device, stream) keys have separate pools",
          "[fusion_allocator]") {
  TestAllocator t;
  int streamA = 0, streamB = 0;  // any distinct addresses stand for two streams
  BufferKey a{-1, &streamA}, b{-1, &streamB};
  void* fromA = nullptr;
  {
    Lease l;
    REQUIRE(t.a.acquire(a, 4096, &l).isOk());
    fromA = l.data();
  }  // pooled under key a
  Lease onB;
  REQUIRE(t.a.acquire(b, 4096, &onB).isOk());
  CHECK(onB.data() != fromA);  // b never gets a's buffer
  Lease onA;
  REQUIRE(t.a.acquire(a, 4096, &onA).isOk());
  CHECK(onA.data() == fromA);  // a reuses its own

  SECTION("a device key without a provider is refused, not crashed") {
    Lease dev;
    auto s = t.a.acquire({0, nullptr}, 4096, &dev);
    CHECK_FALSE(s.isOk());
    CHECK(dev.data() == nullptr);
  }
}

TEST_CASE("fusion allocator: moving a lease transfers ownership once", "[fusion_allocator]") {
  TestAllocator t;
  Lease a;
  REQUIRE(t.a.acquire({}, 1024, &a).isOk());
  void* p = a.data();
  Lease b = std::move(a);
  CHECK(a.data() == nullptr);
  CHECK(b.data() == p);
  CHECK(t.a.stats().leasedNow == 1);
  b.reset();
  CHECK(t.a.stats().leasedNow == 0);
}
