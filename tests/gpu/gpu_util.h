#pragma once
// Helpers of the GPU tests: the collective decision to skip (no GPU, or fewer GPUs on a node
// than ranks on it: NCCL refuses two ranks of one communicator on one GPU, "Duplicate GPU
// detected"), this rank's device, device buffers and streams, uploads and downloads.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
#include <vector>

#include "support/test_util.h"

namespace gtest {

inline int visibleDevices() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

inline int localRank() {
  int r = 0;
  hcoll_comm_local_rank(htest::world(), &r);
  return r;
}

inline int localSize() {
  int n = 1;
  hcoll_comm_local_size(htest::world(), &n);
  return n;
}

// Collective over the world (every rank must call it at the same point): true, with a
// "SKIPPED: ..." warning, unless every rank has a GPU of its own. The ranks agree with a host
// allreduce, so no rank submits a device collective its peers skip.
inline bool skipUnlessGpuPerRank() {
  const int devices = visibleDevices();
  const int ranksHere = localSize();
  int32_t ok = devices >= ranksHere ? 1 : 0;
  int64_t shape[1] = {1};
  hcoll_tensor_t t{&ok, HCOLL_INT32, 1, shape, HCOLL_DEVICE_HOST, nullptr};
  hcoll_request_t req = nullptr;
  REQUIRE(hcoll_allreduce(htest::world(), nullptr, &t, &t, HCOLL_MIN, 1.0, 1.0, &req) ==
          HCOLL_SUCCESS);
  REQUIRE(htest::waitAndFree(req) == HCOLL_SUCCESS);
  if (ok == 1) return false;
  if (devices == 0) {
    WARN("SKIPPED: no CUDA device");
  } else {
    WARN("SKIPPED: " << ranksHere << " ranks on this node but " << devices
                     << " visible GPU(s); NCCL refuses two ranks of one communicator on one GPU "
                        "(\"Duplicate GPU detected\")");
  }
  return true;
}

// Rank r of a node uses GPU r (skipUnlessGpuPerRank made sure there is one).
inline int myDevice() {
  return localRank() % std::max(1, visibleDevices());
}

struct DeviceBuffer {
  explicit DeviceBuffer(size_t bytes) {
    REQUIRE(cudaSetDevice(myDevice()) == cudaSuccess);
    REQUIRE(cudaMalloc(&ptr, bytes == 0 ? 1 : bytes) == cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* ptr = nullptr;
};

struct Stream {
  Stream() {
    REQUIRE(cudaSetDevice(myDevice()) == cudaSuccess);
    REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  }
  ~Stream() { cudaStreamDestroy(s); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t s = nullptr;
};

inline hcoll_tensor_t cudaTensor(void* data, hcoll_dtype_t dtype, const std::vector<int64_t>& shape,
                                 cudaStream_t stream) {
  hcoll_tensor_t t{};
  t.data = data;
  t.dtype = dtype;
  t.ndim = static_cast<int32_t>(shape.size());
  t.shape = shape.data();
  t.device = myDevice();
  t.stream = stream;
  return t;
}

template <class T>
std::vector<T> download(const void* ptr, size_t n) {
  std::vector<T> v(n);
  REQUIRE(cudaMemcpy(v.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
  return v;
}

template <class T>
void upload(void* ptr, const std::vector<T>& v) {
  REQUIRE(cudaMemcpy(ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
}

// A host tensor's bytes to and from device memory.
inline void uploadTensor(void* ptr, htest::Tensor& t) {
  const size_t bytes = static_cast<size_t>(t.elements()) * htest::dtypeSize(t.dtype());
  REQUIRE(cudaMemcpy(ptr, t.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess);
}
inline void downloadTensor(htest::Tensor& t, const void* ptr) {
  const size_t bytes = static_cast<size_t>(t.elements()) * htest::dtypeSize(t.dtype());
  REQUIRE(cudaMemcpy(t.data(), ptr, bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
}

}  // namespace gtest
