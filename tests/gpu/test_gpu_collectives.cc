// NCCL backend on CUDA tensors, one GPU per rank (local rank r on GPU r): exact small-integer
// inputs, results checked against a direct computation. Without a GPU it checks that CUDA
// tensors are rejected with UNSUPPORTED and prints "SKIPPED: no CUDA device"; with more ranks
// on a node than GPUs the device cases print "SKIPPED: ..." and pass (NCCL cannot run them).

#include <numeric>
#include <vector>

#include "gpu/gpu_util.h"

using gtest::cudaTensor;
using gtest::DeviceBuffer;
using gtest::download;
using gtest::myDevice;
using gtest::Stream;
using gtest::upload;

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

TEST_CASE("GPU allreduce: sum, average with scaling, in place, fused group", "[gpu]") {
  if (gtest::skipUnlessGpuPerRank()) return;
  const int r = htest::worldRank(), n = htest::worldSize();
  Stream stream;
  for (int64_t count : {int64_t{1}, int64_t{1000}, int64_t{1} << 20}) {
    std::vector<int64_t> shape{count};
    DeviceBuffer in(count * 4), out(count * 4);
    std::vector<float> host(count);
    for (int64_t i = 0; i < count; ++i) host[i] = static_cast<float>((i % 7) + r);
    upload(in.ptr, host);
    hcoll_tensor_t ti = cudaTensor(in.ptr, HCOLL_FLOAT32, shape, stream.s);
    hcoll_tensor_t to = cudaTensor(out.ptr, HCOLL_FLOAT32, shape, stream.s);
    hcoll_request_t req;
    HCOLL_REQUIRE_OK(hcoll_allreduce(htest::world(), nullptr, &ti, &to, HCOLL_SUM, 1.0, 1.0, &req));
    HCOLL_REQUIRE_OK(htest::waitAndFree(req));
    auto got = download<float>(out.ptr, count);
    const float rankSum = n * (n - 1) / 2.0f;
    for (int64_t i = 0; i < count; ++i) REQUIRE(got[i] == (i % 7) * n + rankSum);
    // AVERAGE with prescale 2 and postscale 0.5, in place: the average itself.
    HCOLL_REQUIRE_OK(
        hcoll_allreduce(htest::world(), nullptr, &ti, &ti, HCOLL_AVERAGE, 2.0, 0.5, &req));
    HCOLL_REQUIRE_OK(htest::waitAndFree(req));
    got = download<float>(in.ptr, count);
    for (int64_t i = 0; i < count; ++i) REQUIRE(got[i] == Approx((i % 7) + rankSum / n));
  }
  // A group of int32 tensors of different sizes goes through one fusion buffer.
  std::vector<std::vector<int64_t>> shapes{{3}, {0}, {17, 2}};
  std::vector<std::unique_ptr<DeviceBuffer>> bufs;
  std::vector<hcoll_tensor_t> ts;
  for (auto& s : shapes) {
    size_t e =
        static_cast<size_t>(std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>()));
    bufs.push_back(std::make_unique<DeviceBuffer>(e * 4));
    upload(bufs.back()->ptr, std::vector<int32_t>(e, r + 1));
    ts.push_back(cudaTensor(bufs.back()->ptr, HCOLL_INT32, s, stream.s));
  }
  hcoll_request_t req;
  HCOLL_REQUIRE_OK(hcoll_grouped_allreduce(htest::world(), "gpu.group", 3, ts.data(), ts.data(),
                                           HCOLL_MAX, 1.0, 1.0, &req));
  HCOLL_REQUIRE_OK(htest::waitAndFree(req));
  for (int k : {0, 2}) {
    auto got = download<int32_t>(bufs[k]->ptr, k == 0 ? 3 : 34);
    for (int32_t v : got) REQUIRE(v == n);
  }
}

TEST_CASE("GPU allgather with a different dim0 per rank, broadcast, alltoall, reducescatter",
          "[gpu]") {
  if (gtest::skipUnlessGpuPerRank()) return;
  const int r = htest::worldRank(), n = htest::worldSize();
  Stream stream;
  hcoll_request_t req;
  {  // allgather: rank r contributes r+1 rows of 2 int32 equal to r
    std::vector<int64_t> shape{r + 1, 2};
    DeviceBuffer in((r + 1) * 8);
    upload(in.ptr, std::vector<int32_t>((r + 1) * 2, r));
    hcoll_tensor_t t = cudaTensor(in.ptr, HCOLL_INT32, shape, stream.s);
    HCOLL_REQUIRE_OK(hcoll_allgather(htest::world(), "gpu.ag", &t, &req));
    REQUIRE(hcoll_wait(req, 30.0) == HCOLL_SUCCESS);
    hcoll_tensor_t out;
    HCOLL_REQUIRE_OK(hcoll_request_output(req, 0, &out));
    REQUIRE(out.device == myDevice());
    REQUIRE(out.shape[0] == n * (n + 1) / 2);
    auto got = download<int32_t>(out.data, static_cast<size_t>(out.shape[0]) * 2);
    size_t at = 0;
    for (int q = 0; q < n; ++q)
      for (int row = 0; row < (q + 1) * 2; ++row) REQUIRE(got[at++] == q);
    HCOLL_REQUIRE_OK(hcoll_request_free(req));
  }
  {  // broadcast from the last rank
    std::vector<int64_t> shape{257};
    DeviceBuffer buf(257 * 8);
    upload(buf.ptr, std::vector<double>(257, r * 10.0));
    hcoll_tensor_t t = cudaTensor(buf.ptr, HCOLL_FLOAT64, shape, stream.s);
    HCOLL_REQUIRE_OK(hcoll_broadcast(htest::world(), "gpu.bc", &t, n - 1, &req));
    HCOLL_REQUIRE_OK(htest::waitAndFree(req));
    for (double v : download<double>(buf.ptr, 257)) REQUIRE(v == (n - 1) * 10.0);
  }
  {  // alltoall, even splits: row j of rank r holds r*100+j
    std::vector<int64_t> shape{n * 2};
    DeviceBuffer in(n * 2 * 8);
    std::vector<int64_t> host(n * 2);
    for (int j = 0; j < n * 2; ++j) host[j] = r * 100 + j;
    upload(in.ptr, host);
    hcoll_tensor_t t = cudaTensor(in.ptr, HCOLL_INT64, shape, stream.s);
    HCOLL_REQUIRE_OK(hcoll_alltoall(htest::world(), "gpu.a2a", &t, nullptr, &req));
    REQUIRE(hcoll_wait(req, 30.0) == HCOLL_SUCCESS);
    hcoll_tensor_t out;
    HCOLL_REQUIRE_OK(hcoll_request_output(req, 0, &out));
    auto got = download<int64_t>(out.data, n * 2);
    for (int q = 0; q < n; ++q) {
      REQUIRE(got[q * 2] == q * 100 + r * 2);
      REQUIRE(got[q * 2 + 1] == q * 100 + r * 2 + 1);
    }
    HCOLL_REQUIRE_OK(hcoll_request_free(req));
  }
  {  // reducescatter with an uneven dim0 (n+1 rows): sums of rank values
    const int64_t d0 = n + 1;
    std::vector<int64_t> shape{d0, 3};
    DeviceBuffer in(d0 * 3 * 4);
    upload(in.ptr, std::vector<float>(d0 * 3, static_cast<float>(r + 1)));
    hcoll_tensor_t t = cudaTensor(in.ptr, HCOLL_FLOAT32, shape, stream.s);
    HCOLL_REQUIRE_OK(hcoll_reducescatter(htest::world(), "gpu.rs", &t, HCOLL_SUM, 1.0, 1.0, &req));
    REQUIRE(hcoll_wait(req, 30.0) == HCOLL_SUCCESS);
    hcoll_tensor_t out;
    HCOLL_REQUIRE_OK(hcoll_request_output(req, 0, &out));
    const int64_t rows = d0 / n + (r < d0 % n ? 1 : 0);
    REQUIRE(out.shape[0] == rows);
    for (float v : download<float>(out.data, rows * 3)) REQUIRE(v == n * (n + 1) / 2.0f);
    HCOLL_REQUIRE_OK(hcoll_request_free(req));
  }
}
