// Every kind of cross-rank disagreement ends with MISMATCH on every rank, with a message naming
// the operation, the field and the ranks; the communicator keeps working afterwards.
#include <string>
#include <vector>

#include "support/test_util.h"

using namespace htest;

namespace {

// Waits for `req` expecting MISMATCH; checks the message has every string in `parts`.
void expectMismatch(hcoll_request_t req, const std::vector<std::string>& parts) {
  HREQUIRE(hcoll_wait(req, 30) == HCOLL_ERR_MISMATCH);
  std::string msg = hcoll_request_error(req);
  std::string last = hcoll_last_error();
  HINFO("request error: " << msg << "\nlast error: " << last);
  HREQUIRE(!last.empty());
  for (const auto& p : parts) HREQUIRE(msg.find(p) != std::string::npos);
  // The output accessor reports the same failure.
  hcoll_tensor_t out;
  HREQUIRE(hcoll_request_output(req, 0, &out) == HCOLL_ERR_MISMATCH);
  HCOLL_REQUIRE_OK(hcoll_request_free(req));
}

// A following op on the world succeeds.
void expectWorldWorks() {
  const int n = worldSize();
  Tensor t(HCOLL_INT32, {1});
  t.set(0, 1);
  auto d = t.desc();
  hcoll_request_t req;
  HCOLL_REQUIRE_OK(hcoll_allreduce(world(), nullptr, &d, &d, HCOLL_SUM, 1, 1, &req));
  HCOLL_REQUIRE_OK(waitAndFree(req));
  HREQUIRE(t.get(0) == n);
}

}  // namespace

HTEST_CASE("mismatch: allreduce fields", "[mismatch]") {
  const int r = worldRank();
  const bool odd = r == 1;  // rank 1 differs from the others
  Tensor f32(HCOLL_FLOAT32, {4}), f64(HCOLL_FLOAT64, {4}), f32b(HCOLL_FLOAT32, {5});
  auto a = f32.desc(), b = f64.desc(), c = f32b.desc();
  hcoll_request_t req;

  HSECTION("dtype") {
    auto& d = odd ? b : a;
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "mm.dtype", &d, &d, HCOLL_SUM, 1, 1, &req));
    expectMismatch(req, {"mm.dtype", "dtype", "rank 0", "rank 1", "float32", "float64"});
  }
  HSECTION("shape") {
    auto& d = odd ? c : a;
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "mm.shape", &d, &d, HCOLL_SUM, 1, 1, &req));
    expectMismatch(req, {"mm.shape", "shape", "rank 0", "rank 1"});
  }
  HSECTION("reduce op") {
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "mm.op", &a, &a, odd ? HCOLL_MAX : HCOLL_SUM, 1, 1, &req));
    expectMismatch(req, {"mm.op", "reduce op", "rank 0", "rank 1"});
  }
  HSECTION("prescale") {
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "mm.pre", &a, &a, HCOLL_SUM, odd ? 2.0 : 1.0, 1, &req));
    expectMismatch(req, {"mm.pre", "prescale", "rank 0", "rank 1"});
  }
  HSECTION("prescale differing in the last bits") {
    // 1/3 rounded to float on one rank and in double on the others: the message must show two
    // different numbers, each in full (round-trip) precision.
    const double third = 1.0 / 3.0, thirdFloat = static_cast<float>(1.0 / 3.0);
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "mm.pre.bits", &a, &a, HCOLL_SUM,
                                     odd ? thirdFloat : third, 1, &req));
    expectMismatch(req, {"mm.pre.bits", "prescale", "rank 0 has 0.3333333333333333",
                         "rank 1 has 0.3333333432674408"});
  }
  HSECTION("postscale") {
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "mm.post", &a, &a, HCOLL_SUM, 1, odd ? 0.5 : 1.0, &req));
    expectMismatch(req, {"mm.post", "postscale", "rank 0", "rank 1"});
  }
  HSECTION("operation kind") {
    if (odd) {
      HCOLL_REQUIRE_OK(hcoll_allgather(world(), "mm.kind", &a, &req));
    } else {
      HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "mm.kind", &a, &a, HCOLL_SUM, 1, 1, &req));
    }
    expectMismatch(req, {"mm.kind", "kind", "rank 0", "rank 1"});
  }
  HSECTION("group size") {
    hcoll_tensor_t two[] = {a, c};
    HCOLL_REQUIRE_OK(hcoll_grouped_allreduce(world(), "mm.group", odd ? 2 : 1, two, two, HCOLL_SUM,
                                             1, 1, &req));
    expectMismatch(req, {"mm.group", "group size", "rank 0", "rank 1"});
  }
  HSECTION("grouped member dtype") {
    hcoll_tensor_t grp[] = {a, odd ? b : c};
    HCOLL_REQUIRE_OK(hcoll_grouped_allreduce(world(), "mm.member", 2, grp, grp, HCOLL_SUM, 1, 1, &req));
    expectMismatch(req, {"mm.member", "member 1", "rank 0", "rank 1"});
  }
  expectWorldWorks();
}

HTEST_CASE("mismatch: allgather, broadcast, reducescatter, alltoall fields", "[mismatch]") {
  const int r = worldRank();
  const int n = worldSize();
  const bool odd = r == 1;
  hcoll_request_t req;

  HSECTION("allgather dims after dim 0") {
    Tensor x(HCOLL_INT32, {2, odd ? 4 : 3});
    auto d = x.desc();
    HCOLL_REQUIRE_OK(hcoll_allgather(world(), "mm.ag.rows", &d, &req));
    expectMismatch(req, {"mm.ag.rows", "shape after dim 0", "rank 0", "rank 1"});
  }
  HSECTION("allgather ndim") {
    Tensor x(HCOLL_INT32, odd ? std::vector<int64_t>{2, 1} : std::vector<int64_t>{2});
    auto d = x.desc();
    HCOLL_REQUIRE_OK(hcoll_allgather(world(), "mm.ag.ndim", &d, &req));
    expectMismatch(req, {"mm.ag.ndim", "ndim", "rank 0", "rank 1"});
  }
  HSECTION("allgather dtype") {
    Tensor x(odd ? HCOLL_INT64 : HCOLL_INT32, {1});
    auto d = x.desc();
    HCOLL_REQUIRE_OK(hcoll_allgather(world(), "mm.ag.dtype", &d, &req));
    expectMismatch(req, {"mm.ag.dtype", "dtype", "int32", "int64"});
  }
  HSECTION("broadcast root") {
    Tensor x(HCOLL_INT32, {3});
    auto d = x.desc();
    HCOLL_REQUIRE_OK(hcoll_broadcast(world(), "mm.bc.root", &d, odd ? 1 : 0, &req));
    expectMismatch(req, {"mm.bc.root", "root", "rank 0", "rank 1"});
  }
  HSECTION("broadcast shape") {
    Tensor x(HCOLL_INT32, {odd ? 4 : 3});
    auto d = x.desc();
    HCOLL_REQUIRE_OK(hcoll_broadcast(world(), "mm.bc.shape", &d, 0, &req));
    expectMismatch(req, {"mm.bc.shape", "shape", "rank 0", "rank 1"});
  }
  HSECTION("reducescatter shape") {
    Tensor x(HCOLL_FLOAT32, {odd ? n + 1 : n});
    auto d = x.desc();
    HCOLL_REQUIRE_OK(hcoll_reducescatter(world(), "mm.rs.shape", &d, HCOLL_SUM, 1, 1, &req));
    expectMismatch(req, {"mm.rs.shape", "shape", "rank 0", "rank 1"});
  }
  HSECTION("reducescatter op") {
    Tensor x(HCOLL_FLOAT32, {n});
    auto d = x.desc();
    HCOLL_REQUIRE_OK(hcoll_reducescatter(world(), "mm.rs.op", &d, odd ? HCOLL_MIN : HCOLL_MAX, 1, 1, &req));
    expectMismatch(req, {"mm.rs.op", "reduce op", "rank 0", "rank 1"});
  }
  HSECTION("alltoall dtype") {
    Tensor x(odd ? HCOLL_UINT8 : HCOLL_INT8, {n});
    auto d = x.desc();
    HCOLL_REQUIRE_OK(hcoll_alltoall(world(), "mm.a2a.dtype", &d, nullptr, &req));
    expectMismatch(req, {"mm.a2a.dtype", "dtype", "rank 0", "rank 1"});
  }
  HSECTION("grouped broadcast group size") {
    Tensor x(HCOLL_INT32, {3}), y(HCOLL_INT32, {2});
    hcoll_tensor_t grp[] = {x.desc(), y.desc()};
    HCOLL_REQUIRE_OK(hcoll_grouped_broadcast(world(), "mm.gbc", odd ? 1 : 2, grp, 0, &req));
    expectMismatch(req, {"mm.gbc", "group size"});
  }
  expectWorldWorks();
}

HTEST_CASE("mismatch: an op while a rank has joined", "[mismatch][join]") {
  const int r = worldRank();
  const int n = worldSize();
  hcoll_request_t join;
  if (r == n - 1) {
    HCOLL_REQUIRE_OK(hcoll_join(world(), &join));
  } else {
    Tensor x(HCOLL_INT32, {2});
    auto d = x.desc();
    hcoll_request_t req;
    HCOLL_REQUIRE_OK(hcoll_broadcast(world(), "mm.joined.bc", &d, 0, &req));
    expectMismatch(req, {"mm.joined.bc", "joined", std::to_string(n - 1)});
    HCOLL_REQUIRE_OK(hcoll_reducescatter(world(), "mm.joined.rs", &d, HCOLL_SUM, 1, 1, &req));
    expectMismatch(req, {"mm.joined.rs", "joined"});
    Tensor y(HCOLL_INT32, {n});
    auto yd = y.desc();
    HCOLL_REQUIRE_OK(hcoll_alltoall(world(), "mm.joined.a2a", &yd, nullptr, &req));
    HREQUIRE(hcoll_wait(req, 30) == HCOLL_ERR_MISMATCH);
    hcoll_request_free(req);
    HCOLL_REQUIRE_OK(hcoll_join(world(), &join));
  }
  HCOLL_REQUIRE_OK(waitAndFree(join));
  expectWorldWorks();
}
