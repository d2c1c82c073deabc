// NCCL backend: what only CUDA tensors have. Without a GPU, CUDA tensors are rejected with
// UNSUPPORTED. The collectives' values on CUDA tensors are the CUDA instantiation of the
// collective tests (tests/collectives with HCOLL_TEST_MEMORY=cuda: <area>.cuda.np1/np2), and
// streams, every NCCL dtype and the int16 refusal are in test_gpu_streams.cc.

#include "gpu/gpu_util.h"

TEST_CASE("CUDA tensors without a GPU are UNSUPPORTED", "[gpu]") {
  if (gtest::visibleDevices() > 0) return;
  float x = 0;
  int64_t shape[1] = {1};
  hcoll_tensor_t t{&x, HCOLL_FLOAT32, 1, shape, 0, nullptr};
  hcoll_request_t req = nullptr;
  CHECK(hcoll_allreduce(htest::world(), "gpu.none", &t, &t, HCOLL_SUM, 1.0, 1.0, &req) ==
        HCOLL_ERR_UNSUPPORTED);
  CHECK(req == nullptr);
  WARN("SKIPPED: no CUDA device");
}

TEST_CASE("CUDA tensors whose data is host memory fail at submission with INVALID_ARGUMENT",
          "[gpu]") {
  if (gtest::skipUnlessGpuPerRank()) return;
  // Given to NCCL, a host pointer is an illegal address on the device: a sticky CUDA error that
  // ends every later CUDA call of the process (seen on an H200, 2026-12-04). Refused up front.
  std::vector<float> host(1024, 1.0f);
  const std::vector<int64_t> shape{1024};
  hcoll_tensor_t t = gtest::cudaTensor(host.data(), HCOLL_FLOAT32, shape, nullptr);
  hcoll_request_t req = nullptr;
  CHECK(hcoll_allreduce(htest::world(), "gpu.hostptr", &t, &t, HCOLL_SUM, 1.0, 1.0, &req) ==
        HCOLL_ERR_INVALID_ARGUMENT);
  CHECK(req == nullptr);
  CHECK(std::string(hcoll_last_error()).find("host memory") != std::string::npos);
  CHECK(hcoll_allgather(htest::world(), "gpu.hostptr.ag", &t, &req) == HCOLL_ERR_INVALID_ARGUMENT);
  CHECK(req == nullptr);
  // The process's CUDA context is intact: the same call on device memory works.
  gtest::DeviceBuffer d(host.size() * sizeof(float));
  gtest::upload(d.ptr, host);
  t.data = d.ptr;
  REQUIRE(hcoll_allreduce(htest::world(), "gpu.hostptr", &t, &t, HCOLL_SUM, 1.0, 1.0, &req) ==
          HCOLL_SUCCESS);
  HCOLL_REQUIRE_OK(htest::waitAndFree(req));
  const float n = static_cast<float>(htest::worldSize());
  for (float v : gtest::download<float>(d.ptr, host.size())) REQUIRE(v == n);
}
