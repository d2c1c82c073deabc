#include "backends/device.h"

#include <atomic>
#include <cstring>

#include "backends/registry.h"
#include "common/copy_bytes.h"
#include "fusion/pack.h"

namespace hcoll::backends {
namespace {

class HostMemoryOps final : public MemoryOps {
 public:
  Status copy(void* dst, const void* src, size_t bytes) override {
    moveBytes(dst, src, bytes);
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
  // The first backend of the build that serves CUDA memory (the registry is built in order).
  static DeviceBackend* const kBuilt = [] {
    for (const BackendInfo* info : registeredBackends()) {
      if ((info->memory & kCudaMemory) != 0 && info->device != nullptr) return info->device();
    }
    return static_cast<DeviceBackend*>(nullptr);
  }();
  return kBuilt;
}

}  // namespace hcoll::backends
