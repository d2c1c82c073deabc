#include "backends/device.h"

#include <atomic>
#include <cstring>

#include "fusion/pack.h"
#include "hcoll/config.h"

#if HCOLL_WITH_NCCL
#include "backends/nccl/nccl_backend.h"
#endif

namespace hcoll::backends {
namespace {

class HostMemoryOps final : public MemoryOps {
 public:
  Status copy(void* dst, const void* src, size_t bytes) override {
    if (bytes != 0 && dst != src) std::memmove(dst, src, bytes);
    return Status::ok();
  }
  Status scaleCopy(void* dst, const void* src, size_t count, DataType dtype,
                   double factor) override {
    fusion::scaleCopy(dst, src, count, dtype, factor);
    return Status::ok();
  }
  Status zero(void* dst, size_t bytes) override {
    if (bytes != 0) std::memset(dst, 0, bytes);
    return Status::ok();
  }
  Status normalizeBool(void* data, size_t count) override {
    fusion::normalizeBool(data, count);
    return Status::ok();
  }
};

}  // namespace

MemoryOps& hostMemoryOps() {
  static HostMemoryOps ops;
  return ops;
}

namespace {
std::atomic<DeviceBackend*> gTestBackend{nullptr};
}  // namespace

DeviceBackend* setDeviceBackendForTesting(DeviceBackend* backend) {
  return gTestBackend.exchange(backend);
}

DeviceBackend* deviceBackend() {
  if (DeviceBackend* b = gTestBackend.load()) return b;
#if HCOLL_WITH_NCCL
  return nccl::ncclDeviceBackend();
#else
  return nullptr;
#endif
}

}  // namespace hcoll::backends
