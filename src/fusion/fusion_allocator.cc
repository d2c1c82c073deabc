#include "fusion/fusion_allocator.h"

#include <algorithm>
#include <cstdlib>

namespace hcoll::fusion {
namespace {

class HostMemory final : public MemoryProvider {
 public:
  void* allocate(const BufferKey&, size_t bytes) override {
    // 64-byte alignment keeps every dtype aligned at any packed offset we use.
    return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
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
  std::lock_guard<std::mutex> lock(mutex_);
  out->reset();
  auto& pool = free_[key];
  // Best fit: the smallest pooled buffer that is large enough.
  auto best = pool.end();
  for (auto it = pool.begin(); it != pool.end(); ++it) {
    if (it->capacity >= bytes && (best == pool.end() || it->capacity < best->capacity)) best = it;
  }
  Buffer buffer{nullptr, 0};
  if (best != pool.end()) {
    buffer = *best;
    pool.erase(best);
  } else {
    MemoryProvider* provider = providerFor(key);
    if (provider == nullptr) {
      return Status(Code::kUnsupported, "no memory provider for device " + std::to_string(key.device));
    }
    buffer.capacity = roundUpCapacity(bytes, threshold_);
    buffer.data = provider->allocate(key, buffer.capacity);
    if (buffer.data == nullptr) {
      return Status(Code::kNoMemory,
                    "could not allocate a fusion buffer of " + std::to_string(buffer.capacity) + " bytes");
    }
    ++stats_.allocations;
    stats_.bytesHeld += buffer.capacity;
  }
  ++stats_.leases;
  ++stats_.leasedNow;
  out->owner_ = this;
  out->key_ = key;
  out->data_ = buffer.data;
  out->capacity_ = buffer.capacity;
  return Status::ok();
}

void FusionAllocator::giveBack(const BufferKey& key, void* data, size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  --stats_.leasedNow;
  auto& pool = free_[key];
  pool.push_back({data, capacity});
  if (capacity > std::max<size_t>(threshold_, 64 * 1024) || pool.size() > kMaxPooledPerKey) {
    // Drop the smallest buffer (or the oversized one just returned): bounded memory.
    auto victim = capacity > std::max<size_t>(threshold_, 64 * 1024)
                      ? pool.end() - 1
                      : std::min_element(pool.begin(), pool.end(), [](auto& a, auto& b) {
                          return a.capacity < b.capacity;
                        });
    providerFor(key)->release(key, victim->data);
    stats_.bytesHeld -= victim->capacity;
    pool.erase(victim);
  }
}

void FusionAllocator::trim() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [key, pool] : free_) {
    for (Buffer& b : pool) {
      providerFor(key)->release(key, b.data);
      stats_.bytesHeld -= b.capacity;
    }
    pool.clear();
  }
}

AllocatorStats FusionAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace hcoll::fusion
