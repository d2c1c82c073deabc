#pragma once
// Device memory operations of the NCCL backend: scaling (prescale, postscale, AVERAGE) and bool
// normalization by small kernels compiled with NVRTC at first use on each device (so the build
// needs no CUDA compiler), copies and zeroing with cudaMemcpyAsync/cudaMemsetAsync. All work is
// enqueued on the stream given at construction.

#include <cstddef>
#include <memory>
#include <string>

#include "backends/device.h"
#include "common/status.h"
#include "common/types.h"

namespace hcoll::backends::nccl {

// The kernels' CUDA C++ source and the name of the scale kernel of a dtype.
const char* kernelSource();
const char* scaleKernelName(DataType dtype);

// Compiles kernelSource() to PTX for compute capability major.minor. Needs no GPU.
Status compileKernels(int major, int minor, std::string* ptx, std::string* log);

// The loaded kernels of one device (loaded once per process and device, never unloaded).
class DeviceKernels;
Status kernelsFor(int device, DeviceKernels** out);

class DeviceMemoryOps final : public MemoryOps {
 public:
  DeviceMemoryOps(int device, void* stream) : device_(device), stream_(stream) {}
  Status copy(void* dst, const void* src, size_t bytes) override;
  Status scaleCopy(void* dst, const void* src, size_t count, DataType dtype,
                   double factor) override;
  Status zero(void* dst, size_t bytes) override;
  Status normalizeBool(void* data, size_t count) override;

 private:
  int device_;
  void* stream_;
};

}  // namespace hcoll::backends::nccl
