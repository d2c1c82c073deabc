#include "runtime/output_pool.h"

#include <algorithm>
#include <cstdlib>

namespace hcoll::runtime {

OutputPool& OutputPool::instance() {
  static OutputPool* pool = new OutputPool();  // outlives requests freed during static teardown
  return *pool;
}

void* OutputPool::allocate(size_t bytes) {
  if (bytes < kMinPooledBytes) return std::malloc(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  // Reuse the smallest kept buffer that fits without wasting more than half of it.
  auto best = kept_.end();
  for (auto it = kept_.begin(); it != kept_.end(); ++it) {
    if (it->capacity >= bytes && it->capacity / 2 <= bytes &&
        (best == kept_.end() || it->capacity < best->capacity)) {
      best = it;
    }
  }
  Buffer b{nullptr, bytes};
  if (best != kept_.end()) {
    b = *best;
    keptBytes_ -= b.capacity;
    kept_.erase(best);
  } else {
    b.data = std::malloc(bytes);
    if (b.data == nullptr) return nullptr;
  }
  live_[b.data] = b.capacity;
  return b.data;
}

void OutputPool::release(void* data) {
  if (data == nullptr) return;
  void* unkept = nullptr;      // a small block straight from malloc
  std::vector<void*> evicted;  // kept buffers pushed out by this one (rare: allocates only then)
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(data);
    if (it == live_.end()) {
      unkept = data;
    } else {
      kept_.push_back({data, it->second});
      keptBytes_ += it->second;
      live_.erase(it);
      while (kept_.size() > kMaxPooledBuffers || keptBytes_ > kMaxPooledBytes) {
        evicted.push_back(kept_.front().data);  // the oldest goes first
        keptBytes_ -= kept_.front().capacity;
        kept_.erase(kept_.begin());
      }
    }
  }
  std::free(unkept);
  for (void* p : evicted) std::free(p);
}

size_t OutputPool::keptBuffers() {
  std::lock_guard<std::mutex> lock(mutex_);
  return kept_.size();
}

size_t OutputPool::keptBytes() {
  std::lock_guard<std::mutex> lock(mutex_);
  return keptBytes_;
}

void OutputPool::trim() {
  std::vector<Buffer> kept;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    kept.swap(kept_);
    keptBytes_ = 0;
  }
  for (const Buffer& b : kept) std::free(b.data);
}

}  // namespace hcoll::runtime
