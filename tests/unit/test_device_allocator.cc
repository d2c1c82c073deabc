// The fusion allocator as the NCCL backend uses it, with a fake device MemoryProvider: raw
// allocations and frees run outside the allocator's lock (cudaFree synchronizes the device), a
// destroyed plane's (device, stream) pool is trimmed alone, an allocation that fails is retried
// after freeing the device's idle buffers, and an abandoned lease is never leased again.

#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <vector>

#include "fusion/fusion_allocator.h"

namespace {

using hcoll::fusion::AllocatorStats;
using hcoll::fusion::BufferKey;
using hcoll::fusion::FusionAllocator;
using hcoll::fusion::Lease;
using hcoll::fusion::MemoryProvider;

// Device memory with a budget; every call checks that the allocator's lock is free by reading
// its stats from another thread (under the lock that read would wait, and time out here).
class FakeDevice final : public MemoryProvider {
 public:
  FakeDevice(FusionAllocator& alloc, size_t budget) : alloc_(alloc), budget_(budget) {}
  void* allocate(const BufferKey& key, size_t bytes) override {
    lockWasFree = lockWasFree && lockIsFree();
    if (used + bytes > budget_) return nullptr;
    used += bytes;
    auto block = std::make_unique<uint8_t[]>(bytes);
    void* p = block.get();
    live[p] = {key, bytes};
    blocks[p] = std::move(block);
    return p;
  }
  void release(const BufferKey&, void* ptr) override {
    lockWasFree = lockWasFree && lockIsFree();
    used -= live.at(ptr).second;
    live.erase(ptr);
    blocks.erase(ptr);
    ++releases;
  }

  bool lockWasFree = true;
  size_t used = 0;
  int releases = 0;
  std::map<void*, std::pair<BufferKey, size_t>> live;

 private:
  bool lockIsFree() {
    auto read = std::async(std::launch::async, [this] { return alloc_.stats(); });
    return read.wait_for(std::chrono::seconds(2)) == std::future_status::ready;
  }
  FusionAllocator& alloc_;
  size_t budget_;
  std::map<void*, std::unique_ptr<uint8_t[]>> blocks;
};

int gStreams[4];  // distinct addresses stand for distinct streams
BufferKey key(int device, int stream) {
  return BufferKey{device, &gStreams[stream]};
}

}  // namespace

TEST_CASE("Fusion allocator: device memory is allocated and freed outside the lock", "[device]") {
  FusionAllocator alloc;
  alloc.setThreshold(1 << 20);
  FakeDevice device(alloc, 64 << 20);
  alloc.setDeviceProvider(&device);
  {
    std::vector<Lease> leases(FusionAllocator::kMaxPooledPerKey + 2);
    for (auto& l : leases) REQUIRE(alloc.acquire(key(0, 0), 4096, &l).isOk());
  }  // more than the pool keeps: the surplus is freed on return
  CHECK(device.releases == 2);
  alloc.trim();
  CHECK(device.live.empty());
  CHECK(device.lockWasFree);
}

TEST_CASE("Fusion allocator: trimming one key frees only that plane's pool", "[device]") {
  FusionAllocator alloc;
  FakeDevice device(alloc, 64 << 20);
  alloc.setDeviceProvider(&device);
  {
    Lease a, b, c;
    REQUIRE(alloc.acquire(key(0, 0), 4096, &a).isOk());
    REQUIRE(alloc.acquire(key(0, 1), 4096, &b).isOk());
    REQUIRE(alloc.acquire(key(1, 0), 4096, &c).isOk());
  }
  REQUIRE(device.live.size() == 3);
  alloc.trim(key(0, 1));  // plane (device 0, stream 1) destroyed
  CHECK(device.live.size() == 2);
  for (auto& [p, owner] : device.live)
    CHECK_FALSE((owner.first.device == 0 && owner.first.stream == &gStreams[1]));
  alloc.trim(key(3, 3));  // an unknown key is a no-op
  CHECK(device.live.size() == 2);
  alloc.trim();
  CHECK(alloc.stats().bytesHeld == 0);
  CHECK(device.lockWasFree);
}

TEST_CASE("Fusion allocator: an allocation that fails frees the device's idle buffers and retries",
          "[device]") {
  FusionAllocator alloc;
  alloc.setThreshold(256 << 10);
  FakeDevice device(alloc, 512 << 10);  // room for two 256 KiB buffers
  alloc.setDeviceProvider(&device);
  {
    Lease a, b;
    REQUIRE(alloc.acquire(key(0, 0), 200 << 10, &a).isOk());
    REQUIRE(alloc.acquire(key(0, 1), 200 << 10, &b).isOk());
  }  // both idle in their pools now
  REQUIRE(device.used == 512u << 10);
  Lease c;
  REQUIRE(alloc.acquire(key(0, 2), 200 << 10, &c).isOk());  // another plane of device 0
  CHECK(device.releases == 2);
  SECTION("and still fails cleanly when leased buffers fill the device") {
    Lease d, e;
    REQUIRE(alloc.acquire(key(0, 3), 200 << 10, &d).isOk());
    auto s = alloc.acquire(key(0, 0), 200 << 10, &e);
    CHECK(s.code() == hcoll::Code::kNoMemory);
    CHECK(e.data() == nullptr);
  }
  c.reset();
  alloc.trim();
  CHECK(device.live.empty());
}

TEST_CASE("Fusion allocator: an abandoned lease is never leased again nor freed", "[device]") {
  FusionAllocator alloc;
  FakeDevice device(alloc, 64 << 20);
  alloc.setDeviceProvider(&device);
  void* busy = nullptr;
  {
    Lease l;
    REQUIRE(alloc.acquire(key(0, 0), 4096, &l).isOk());
    busy = l.data();
    l.abandon();  // its fence failed: the device may still write it
    CHECK(l.data() == nullptr);
  }
  AllocatorStats s = alloc.stats();
  CHECK(s.leasedNow == 0);
  CHECK(s.abandoned == 1);
  CHECK(s.bytesHeld == 0);
  Lease next;
  REQUIRE(alloc.acquire(key(0, 0), 4096, &next).isOk());
  CHECK(next.data() != busy);
  next.reset();
  alloc.trim();
  CHECK(device.live.size() == 1);  // only the abandoned one, deliberately leaked
  CHECK(device.live.count(busy) == 1);
}
