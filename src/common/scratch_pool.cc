#include "common/scratch_pool.h"

namespace hcoll {

ScratchPool::Buffer ScratchPool::take(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (spare_.bytes && spare_.capacity >= bytes) return std::move(spare_);
    spare_ = Buffer{};  // too small: replaced by the new one when that comes back
  }
  Buffer fresh;
  fresh.capacity = bytes > 0 ? bytes : 1;
  fresh.bytes.reset(new uint8_t[fresh.capacity]);
  return fresh;
}

void ScratchPool::give(Buffer buffer) {
  if (!buffer.bytes || buffer.capacity > maxPooledBytes_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!spare_.bytes || spare_.capacity < buffer.capacity) spare_ = std::move(buffer);
}

}  // namespace hcoll
