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
