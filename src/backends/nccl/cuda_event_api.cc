// EventApi (event_api.h) over the CUDA runtime: the CUDA events the NCCL backend orders its
// streams with; tests substitute a fake EventApi.
#include "backends/nccl/cuda_util.h"
#include "backends/nccl/event_api.h"

namespace hcoll::backends::nccl {
namespace {

class CudaEventApi final : public EventApi {
 public:
  Status createEvent(void** event) override {
    cudaEvent_t e = nullptr;
    HCOLL_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    *event = e;
    return Status::ok();
  }
  void destroyEvent(void* event) override { cudaEventDestroy(static_cast<cudaEvent_t>(event)); }
  Status record(void* event, void* stream) override {
    return cudaStatus(
        cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)),
        "cudaEventRecord");
  }
  Status streamWait(void* stream, void* event) override {
    return cudaStatus(
        cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0),
        "cudaStreamWaitEvent");
  }
  EventState query(void* event, Status* failure) override {
    cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (e == cudaSuccess) return EventState::kDone;
    if (e == cudaErrorNotReady) return EventState::kNotReady;
    *failure = cudaStatus(e, "cudaEventQuery");
    return EventState::kFailed;
  }
};

}  // namespace

EventApi& cudaEventApi() {
  static CudaEventApi api;
  return api;
}

}  // namespace hcoll::backends::nccl
