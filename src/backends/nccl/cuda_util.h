#pragma once
// CUDA/NCCL results as Status values, and RAII for the current device of a thread.

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "common/status.h"

namespace hcoll::backends::nccl {

inline Status cudaStatus(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::ok();
  return backendError(std::string(what) + ": " + cudaGetErrorString(e));
}

inline Status ncclStatus(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return Status::ok();
  return backendError(std::string(what) + ": " + ncclGetErrorString(r));
}

#define HCOLL_CUDA(expr) HCOLL_RETURN_IF_ERROR(::hcoll::backends::nccl::cudaStatus((expr), #expr))
#define HCOLL_NCCL(expr) HCOLL_RETURN_IF_ERROR(::hcoll::backends::nccl::ncclStatus((expr), #expr))

// Makes `device` current for the scope and restores the caller's device after, so that hcoll
// never changes the current device of an application thread. Every entry point that creates,
// records or launches anything on a device holds one for its whole duration: CUDA binds events,
// streams and launches to the current device, and the negotiation thread may serve several.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      cudaGetLastError();
      previous_ = -1;
    }
    if (previous_ == device) return;
    status_ = cudaStatus(cudaSetDevice(device), "cudaSetDevice");
    changed_ = status_.isOk() && previous_ >= 0;
  }
  ~DeviceGuard() {
    if (changed_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  const Status& status() const { return status_; }

 private:
  int previous_ = -1;
  bool changed_ = false;
  Status status_;
};

}  // namespace hcoll::backends::nccl
