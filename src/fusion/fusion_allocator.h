#pragma once
// The process-wide pool of fusion buffers, shared by every communicator and negotiation thread.
// Buffers are keyed by (device, stream): a lease is exclusive (two communicators never write one
// buffer at once), returned buffers are pooled for reuse so that a steady state allocates
// nothing, and the pool is bounded (a few buffers per key, none kept above the threshold).
// Raw allocations and frees happen outside the allocator's lock: cudaFree synchronizes the whole
// device, and under the lock it would stall every communicator, host ones included.

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "common/status.h"

namespace hcoll::fusion {

struct BufferKey {
  int32_t device = -1;     // -1 = host memory
  void* stream = nullptr;  // CUDA stream the buffer is used on (nullptr for host)
  bool operator<(const BufferKey& o) const {
    return device != o.device ? device < o.device : stream < o.stream;
  }
};

// Allocates the raw memory of one kind of device; host memory is built in, a device backend
// registers its own.
class MemoryProvider {
 public:
  virtual ~MemoryProvider() = default;
  virtual void* allocate(const BufferKey& key, size_t bytes) = 0;
  virtual void release(const BufferKey& key, void* ptr) = 0;
};

class FusionAllocator;

// Exclusive use of one buffer until destroyed (then it goes back to the pool).
class Lease {
 public:
  Lease() = default;
  Lease(Lease&& o) noexcept { *this = std::move(o); }
  Lease& operator=(Lease&& o) noexcept;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() { reset(); }
  void* data() const { return data_; }
  size_t capacity() const { return capacity_; }
  void reset();
  // Gives up the buffer without returning it to the pool or freeing it: for a buffer the device
  // may still write (its fence failed or was abandoned), which no one else may ever lease.
  void abandon();

 private:
  friend class FusionAllocator;
  FusionAllocator* owner_ = nullptr;
  BufferKey key_;
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

struct AllocatorStats {
  uint64_t allocations = 0;  // raw allocations made since creation
  uint64_t leases = 0;       // leases handed out
  size_t bytesHeld = 0;      // bytes currently allocated (leased or pooled)
  size_t leasedNow = 0;      // leases currently outstanding
  uint64_t abandoned = 0;    // leases given up with Lease::abandon() (their memory is leaked)
};

class FusionAllocator {
 public:
  static constexpr size_t kMaxPooledPerKey = 4;

  // The process-wide instance.
  static FusionAllocator& instance();

  // Buffers above `bytes` are not pooled (they are freed when their lease ends).
  void setThreshold(size_t bytes);
  // Memory for keys with device >= 0 (host memory is used for device -1).
  void setDeviceProvider(MemoryProvider* provider);

  // A buffer of at least `bytes` for `key`; kNoMemory if it cannot be allocated even after the
  // idle buffers of the key's device were freed to make room.
  Status acquire(const BufferKey& key, size_t bytes, Lease* out);
  // Frees every pooled buffer (leases outstanding are freed when they end).
  void trim();
  // Frees the pooled buffers of one key (a device plane whose stream is being destroyed).
  void trim(const BufferKey& key);
  AllocatorStats stats() const;

 private:
  friend class Lease;
  struct Buffer {
    void* data;
    size_t capacity;
  };
  struct Freed {  // a buffer taken out of the pool under the lock, freed after it
    BufferKey key;
    Buffer buffer;
  };
  void giveBack(const BufferKey& key, void* data, size_t capacity);
  void forget(size_t capacity);
  MemoryProvider* providerFor(const BufferKey& key);
  // Takes the pooled buffers of `device` out of the pool (caller holds the lock).
  void takeIdle(int32_t device, std::vector<Freed>* out);
  void release(const std::vector<Freed>& buffers);

  mutable std::mutex mutex_;
  size_t threshold_ = 128u << 20;
  MemoryProvider* deviceProvider_ = nullptr;
  std::map<BufferKey, std::vector<Buffer>> free_;
  AllocatorStats stats_;
};

}  // namespace hcoll::fusion
