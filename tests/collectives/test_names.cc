// Names match operations across ranks whatever the submission order; NULL names match by call
// order; a second in-flight op with the same name fails with DUPLICATE_NAME, the first unaffected.
#include <algorithm>
#include <memory>
#include <string>

#include "support/test_util.h"

using namespace htest;

HTEST_CASE("names: ops submitted in opposite orders on different ranks", "[names]") {
  const int r = worldRank();
  const int n = worldSize();
  constexpr int kOps = 12;
  std::vector<std::unique_ptr<Tensor>> ts;
  std::vector<hcoll_request_t> reqs(kOps);
  std::vector<int> order(kOps);
  for (int k = 0; k < kOps; ++k) order[k] = k;
  if (r % 2 == 1) std::reverse(order.begin(), order.end());
  if (r == 2) std::rotate(order.begin(), order.begin() + 5, order.end());
  // Op k has k+1 elements, so a wrong match would be a shape MISMATCH or a wrong sum.
  for (int k = 0; k < kOps; ++k) ts.push_back(std::make_unique<Tensor>(HCOLL_INT32, std::vector<int64_t>{k + 1}));
  for (int k : order) {
    for (int i = 0; i <= k; ++i) ts[k]->set(i, r * 100 + k);
    auto d = ts[k]->desc();
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), ("named." + std::to_string(k)).c_str(), &d, &d,
                                     HCOLL_SUM, 1.0, 1.0, &reqs[k]));
  }
  for (int k : order) {
    HCOLL_REQUIRE_OK(waitAndFree(reqs[k]));
    for (int i = 0; i <= k; ++i) HREQUIRE(ts[k]->get(i) == 100 * n * (n - 1) / 2 + n * k);
  }
}

HTEST_CASE("names: mixed collectives in opposite orders", "[names]") {
  const int r = worldRank();
  const int n = worldSize();
  Tensor ar(HCOLL_FLOAT32, {3}), bc(HCOLL_INT16, {2}), ag(HCOLL_INT8, {1});
  for (int i = 0; i < 3; ++i) ar.set(i, r + i);
  bc.set(0, r == 0 ? 11 : 0);
  bc.set(1, r == 0 ? 12 : 0);
  ag.set(0, r);
  auto ard = ar.desc(), bcd = bc.desc(), agd = ag.desc();
  hcoll_request_t q1, q2, q3;
  if (r % 2 == 0) {
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "mix.ar", &ard, &ard, HCOLL_SUM, 1, 1, &q1));
    HCOLL_REQUIRE_OK(hcoll_broadcast(world(), "mix.bc", &bcd, 0, &q2));
    HCOLL_REQUIRE_OK(hcoll_allgather(world(), "mix.ag", &agd, &q3));
  } else {
    HCOLL_REQUIRE_OK(hcoll_allgather(world(), "mix.ag", &agd, &q3));
    HCOLL_REQUIRE_OK(hcoll_broadcast(world(), "mix.bc", &bcd, 0, &q2));
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "mix.ar", &ard, &ard, HCOLL_SUM, 1, 1, &q1));
  }
  HCOLL_REQUIRE_OK(waitAndFree(q1));
  HCOLL_REQUIRE_OK(waitAndFree(q2));
  HCOLL_REQUIRE_OK(hcoll_wait(q3, 30));
  for (int i = 0; i < 3; ++i) HREQUIRE(ar.get(i) == n * (n - 1) / 2 + n * i);
  HREQUIRE(bc.get(0) == 11);
  HREQUIRE(bc.get(1) == 12);
  hcoll_tensor_t out;
  HCOLL_REQUIRE_OK(hcoll_request_output(q3, 0, &out));
  HREQUIRE(out.shape[0] == n);
  for (int k = 0; k < n; ++k) HREQUIRE(outputElement(out, k) == k);
  hcoll_request_free(q3);
}

HTEST_CASE("names: NULL names match by per-communicator call order", "[names]") {
  const int r = worldRank();
  const int n = worldSize();
  constexpr int kOps = 6;
  std::vector<std::unique_ptr<Tensor>> ts;
  std::vector<hcoll_request_t> reqs(kOps);
  for (int k = 0; k < kOps; ++k) {
    ts.push_back(std::make_unique<Tensor>(HCOLL_INT64, std::vector<int64_t>{k + 2}));
    for (int i = 0; i < k + 2; ++i) ts[k]->set(i, r + k);
    auto d = ts[k]->desc();
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), nullptr, &d, &d, HCOLL_SUM, 1, 1, &reqs[k]));
  }
  // Waiting in reverse order must not matter.
  for (int k = kOps - 1; k >= 0; --k) {
    HCOLL_REQUIRE_OK(waitAndFree(reqs[k]));
    for (int i = 0; i < k + 2; ++i) HREQUIRE(ts[k]->get(i) == n * (n - 1) / 2 + n * k);
  }
}

HTEST_CASE("names: a second in-flight op with the same name is DUPLICATE_NAME", "[names]") {
  const int r = worldRank();
  const int n = worldSize();
  Tensor first(HCOLL_INT32, {2}), second(HCOLL_INT32, {2});
  first.set(0, r);
  first.set(1, 1);
  auto fd = first.desc(), sd = second.desc();
  hcoll_request_t req = HCOLL_REQUEST_NULL, dupReq = HCOLL_REQUEST_NULL, barrier;
  if (r == 0) {
    // The other ranks submit "dup" only after the barrier, so ours stays in flight until then.
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "dup", &fd, &fd, HCOLL_SUM, 1, 1, &req));
    HREQUIRE(hcoll_allreduce(world(), "dup", &sd, &sd, HCOLL_SUM, 1, 1, &dupReq) ==
            HCOLL_ERR_DUPLICATE_NAME);
    HREQUIRE(dupReq == HCOLL_REQUEST_NULL);
    HREQUIRE(std::string(hcoll_last_error()).find("dup") != std::string::npos);
    // Another kind with the same name is a duplicate too.
    hcoll_request_t agReq = HCOLL_REQUEST_NULL;
    HREQUIRE(hcoll_allgather(world(), "dup", &sd, &agReq) == HCOLL_ERR_DUPLICATE_NAME);
    HREQUIRE(hcoll_test(req) == HCOLL_IN_PROGRESS);
    HCOLL_REQUIRE_OK(hcoll_barrier(world(), &barrier));
    HCOLL_REQUIRE_OK(waitAndFree(barrier));
  } else {
    HCOLL_REQUIRE_OK(hcoll_barrier(world(), &barrier));
    HCOLL_REQUIRE_OK(waitAndFree(barrier));
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "dup", &fd, &fd, HCOLL_SUM, 1, 1, &req));
  }
  HCOLL_REQUIRE_OK(waitAndFree(req));
  HREQUIRE(first.get(0) == n * (n - 1) / 2);
  HREQUIRE(first.get(1) == n);
  // Once completed, the name can be used again.
  HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "dup", &fd, &fd, HCOLL_SUM, 1, 1, &req));
  HCOLL_REQUIRE_OK(waitAndFree(req));
  HREQUIRE(first.get(1) == n * n);
}
