#pragma once
// Runtime-owned host outputs (allgather, alltoall, reducescatter results). A fresh large malloc
// is an mmap whose every page faults on first write, and its free unmaps it again: an allgather
// of 64 MiB per rank spent four times its transfer time faulting in a new 128 MiB output on every
// call. Recently released large outputs are therefore kept, bounded, and handed out again.

#include <cstddef>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace hcoll::runtime {

class OutputPool {
 public:
  static constexpr size_t kMinPooledBytes = 1u << 20;  // smaller blocks come from malloc's arenas
  static constexpr size_t kMaxPooledBuffers = 4;
  static constexpr size_t kMaxPooledBytes = 512u << 20;

  static OutputPool& instance();
  OutputPool() = default;
  ~OutputPool() { trim(); }

  // At least `bytes` of host memory (null when out of memory).
  void* allocate(size_t bytes);
  // Returns memory from allocate(); it is kept for reuse or freed.
  void release(void* data);
  // The same, for a caller that knows what it asked allocate() for: a block under
  // kMinPooledBytes never was the pool's and is freed without the lock.
  void release(void* data, size_t bytes) {
    if (bytes < kMinPooledBytes) return std::free(data);
    release(data);
  }
  // Frees every kept buffer (at shutdown).
  void trim();
  // Buffers kept for reuse right now, and their bytes.
  size_t keptBuffers();
  size_t keptBytes();

 private:
  struct Buffer {
    void* data;
    size_t capacity;
  };
  std::mutex mutex_;
  std::unordered_map<void*, size_t> live_;  // pooled-size allocations handed out, by address
  std::vector<Buffer> kept_;                // released, ready for reuse (oldest first)
  size_t keptBytes_ = 0;
};

}  // namespace hcoll::runtime
