#include "fusion/fusion_allocator.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace hcoll::fusion {
namespace {

class HostMemory final : public MemoryProvider {
 public:
  void* allocate(const BufferKey&, size_t bytes) override {
    // Page-aligned, not just 64-byte aligned (which keeps every dtype aligned at any packed
    // offset): packing copies a caller's tensor into the buffer, and a destination 1-63 bytes
    // ahead of its source modulo 4 KiB (4K aliasing) copies ~1.5x slower on x86 (memcpy's rep
    // movsb and vector loops alike). Large tensors from malloc start 16 bytes past a page, from
    // posix_memalign(64) (torch's CPU allocator) 64 bytes past one: a 64-aligned buffer (which
    // glibc puts 64 bytes past a page) sat 48 bytes ahead of the first, a page-aligned one sits
    // behind both. That holds for every member packed at a multiple of 4 KiB (the first one,
    // and all of a batch of page-sized tensors); the others land where the packing puts them.
    // Measured packing 100 x 4 KiB of malloc'd tensors: 31 us into a +64 buffer, 20 us into a
    // page-aligned one. (Unpacking puts those tensors 16 or 64 bytes ahead of the buffer:
    // common/copy_bytes.h copies that case backward.)
    constexpr size_t kPage = 4096;
    return std::aligned_alloc(kPage, (bytes + kPage - 1) / kPage * kPage);
  }
  void release(const BufferKey&, void* ptr) override { std::free(ptr); }
};

HostMemory gHostMemory;

size_t roundUpCapacity(size_t bytes, size_t threshold) {
  // Powers of two (from 64 KiB) let one buffer serve the varying sizes of successive cycles.
  size_t c = 64 * 1024;
  while (c < bytes) c *= 2;
  return threshold >= bytes ? std::min(c, std::max(threshold, bytes)) : bytes;
}

}  // namespace

Lease& Lease::operator=(Lease&& o) noexcept {
  if (this != &o) {
    reset();
    owner_ = std::exchange(o.owner_, nullptr);
    key_ = o.key_;
    data_ = std::exchange(o.data_, nullptr);
    capacity_ = std::exchange(o.capacity_, 0);
  }
  return *this;
}

void Lease::reset() {
  if (owner_ != nullptr && data_ != nullptr) owner_->giveBack(key_, data_, capacity_);
  owner_ = nullptr;
  data_ = nullptr;
  capacity_ = 0;
}

void Lease::abandon() {
  if (owner_ != nullptr && data_ != nullptr) owner_->forget(capacity_);
  owner_ = nullptr;
  data_ = nullptr;
  capacity_ = 0;
}

FusionAllocator& FusionAllocator::instance() {
  static FusionAllocator* allocator = new FusionAllocator();  // outlives every communicator
  return *allocator;
}

void FusionAllocator::setThreshold(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  threshold_ = bytes;
}

void FusionAllocator::setDeviceProvider(MemoryProvider* provider) {
  std::lock_guard<std::mutex> lock(mutex_);
  deviceProvider_ = provider;
}

MemoryProvider* FusionAllocator::providerFor(const BufferKey& key) {
  return key.device < 0 ? &gHostMemory : deviceProvider_;
}

Status FusionAllocator::acquire(const BufferKey& key, size_t bytes, Lease* out) {
  out->reset();
  MemoryProvider* provider = nullptr;
  size_t capacity = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& pool = free_[key];
    // Best fit: the smallest pooled buffer that is large enough.
    auto best = pool.end();
    for (auto it = pool.begin(); it != pool.end(); ++it) {
      if (it->capacity >= bytes && (best == pool.end() || it->capacity < best->capacity)) best = it;
    }
    if (best != pool.end()) {
      const Buffer buffer = *best;
      pool.erase(best);
      ++stats_.leases;
      ++stats_.leasedNow;
      out->owner_ = this;
      out->key_ = key;
      out->data_ = buffer.data;
      out->capacity_ = buffer.capacity;
      return Status::ok();
    }
    provider = providerFor(key);
    capacity = roundUpCapacity(bytes, threshold_);
  }
  if (provider == nullptr) {
    return Status(Code::kUnsupported,
                  "no memory provider for device " + std::to_string(key.device));
  }
  void* data = provider->allocate(key, capacity);
  if (data == nullptr) {
    // The device may be full of idle fusion buffers of other streams (communicators): free
    // them and try once more before failing a collective the other ranks are committed to.
    std::vector<Freed> idle;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      takeIdle(key.device, &idle);
    }
    if (!idle.empty()) {
      release(idle);
      data = provider->allocate(key, capacity);
    }
  }
  if (data == nullptr) {
    return Status(Code::kNoMemory,
                  "could not allocate a fusion buffer of " + std::to_string(capacity) + " bytes" +
                      (key.device >= 0 ? " on device " + std::to_string(key.device) : ""));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.allocations;
  stats_.bytesHeld += capacity;
  ++stats_.leases;
  ++stats_.leasedNow;
  out->owner_ = this;
  out->key_ = key;
  out->data_ = data;
  out->capacity_ = capacity;
  return Status::ok();
}

void FusionAllocator::giveBack(const BufferKey& key, void* data, size_t capacity) {
  std::vector<Freed> victims;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --stats_.leasedNow;
    auto& pool = free_[key];
    pool.push_back({data, capacity});
    const size_t largest = std::max<size_t>(threshold_, 64 * 1024);
    if (capacity > largest || pool.size() > kMaxPooledPerKey) {
      // Drop the smallest buffer (or the oversized one just returned): bounded memory.
      auto victim = capacity > largest
                        ? pool.end() - 1
                        : std::min_element(pool.begin(), pool.end(), [](auto& a, auto& b) {
                            return a.capacity < b.capacity;
                          });
      victims.push_back({key, *victim});
      stats_.bytesHeld -= victim->capacity;
      pool.erase(victim);
    }
  }
  release(victims);
}

void FusionAllocator::forget(size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  --stats_.leasedNow;
  stats_.bytesHeld -= capacity;
  ++stats_.abandoned;
}

void FusionAllocator::takeIdle(int32_t device, std::vector<Freed>* out) {
  for (auto& [key, pool] : free_) {
    if (key.device != device) continue;
    for (const Buffer& b : pool) {
      out->push_back({key, b});
      stats_.bytesHeld -= b.capacity;
    }
    pool.clear();
  }
}

void FusionAllocator::release(const std::vector<Freed>& buffers) {
  for (const Freed& f : buffers) {
    MemoryProvider* provider = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      provider = providerFor(f.key);
    }
    if (provider != nullptr) provider->release(f.key, f.buffer.data);
  }
}

void FusionAllocator::trim() {
  std::vector<Freed> all;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [key, pool] : free_) {
      for (const Buffer& b : pool) {
        all.push_back({key, b});
        stats_.bytesHeld -= b.capacity;
      }
    }
    free_.clear();
  }
  release(all);
}

void FusionAllocator::trim(const BufferKey& key) {
  std::vector<Freed> freed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(key);
    if (it == free_.end()) return;
    for (const Buffer& b : it->second) {
      freed.push_back({key, b});
      stats_.bytesHeld -= b.capacity;
    }
    free_.erase(it);  // the key is gone for good: no empty pool left behind per dead stream
  }
  release(freed);
}

AllocatorStats FusionAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace hcoll::fusion
