// Grouped collectives fuse: one backend call per group while the group fits the fusion
// threshold, several when it does not (HCOLL_FUSION_THRESHOLD small), and right results either way.
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "support/test_util.h"

using namespace htest;

namespace {

// n float32 tensors of `elems` elements each; member k of rank r holds r + k + (i % 3).
struct Group {
  std::vector<Tensor> tensors;
  std::vector<hcoll_tensor_t> descs;
  Group(int n, std::vector<int64_t> shape, int rank, hcoll_dtype_t dtype = HCOLL_FLOAT32) {
    for (int k = 0; k < n; ++k) tensors.emplace_back(dtype, shape);
    for (int k = 0; k < n; ++k) {
      for (int64_t i = 0; i < tensors[k].elements(); ++i) tensors[k].set(i, rank + k + i % 3);
      descs.push_back(tensors[k].desc());
    }
  }
};

}  // namespace

HTEST_CASE("fusion: a 100-tensor grouped allreduce is one backend call", "[fusion]") {
  const int r = worldRank(), n = worldSize();
  Group in(100, {1024}, r), out(100, {1024}, -1000);
  auto before = commStats(world());
  hcoll_request_t req;
  HCOLL_REQUIRE_OK(hcoll_grouped_allreduce(world(), "fusion.ar100", 100, in.descs.data(),
                                           out.descs.data(), HCOLL_SUM, 1.0, 1.0, &req));
  HCOLL_REQUIRE_OK(waitAndFree(req));
  auto after = commStats(world());
  HCHECK(after.backend_calls - before.backend_calls == 1);
  HCHECK(after.fused_tensors - before.fused_tensors == 100);
  HCHECK(after.bytes - before.bytes == 100 * 1024 * 4);
  for (int k = 0; k < 100; ++k) {
    for (int64_t i : {0, 1, 2, 1023}) {
      HREQUIRE(out.tensors[k].get(i) == n * (n - 1) / 2 + n * (k + i % 3));
    }
  }
}

HTEST_CASE("fusion: grouped allgather, broadcast and reducescatter are one call each", "[fusion]") {
  const int r = worldRank(), n = worldSize();
  hcoll_request_t req;

  HSECTION("allgather, members with different row shapes and dim0 per rank") {
    std::vector<Tensor> ts;
    ts.emplace_back(HCOLL_FLOAT32, std::vector<int64_t>{1});
    ts.emplace_back(HCOLL_FLOAT32, std::vector<int64_t>{r + 1, 64});
    ts.emplace_back(HCOLL_FLOAT32, std::vector<int64_t>{2, 3});
    std::vector<hcoll_tensor_t> ds;
    for (size_t k = 0; k < ts.size(); ++k) {
      for (int64_t i = 0; i < ts[k].elements(); ++i) ts[k].set(i, 100 * r + 10 * k + i % 7);
      ds.push_back(ts[k].desc());
    }
    auto before = commStats(world());
    HCOLL_REQUIRE_OK(hcoll_grouped_allgather(world(), "fusion.ag", 3, ds.data(), &req));
    HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
    auto after = commStats(world());
    HCHECK(after.backend_calls - before.backend_calls == 1);
    for (int k = 0; k < 3; ++k) {
      hcoll_tensor_t out;
      HCOLL_REQUIRE_OK(hcoll_request_output(req, k, &out));
      int64_t i = 0;
      for (int src = 0; src < n; ++src) {
        const int64_t rows = k == 0 ? 1 : k == 1 ? src + 1 : 2;
        const int64_t row = k == 0 ? 1 : k == 1 ? 64 : 3;
        for (int64_t j = 0; j < rows * row; ++j) {
          HREQUIRE(outputElement(out, i++) == 100 * src + 10 * k + j % 7);
        }
      }
      HREQUIRE(outputElements(out) == i);
    }
    hcoll_request_free(req);
  }
  HSECTION("broadcast from the last rank, mixed dtypes") {
    std::vector<Tensor> ts;
    ts.emplace_back(HCOLL_INT32, std::vector<int64_t>{5});
    ts.emplace_back(HCOLL_FLOAT64, std::vector<int64_t>{3, 3});
    ts.emplace_back(HCOLL_UINT8, std::vector<int64_t>{7});
    std::vector<hcoll_tensor_t> ds;
    for (size_t k = 0; k < ts.size(); ++k) {
      for (int64_t i = 0; i < ts[k].elements(); ++i) ts[k].set(i, r == n - 1 ? 10 * k + i : 99);
      ds.push_back(ts[k].desc());
    }
    auto before = commStats(world());
    HCOLL_REQUIRE_OK(hcoll_grouped_broadcast(world(), "fusion.bc", 3, ds.data(), n - 1, &req));
    HCOLL_REQUIRE_OK(waitAndFree(req));
    auto after = commStats(world());
    HCHECK(after.backend_calls - before.backend_calls == 1);
    for (size_t k = 0; k < ts.size(); ++k) {
      for (int64_t i = 0; i < ts[k].elements(); ++i) HREQUIRE(ts[k].get(i) == 10 * k + i);
    }
  }
  HSECTION("reducescatter, uneven rows") {
    Group in(4, {2 * n + 1, 2}, r);
    auto before = commStats(world());
    HCOLL_REQUIRE_OK(hcoll_grouped_reducescatter(world(), "fusion.rs", 4, in.descs.data(), HCOLL_SUM,
                                                 1.0, 1.0, &req));
    HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
    auto after = commStats(world());
    HCHECK(after.backend_calls - before.backend_calls == 1);
    const int64_t d0 = 2 * n + 1;
    const int64_t rows = d0 / n + (r < d0 % n ? 1 : 0);
    const int64_t first = r * (d0 / n) + std::min<int64_t>(r, d0 % n);
    for (int k = 0; k < 4; ++k) {
      hcoll_tensor_t out;
      HCOLL_REQUIRE_OK(hcoll_request_output(req, k, &out));
      HREQUIRE(out.shape[0] == rows);
      for (int64_t i = 0; i < rows * 2; ++i) {
        const int64_t g = first * 2 + i;
        HREQUIRE(outputElement(out, i) == n * (n - 1) / 2 + n * (k + g % 3));
      }
    }
    hcoll_request_free(req);
  }
}

HTEST_CASE("fusion: a group larger than the fusion threshold is split but stays right",
          "[.][small_threshold]") {
  // Run with HCOLL_FUSION_THRESHOLD=4096 (see tests/CMakeLists.txt).
  const char* env = std::getenv("HCOLL_FUSION_THRESHOLD");
  HREQUIRE(env != nullptr);
  HREQUIRE(std::string(env) == "4096");
  const int r = worldRank(), n = worldSize();
  // 40 members of 1 KiB: 4 fit a 4 KiB buffer, so at least 10 calls, far fewer than 40.
  Group in(40, {256}, r), out(40, {256}, -1000);
  auto before = commStats(world());
  hcoll_request_t req;
  HCOLL_REQUIRE_OK(hcoll_grouped_allreduce(world(), "fusion.split", 40, in.descs.data(),
                                           out.descs.data(), HCOLL_SUM, 1.0, 1.0, &req));
  HCOLL_REQUIRE_OK(waitAndFree(req));
  auto after = commStats(world());
  const uint64_t calls = after.backend_calls - before.backend_calls;
  HCHECK(calls >= 10);
  HCHECK(calls < 40);
  for (int k = 0; k < 40; ++k) {
    for (int64_t i = 0; i < 256; ++i) HREQUIRE(out.tensors[k].get(i) == n * (n - 1) / 2 + n * (k + i % 3));
  }

  // A member larger than the threshold on its own still works (it gets its own call).
  Group big(3, {4096}, r);
  HCOLL_REQUIRE_OK(hcoll_grouped_allreduce(world(), "fusion.big", 3, big.descs.data(),
                                           big.descs.data(), HCOLL_SUM, 1.0, 1.0, &req));
  HCOLL_REQUIRE_OK(waitAndFree(req));
  for (int k = 0; k < 3; ++k) HREQUIRE(big.tensors[k].get(4095) == n * (n - 1) / 2 + n * (k + 4095 % 3));

  // Allgather splits the same way.
  Group ag(12, {128}, r);
  HCOLL_REQUIRE_OK(hcoll_grouped_allgather(world(), "fusion.split_ag", 12, ag.descs.data(), &req));
  HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
  for (int k = 0; k < 12; ++k) {
    hcoll_tensor_t o;
    HCOLL_REQUIRE_OK(hcoll_request_output(req, k, &o));
    HREQUIRE(outputElements(o) == 128 * n);
    for (int src = 0; src < n; ++src) HREQUIRE(outputElement(o, src * 128 + 5) == src + k + 5 % 3);
  }
  hcoll_request_free(req);
}

HTEST_CASE("fusion: ungrouped ops submitted within the batching window fuse into one call",
          "[.][cycle_window]") {
  // Run with HCOLL_CYCLE_TIME_MS=300 (see tests/CMakeLists.txt): six allreduces submitted ~2 ms
  // apart fall in the window the first one opens, so they negotiate and run together.
  const char* env = std::getenv("HCOLL_CYCLE_TIME_MS");
  HREQUIRE(env != nullptr);
  HREQUIRE(std::string(env) == "300");
  const int r = worldRank(), n = worldSize();
  constexpr int kOps = 6;
  Group in(kOps, {64}, r);
  auto before = commStats(world());
  std::vector<hcoll_request_t> reqs(kOps);
  for (int k = 0; k < kOps; ++k) {
    const std::string name = "window." + std::to_string(k);
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), name.c_str(), &in.descs[k], &in.descs[k], HCOLL_SUM,
                                     1.0, 1.0, &reqs[k]));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (hcoll_request_t req : reqs) HCOLL_REQUIRE_OK(waitAndFree(req));
  auto after = commStats(world());
  HCHECK(after.backend_calls - before.backend_calls == 1);
  HCHECK(after.fused_tensors - before.fused_tensors == kOps);
  for (int k = 0; k < kOps; ++k) {
    for (int64_t i : {0, 1, 2, 63}) HREQUIRE(in.tensors[k].get(i) == n * (n - 1) / 2 + n * (k + i % 3));
  }
}
