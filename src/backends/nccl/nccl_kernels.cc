#include "backends/nccl/nccl_kernels.h"

#include <nvrtc.h>

#include <map>
#include <mutex>
#include <vector>

#include "backends/nccl/cuda_util.h"

namespace hcoll::backends::nccl {
namespace {

// Integers are scaled in double and truncated, float16/bfloat16 go through float (round to
// nearest even), exactly like fusion::scaleCopy on the host.
const char kSource[] = R"CUDA(
typedef unsigned char u8; typedef signed char i8; typedef unsigned short u16; typedef short i16;
typedef int i32; typedef long long i64; typedef unsigned long long u64; typedef unsigned int u32;

__device__ float halfToFloat(u16 h) {
  u32 sign = (u32)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, bits;
  if (exp == 0) {
    if (mant == 0) return __uint_as_float(sign);
    return (sign ? -1.0f : 1.0f) * (float)mant * 5.9604644775390625e-8f;  // subnormal: m * 2^-24
  }
  if (exp == 0x1f) bits = sign | 0x7f800000u | (mant << 13);
  else bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  return __uint_as_float(bits);
}
__device__ u16 floatToHalf(float f) {
  u32 x = __float_as_uint(f), sign = (x >> 16) & 0x8000u, absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return (u16)(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0));
  if (absx >= 0x477ff000u) return (u16)(sign | 0x7c00u);
  if (absx < 0x38800000u) return (u16)(sign | (u32)rintf(__uint_as_float(absx) * 16777216.0f));
  u32 rounded = absx + 0xfffu + ((absx >> 13) & 1u);
  return (u16)(sign | ((rounded - 0x38000000u) >> 13));
}
__device__ float bf16ToFloat(u16 b) { return __uint_as_float((u32)b << 16); }
__device__ u16 floatToBf16(float f) {
  u32 x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (u16)((x >> 16) | 0x40u);
  return (u16)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

#define HCOLL_SCALE(NAME, T)                                                              \
  extern "C" __global__ void NAME(T* dst, const T* src, u64 n, double factor) {          \
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n;                      \
         i += (u64)gridDim.x * blockDim.x)                                                \
      dst[i] = (T)((double)src[i] * factor);                                              \
  }
HCOLL_SCALE(hcoll_scale_u8, u8)
HCOLL_SCALE(hcoll_scale_i8, i8)
HCOLL_SCALE(hcoll_scale_u16, u16)
HCOLL_SCALE(hcoll_scale_i16, i16)
HCOLL_SCALE(hcoll_scale_i32, i32)
HCOLL_SCALE(hcoll_scale_i64, i64)
HCOLL_SCALE(hcoll_scale_f64, double)
extern "C" __global__ void hcoll_scale_f32(float* dst, const float* src, u64 n, double factor) {
  for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
    dst[i] = src[i] * (float)factor;
}
extern "C" __global__ void hcoll_scale_f16(u16* dst, const u16* src, u64 n, double factor) {
  const float f = (float)factor;
  for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
    dst[i] = floatToHalf(halfToFloat(src[i]) * f);
}
extern "C" __global__ void hcoll_scale_bf16(u16* dst, const u16* src, u64 n, double factor) {
  const float f = (float)factor;
  for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
    dst[i] = floatToBf16(bf16ToFloat(src[i]) * f);
}
extern "C" __global__ void hcoll_normalize_bool(u8* data, u64 n, double unused) {
  for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
    data[i] = data[i] != 0;
}
)CUDA";

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 4096;  // grid-stride loops cover the rest

}  // namespace

class DeviceKernels {
 public:
  cudaKernel_t scale[kNumDataTypes] = {};
  cudaKernel_t normalizeBool = nullptr;
  cudaLibrary_t library = nullptr;
};

const char* kernelSource() {
  return kSource;
}

const char* scaleKernelName(DataType dtype) {
  static const char* const kNames[kNumDataTypes] = {
      "hcoll_scale_u8",  "hcoll_scale_i8",  "hcoll_scale_u16", "hcoll_scale_i16",
      "hcoll_scale_i32", "hcoll_scale_i64", "hcoll_scale_f16", "hcoll_scale_bf16",
      "hcoll_scale_f32", "hcoll_scale_f64", "hcoll_scale_u8"};  // bool is never scaled
  return kNames[static_cast<int>(dtype)];
}

Status compileKernels(int major, int minor, std::string* ptx, std::string* log) {
  nvrtcProgram prog = nullptr;
  nvrtcResult r = nvrtcCreateProgram(&prog, kSource, "hcoll_kernels.cu", 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS)
    return backendError(std::string("nvrtcCreateProgram: ") + nvrtcGetErrorString(r));
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> owner(
      &prog, [](nvrtcProgram* p) { nvrtcDestroyProgram(p); });
  const std::string arch = "--gpu-architecture=compute_" + std::to_string(major * 10 + minor);
  const char* options[] = {arch.c_str(), "--std=c++17"};
  r = nvrtcCompileProgram(prog, 2, options);
  size_t logSize = 0;
  if (nvrtcGetProgramLogSize(prog, &logSize) == NVRTC_SUCCESS && logSize > 1 && log) {
    log->resize(logSize);
    nvrtcGetProgramLog(prog, log->data());
  }
  if (r != NVRTC_SUCCESS) {
    return backendError(std::string("compiling the device kernels (") + arch +
                        "): " + nvrtcGetErrorString(r) + (log ? ": " + *log : ""));
  }
  size_t size = 0;
  if ((r = nvrtcGetPTXSize(prog, &size)) != NVRTC_SUCCESS ||
      (ptx->resize(size), r = nvrtcGetPTX(prog, ptx->data())) != NVRTC_SUCCESS) {
    return backendError(std::string("nvrtcGetPTX: ") + nvrtcGetErrorString(r));
  }
  return Status::ok();
}

Status kernelsFor(int device, DeviceKernels** out) {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<DeviceKernels>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find(device);
  if (it != loaded.end()) {
    *out = it->second.get();
    return Status::ok();
  }
  DeviceGuard guard(device);
  HCOLL_RETURN_IF_ERROR(guard.status());
  int major = 0, minor = 0;
  HCOLL_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  HCOLL_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  std::string ptx, log;
  HCOLL_RETURN_IF_ERROR(compileKernels(major, minor, &ptx, &log));
  auto k = std::make_unique<DeviceKernels>();
  HCOLL_CUDA(
      cudaLibraryLoadData(&k->library, ptx.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  for (int t = 0; t < kNumDataTypes; ++t) {
    HCOLL_CUDA(
        cudaLibraryGetKernel(&k->scale[t], k->library, scaleKernelName(static_cast<DataType>(t))));
  }
  HCOLL_CUDA(cudaLibraryGetKernel(&k->normalizeBool, k->library, "hcoll_normalize_bool"));
  *out = k.get();
  loaded.emplace(device, std::move(k));
  return Status::ok();
}

namespace {

Status launch(cudaKernel_t kernel, void* dst, const void* src, size_t count, double factor,
              void* stream, bool withSource) {
  unsigned long long n = count;
  void* args3[] = {&dst, &n, &factor};
  void* args4[] = {&dst, &src, &n, &factor};
  const size_t blocks = std::min<size_t>((count + kThreads - 1) / kThreads, kMaxBlocks);
  return cudaStatus(
      cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(blocks), dim3(kThreads),
                       withSource ? args4 : args3, 0, static_cast<cudaStream_t>(stream)),
      "cudaLaunchKernel");
}

}  // namespace

// Each operation makes its device current: the negotiation thread may drive planes on several
// devices, and a launch or async copy goes to the current device's context.
Status DeviceMemoryOps::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return Status::ok();
  DeviceGuard guard(device_);
  HCOLL_RETURN_IF_ERROR(guard.status());
  return cudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                                    static_cast<cudaStream_t>(stream_)),
                    "cudaMemcpyAsync");
}

Status DeviceMemoryOps::scaleCopy(void* dst, const void* src, size_t count, DataType dtype,
                                  double factor) {
  if (factor == 1.0) return copy(dst, src, count * dataTypeSize(dtype));
  if (count == 0 || dtype == DataType::kBool) return Status::ok();
  DeviceGuard guard(device_);
  HCOLL_RETURN_IF_ERROR(guard.status());
  DeviceKernels* k = nullptr;
  HCOLL_RETURN_IF_ERROR(kernelsFor(device_, &k));
  return launch(k->scale[static_cast<int>(dtype)], dst, src, count, factor, stream_, true);
}

Status DeviceMemoryOps::zero(void* dst, size_t bytes) {
  if (bytes == 0) return Status::ok();
  DeviceGuard guard(device_);
  HCOLL_RETURN_IF_ERROR(guard.status());
  return cudaStatus(cudaMemsetAsync(dst, 0, bytes, static_cast<cudaStream_t>(stream_)),
                    "cudaMemsetAsync");
}

Status DeviceMemoryOps::normalizeBool(void* data, size_t count) {
  if (count == 0) return Status::ok();
  DeviceGuard guard(device_);
  HCOLL_RETURN_IF_ERROR(guard.status());
  DeviceKernels* k = nullptr;
  HCOLL_RETURN_IF_ERROR(kernelsFor(device_, &k));
  return launch(k->normalizeBool, data, nullptr, count, 0.0, stream_, false);
}

}  // namespace hcoll::backends::nccl
