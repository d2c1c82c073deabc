#include "backends/nccl/nccl_backend.h"

#include <nccl.h>

#include <mutex>
#include <string>

#include "backends/nccl/cuda_util.h"
#include "backends/nccl/nccl_channel.h"
#include "backends/nccl/nccl_types.h"
#include "fusion/fusion_allocator.h"
#include "common/logging.h"

namespace hcoll::backends::nccl {
namespace {

// Fusion buffers on a device: plain cudaMalloc (the pool makes it rare).
class CudaMemoryProvider final : public fusion::MemoryProvider {
 public:
  void* allocate(const fusion::BufferKey& key, size_t bytes) override {
    DeviceGuard guard(key.device);
    void* p = nullptr;
    if (!guard.status().isOk() || cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;
    return p;
  }
  void release(const fusion::BufferKey& key, void* ptr) override {
    DeviceGuard guard(key.device);
    cudaFree(ptr);
  }
};

class NcclDeviceBackend final : public DeviceBackend {
 public:
  bool available() override {
    std::call_once(probed_, [this] {
      int count = 0;
      cudaError_t e = cudaGetDeviceCount(&count);  // no driver or no GPU: an error, not a crash
      if (e != cudaSuccess) {
        cudaGetLastError();  // clear the sticky-free error so later calls are not confused
        logging::get("nccl")->info("NCCL backend disabled: {}", cudaGetErrorString(e));
        count = 0;
      }
      deviceCount_ = count;
      if (count > 0) fusion::FusionAllocator::instance().setDeviceProvider(&provider_);
    });
    return deviceCount_ > 0;
  }

  Status mark(int32_t device, void* stream, StreamMarkerPtr* out) override {
    if (!available()) return Status(Code::kUnsupported, "no CUDA device is visible");
    if (device >= deviceCount_) {
      return invalidArgument("device " + std::to_string(device) + " is not below the " +
                             std::to_string(deviceCount_) + " visible CUDA devices");
    }
    DeviceGuard guard(device);
    HCOLL_RETURN_IF_ERROR(guard.status());
    cudaEvent_t event = nullptr;
    HCOLL_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    auto marker = std::make_unique<CudaMarker>(device, event);
    HCOLL_CUDA(cudaEventRecord(event, static_cast<cudaStream_t>(stream)));
    *out = std::move(marker);
    return Status::ok();
  }

  Status checkReduction(DataType dtype) const override {
    // The operator does not matter for which types NCCL has; any one asks the same question.
    ncclDataType_t type;
    ncclRedOp_t op;
    return toNccl(dtype, ReduceOp::kSum, &type, &op);
  }

  Status checkMemory(int32_t device, const void* data) const override {
    if (data == nullptr) return Status::ok();  // an empty tensor
    cudaPointerAttributes attributes{};
    if (cudaError_t e = cudaPointerGetAttributes(&attributes, data); e != cudaSuccess) {
      cudaGetLastError();  // not sticky: clear it for the caller's next CUDA call
      return invalidArgument("data is not CUDA memory (cudaPointerGetAttributes: " +
                             std::string(cudaGetErrorString(e)) + ")");
    }
    switch (attributes.type) {
      case cudaMemoryTypeUnregistered:
        return invalidArgument("data is ordinary host memory, not memory of CUDA device " +
                               std::to_string(device) +
                               " (host tensors say device HCOLL_DEVICE_HOST)");
      case cudaMemoryTypeDevice:
        if (attributes.device != device) {
          return invalidArgument("data is memory of CUDA device " +
                                 std::to_string(attributes.device) + ", not of device " +
                                 std::to_string(device));
        }
        return Status::ok();
      default:  // pinned host or managed memory: addressable from the device
        return Status::ok();
    }
  }

  Status create(Channel& control, int32_t device,
                std::unique_ptr<DeviceCollectives>* out) override {
    // Only reachable after a submission passed mark(), so a device is visible here.
    if (!available()) return Status(Code::kUnsupported, "no CUDA device is visible");
    return NcclChannel::create(control, device, out);
  }

  void* allocate(int32_t device, size_t bytes) override {
    if (!available()) return nullptr;
    return provider_.allocate(fusion::BufferKey{device, nullptr}, bytes);
  }
  void release(int32_t device, void* ptr) override {
    provider_.release(fusion::BufferKey{device, nullptr}, ptr);
  }

 private:
  std::once_flag probed_;
  int deviceCount_ = 0;
  CudaMemoryProvider provider_;
};

}  // namespace

DeviceBackend* ncclDeviceBackend() {
  static NcclDeviceBackend backend;
  return &backend;
}

namespace {
#define HCOLL_NCCL_STR2_(x) #x
#define HCOLL_NCCL_STR_(x) HCOLL_NCCL_STR2_(x)
constexpr const char* kBuiltAgainst = "NCCL " HCOLL_NCCL_STR_(NCCL_MAJOR) "." HCOLL_NCCL_STR_(
    NCCL_MINOR) "." HCOLL_NCCL_STR_(NCCL_PATCH);
}  // namespace

const BackendInfo& backendInfo() {
  static const BackendInfo kInfo = {
      "nccl",
      kCudaMemory,
      kAllOperations & ~opBit(OpKind::kCommSplit) & ~opBit(OpKind::kCommCreate),
      /*priority=*/0,
      /*create=*/nullptr,
      ncclDeviceBackend,
      [] { return kBuiltAgainst; },
      /*abortJob=*/nullptr,
  };
  return kInfo;
}

}  // namespace hcoll::backends::nccl
