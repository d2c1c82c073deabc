#include "support/test_util.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#if HTEST_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace htest {

hcoll_comm_t world() {
  if (ranksOnThreads()) return tRank->world;
  hcoll_comm_t w = HCOLL_COMM_NULL;
  hcoll_comm_world(&w);
  return w;
}

int rankOf(hcoll_comm_t comm) {
  int r = -1;
  hcoll_comm_rank(comm, &r);
  return r;
}

int sizeOf(hcoll_comm_t comm) {
  int s = -1;
  hcoll_comm_size(comm, &s);
  return s;
}

int worldRank() { return rankOf(world()); }
int worldSize() { return sizeOf(world()); }

hcoll_status_t waitAndFree(hcoll_request_t req, double timeoutSeconds) {
  hcoll_status_t s = hcoll_wait(req, timeoutSeconds);
  if (s != HCOLL_IN_PROGRESS) hcoll_request_free(req);  // still in flight: leave it
  return s;
}

size_t dtypeSize(hcoll_dtype_t t) {
  switch (t) {
    case HCOLL_UINT8: case HCOLL_INT8: case HCOLL_BOOL: return 1;
    case HCOLL_UINT16: case HCOLL_INT16: case HCOLL_FLOAT16: case HCOLL_BFLOAT16: return 2;
    case HCOLL_INT32: case HCOLL_FLOAT32: return 4;
    case HCOLL_INT64: case HCOLL_FLOAT64: return 8;
  }
  return 0;
}

const char* dtypeName(hcoll_dtype_t t) {
  static const char* const names[] = {"uint8",   "int8",     "uint16",  "int16",
                                      "int32",   "int64",    "float16", "bfloat16",
                                      "float32", "float64",  "bool"};
  return names[t];
}

uint16_t toHalf(float f) {
  // Exact for the small integers and halves the tests use, and for infinities and NaN.
  if (f == 0) return std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f)) return 0x7e00;
  if (std::isinf(f)) return std::signbit(f) ? 0xfc00 : 0x7c00;
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int exp = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = (x >> 13) & 0x3ff;
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(exp) << 10) | mant);
}

float fromHalf(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  int exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0 && mant == 0) {
    float z;
    std::memcpy(&z, &sign, 4);
    return z;
  }
  if (exp == 0) return (sign ? -1.f : 1.f) * std::ldexp(static_cast<float>(mant), -24);
  if (exp == 0x1f) {
    if (mant != 0) return std::numeric_limits<float>::quiet_NaN();
    return sign ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  }
  uint32_t bits = sign | (static_cast<uint32_t>(exp - 15 + 127) << 23) | (mant << 13);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t toBfloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return static_cast<uint16_t>(x >> 16);
}

float fromBfloat16(uint16_t b) {
  uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

namespace {

void store(hcoll_dtype_t t, void* base, int64_t i, double v) {
  switch (t) {
    case HCOLL_UINT8: static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v); break;
    case HCOLL_INT8: static_cast<int8_t*>(base)[i] = static_cast<int8_t>(v); break;
    case HCOLL_UINT16: static_cast<uint16_t*>(base)[i] = static_cast<uint16_t>(v); break;
    case HCOLL_INT16: static_cast<int16_t*>(base)[i] = static_cast<int16_t>(v); break;
    case HCOLL_INT32: static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v); break;
    case HCOLL_INT64: static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v); break;
    case HCOLL_FLOAT16: static_cast<uint16_t*>(base)[i] = toHalf(static_cast<float>(v)); break;
    case HCOLL_BFLOAT16: static_cast<uint16_t*>(base)[i] = toBfloat16(static_cast<float>(v)); break;
    case HCOLL_FLOAT32: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case HCOLL_FLOAT64: static_cast<double*>(base)[i] = v; break;
    case HCOLL_BOOL: static_cast<uint8_t*>(base)[i] = v != 0; break;
  }
}

double load(hcoll_dtype_t t, const void* base, int64_t i) {
  switch (t) {
    case HCOLL_UINT8: return static_cast<const uint8_t*>(base)[i];
    case HCOLL_INT8: return static_cast<const int8_t*>(base)[i];
    case HCOLL_UINT16: return static_cast<const uint16_t*>(base)[i];
    case HCOLL_INT16: return static_cast<const int16_t*>(base)[i];
    case HCOLL_INT32: return static_cast<const int32_t*>(base)[i];
    case HCOLL_INT64: return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case HCOLL_FLOAT16: return fromHalf(static_cast<const uint16_t*>(base)[i]);
    case HCOLL_BFLOAT16: return fromBfloat16(static_cast<const uint16_t*>(base)[i]);
    case HCOLL_FLOAT32: return static_cast<const float*>(base)[i];
    case HCOLL_FLOAT64: return static_cast<const double*>(base)[i];
    case HCOLL_BOOL: return static_cast<const uint8_t*>(base)[i];
  }
  return 0;
}

}  // namespace

bool cudaMemory() {
  static const bool kCuda = [] {
    const char* memory = std::getenv("HCOLL_TEST_MEMORY");
    return memory != nullptr && std::string(memory) == "cuda";
  }();
  return kCuda;
}

bool memoryReduces(hcoll_dtype_t t) {
  return !cudaMemory() || (t != HCOLL_INT16 && t != HCOLL_UINT16);
}

namespace {

#if HTEST_WITH_CUDA
int visibleDevices() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

// This rank's device: its local rank's (one GPU per rank, as NCCL needs).
int deviceOfThisRank() {
  int local = 0;
  hcoll_comm_local_rank(world(), &local);
  return local;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::abort();  // a test helper failing: nothing sensible to go on with
  }
}
#endif

}  // namespace

std::string memoryUnavailable() {
  if (!cudaMemory()) return "";
#if HTEST_WITH_CUDA
  const int devices = visibleDevices();
  if (devices == 0) return "HCOLL_TEST_MEMORY=cuda but no CUDA device is visible";
  int localSize = 1;
  hcoll_comm_local_size(world(), &localSize);
  if (devices < localSize) {
    return "HCOLL_TEST_MEMORY=cuda with " + std::to_string(localSize) + " ranks on a node of " +
           std::to_string(devices) + " GPU(s): NCCL needs one GPU per rank";
  }
  return "";
#else
  return "HCOLL_TEST_MEMORY=cuda but the tests were built without CUDA (no NCCL backend)";
#endif
}

std::string memoryUnavailableOnAnyRank() {
  std::string why = memoryUnavailable();
  const int size = worldSize();
  hcoll_comm_t other = HCOLL_COMM_NULL;
  if (!cudaMemory() || size == 1 ||
      hcoll_comm_world_of((worldRank() + 1) % size, &other) == HCOLL_SUCCESS) {
    return why;  // host memory, one rank, or every rank in this process: one answer for all
  }
  // One rank per process: ranks on other nodes may answer otherwise, and a rank that skipped
  // would leave the others waiting in the first collective.
  int32_t unavailable = why.empty() ? 0 : 1;
  int64_t shape[1] = {1};
  hcoll_tensor_t t = {&unavailable, HCOLL_INT32, 1, shape, HCOLL_DEVICE_HOST, nullptr};
  hcoll_request_t req = HCOLL_REQUEST_NULL;
  if (hcoll_allreduce(world(), "htest.memory", &t, &t, HCOLL_MAX, 1, 1, &req) != HCOLL_SUCCESS ||
      waitAndFree(req) != HCOLL_SUCCESS) {
    return "the ranks could not agree on the memory (" + std::string(hcoll_last_error()) + ")";
  }
  if (unavailable != 0 && why.empty()) why = "another rank cannot use CUDA memory";
  return why;
}

Tensor::Tensor(hcoll_dtype_t dtype, std::vector<int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)) {
  bytes_.assign(static_cast<size_t>(elements()) * dtypeSize(dtype) + 1, 0);
}

hcoll_tensor_t Tensor::desc() const {
  hcoll_tensor_t t;
  t.data = const_cast<uint8_t*>(bytes_.data());
  t.dtype = dtype_;
  t.ndim = static_cast<int32_t>(shape_.size());
  t.shape = shape_.data();
  t.device = HCOLL_DEVICE_HOST;
  t.stream = nullptr;
#if HTEST_WITH_CUDA
  if (cudaMemory()) {
    download();  // a second desc() of the same tensor must not lose what the device holds
    const int device = deviceOfThisRank();
    check(cudaSetDevice(device), "cudaSetDevice");
    if (!device_) {
      void* p = nullptr;
      check(cudaMalloc(&p, bytes_.size()), "cudaMalloc");
      device_ = std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
    }
    check(cudaMemcpy(device_.get(), bytes_.data(), bytes_.size(), cudaMemcpyHostToDevice),
          "cudaMemcpy to the device");
    deviceNewer_ = true;
    t.data = device_.get();
    t.device = device;
  }
#endif
  return t;
}

void Tensor::download() const {
#if HTEST_WITH_CUDA
  if (!deviceNewer_) return;
  check(cudaMemcpy(bytes_.data(), device_.get(), bytes_.size(), cudaMemcpyDeviceToHost),
        "cudaMemcpy to the host");
  deviceNewer_ = false;
#endif
}

void* Tensor::data() {
  download();
  return bytes_.data();
}

int64_t Tensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

void Tensor::set(int64_t i, double v) {
  download();
  store(dtype_, bytes_.data(), i, v);
}

double Tensor::get(int64_t i) const {
  download();
  return load(dtype_, bytes_.data(), i);
}

double outputElement(const hcoll_tensor_t& t, int64_t i) {
#if HTEST_WITH_CUDA
  if (t.device != HCOLL_DEVICE_HOST) {  // an output of a CUDA operation: read one element
    uint64_t element = 0;
    const size_t size = dtypeSize(t.dtype);
    check(cudaMemcpy(&element, static_cast<const uint8_t*>(t.data) + i * size, size,
                     cudaMemcpyDeviceToHost),
          "cudaMemcpy of an output element");
    return load(t.dtype, &element, 0);
  }
#endif
  return load(t.dtype, t.data, i);
}

int64_t outputElements(const hcoll_tensor_t& t) {
  int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i) n *= t.shape[i];
  return n;
}

}  // namespace htest
