#pragma once
// CUDA/NCCL results as Status values, and RAII for the current device of a thread.

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "runtime/status.h"

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
// never changes the current device of an application thread.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    status_ = previous_ == device ? Status::ok() : cudaStatus(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceGuard() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  const Status& status() const { return status_; }

 private:
  int previous_ = -1;
  Status status_;
};

}  // namespace hcoll::backends::nccl
