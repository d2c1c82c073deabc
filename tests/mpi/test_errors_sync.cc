// Synchronous errors: every bad argument is rejected by the call itself with the right code and a
// message, nothing is enqueued (a following collective still matches across ranks).
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "support/test_util.h"

using namespace htest;

namespace {

// Expects `expr` to return `code` and to leave a non-empty hcoll_last_error.
#define EXPECT_FAILS(code, expr)                                              \
  do {                                                                        \
    hcoll_status_t s_ = (expr);                                               \
    INFO(#expr << " -> " << hcoll_status_string(s_) << ": " << hcoll_last_error()); \
    REQUIRE(s_ == (code));                                                    \
    REQUIRE(std::string(hcoll_last_error()).size() > 0);                      \
  } while (0)

// A following op on the world matches: the failed calls enqueued nothing (else the automatic
// names would be off by one between ranks or the op would be a MISMATCH).
void expectWorldWorks() {
  const int n = worldSize();
  Tensor t(HCOLL_INT32, {1});
  t.set(0, 2);
  auto d = t.desc();
  hcoll_request_t req;
  HCOLL_REQUIRE_OK(hcoll_allreduce(world(), nullptr, &d, &d, HCOLL_SUM, 1, 1, &req));
  HCOLL_REQUIRE_OK(waitAndFree(req));
  REQUIRE(t.get(0) == 2 * n);
}

const hcoll_comm_t kGarbageComm = reinterpret_cast<hcoll_comm_t>(uintptr_t{0xdeadbeef});
const hcoll_request_t kGarbageRequest = reinterpret_cast<hcoll_request_t>(uintptr_t{0x5a5a5a5a5a5a});

}  // namespace

TEST_CASE("sync errors: NULL pointers", "[errors]") {
  hcoll_comm_t w = world();
  Tensor t(HCOLL_FLOAT32, {4});
  auto d = t.desc();
  hcoll_request_t req = HCOLL_REQUEST_NULL;
  const auto E = HCOLL_ERR_INVALID_ARGUMENT;
  EXPECT_FAILS(E, hcoll_allreduce(w, "x", nullptr, &d, HCOLL_SUM, 1, 1, &req));
  EXPECT_FAILS(E, hcoll_allreduce(w, "x", &d, nullptr, HCOLL_SUM, 1, 1, &req));
  EXPECT_FAILS(E, hcoll_allreduce(w, "x", &d, &d, HCOLL_SUM, 1, 1, nullptr));
  EXPECT_FAILS(E, hcoll_grouped_allreduce(w, "x", 1, nullptr, &d, HCOLL_SUM, 1, 1, &req));
  EXPECT_FAILS(E, hcoll_grouped_allreduce(w, "x", 1, &d, nullptr, HCOLL_SUM, 1, 1, &req));
  EXPECT_FAILS(E, hcoll_allgather(w, "x", nullptr, &req));
  EXPECT_FAILS(E, hcoll_allgather(w, "x", &d, nullptr));
  EXPECT_FAILS(E, hcoll_grouped_allgather(w, "x", 2, nullptr, &req));
  EXPECT_FAILS(E, hcoll_broadcast(w, "x", nullptr, 0, &req));
  EXPECT_FAILS(E, hcoll_grouped_broadcast(w, "x", 1, nullptr, 0, &req));
  EXPECT_FAILS(E, hcoll_alltoall(w, "x", nullptr, nullptr, &req));
  EXPECT_FAILS(E, hcoll_reducescatter(w, "x", nullptr, HCOLL_SUM, 1, 1, &req));
  EXPECT_FAILS(E, hcoll_grouped_reducescatter(w, "x", 1, nullptr, HCOLL_SUM, 1, 1, &req));
  EXPECT_FAILS(E, hcoll_barrier(w, nullptr));
  EXPECT_FAILS(E, hcoll_join(w, nullptr));
  EXPECT_FAILS(E, hcoll_comm_world(nullptr));
  EXPECT_FAILS(E, hcoll_comm_rank(w, nullptr));
  EXPECT_FAILS(E, hcoll_comm_size(w, nullptr));
  EXPECT_FAILS(E, hcoll_comm_local_rank(w, nullptr));
  EXPECT_FAILS(E, hcoll_comm_local_size(w, nullptr));
  EXPECT_FAILS(E, hcoll_comm_split(w, 0, 0, nullptr));
  EXPECT_FAILS(E, hcoll_comm_stats(w, nullptr));
  EXPECT_FAILS(E, hcoll_comm_from_mpi(0, nullptr));
  // NULL data for a non-empty tensor; NULL shape with ndim > 0.
  hcoll_tensor_t noData = d;
  noData.data = nullptr;
  EXPECT_FAILS(E, hcoll_allreduce(w, "x", &noData, &noData, HCOLL_SUM, 1, 1, &req));
  hcoll_tensor_t noShape = d;
  noShape.shape = nullptr;
  EXPECT_FAILS(E, hcoll_broadcast(w, "x", &noShape, 0, &req));
  // An empty name is an error (NULL is the automatic name).
  EXPECT_FAILS(E, hcoll_allreduce(w, "", &d, &d, HCOLL_SUM, 1, 1, &req));
  REQUIRE(req == HCOLL_REQUEST_NULL);
  expectWorldWorks();
}

TEST_CASE("sync errors: bad enums, ndim, dims, element-count overflow", "[errors]") {
  hcoll_comm_t w = world();
  Tensor t(HCOLL_FLOAT32, {4});
  hcoll_request_t req = HCOLL_REQUEST_NULL;
  const auto E = HCOLL_ERR_INVALID_ARGUMENT;
  auto d = t.desc();
  hcoll_tensor_t bad = d;
  bad.dtype = static_cast<hcoll_dtype_t>(11);
  EXPECT_FAILS(E, hcoll_allreduce(w, "x", &bad, &bad, HCOLL_SUM, 1, 1, &req));
  bad.dtype = static_cast<hcoll_dtype_t>(-1);
  EXPECT_FAILS(E, hcoll_allgather(w, "x", &bad, &req));
  EXPECT_FAILS(E, hcoll_allreduce(w, "x", &d, &d, static_cast<hcoll_reduce_op_t>(6), 1, 1, &req));
  EXPECT_FAILS(E, hcoll_allreduce(w, "x", &d, &d, static_cast<hcoll_reduce_op_t>(-1), 1, 1, &req));
  EXPECT_FAILS(E, hcoll_reducescatter(w, "x", &d, static_cast<hcoll_reduce_op_t>(99), 1, 1, &req));
  bad = d;
  bad.ndim = -1;
  EXPECT_FAILS(E, hcoll_allreduce(w, "x", &bad, &bad, HCOLL_SUM, 1, 1, &req));
  bad.ndim = HCOLL_MAX_NDIM + 1;
  std::vector<int64_t> many(HCOLL_MAX_NDIM + 1, 1);
  bad.shape = many.data();
  EXPECT_FAILS(E, hcoll_broadcast(w, "x", &bad, 0, &req));
  const int64_t negative[] = {4, -2};
  bad = d;
  bad.ndim = 2;
  bad.shape = negative;
  EXPECT_FAILS(E, hcoll_allgather(w, "x", &bad, &req));
  const int64_t huge[] = {int64_t{1} << 40, int64_t{1} << 40};
  bad.shape = huge;
  EXPECT_FAILS(E, hcoll_allreduce(w, "x", &bad, &bad, HCOLL_SUM, 1, 1, &req));
  // Fits in int64 elements but not in int64 bytes.
  const int64_t bytesOverflow[] = {std::numeric_limits<int64_t>::max() / 2};
  bad.ndim = 1;
  bad.shape = bytesOverflow;
  EXPECT_FAILS(E, hcoll_broadcast(w, "x", &bad, 0, &req));
  // Non-finite scale factors; bool average or scaling.
  EXPECT_FAILS(E, hcoll_allreduce(w, "x", &d, &d, HCOLL_SUM, std::numeric_limits<double>::quiet_NaN(), 1, &req));
  EXPECT_FAILS(E, hcoll_allreduce(w, "x", &d, &d, HCOLL_SUM, 1, std::numeric_limits<double>::infinity(), &req));
  Tensor b(HCOLL_BOOL, {3});
  auto bd = b.desc();
  EXPECT_FAILS(E, hcoll_allreduce(w, "x", &bd, &bd, HCOLL_AVERAGE, 1, 1, &req));
  EXPECT_FAILS(E, hcoll_allreduce(w, "x", &bd, &bd, HCOLL_SUM, 2, 1, &req));
  EXPECT_FAILS(E, hcoll_allreduce(w, "x", &bd, &bd, HCOLL_MAX, 1, 0.5, &req));
  EXPECT_FAILS(E, hcoll_reducescatter(w, "x", &bd, HCOLL_AVERAGE, 1, 1, &req));
  // A device below HOST; a CUDA tensor without an NCCL backend driving CUDA tensors.
  bad = d;
  bad.device = -2;
  EXPECT_FAILS(E, hcoll_allreduce(w, "x", &bad, &bad, HCOLL_SUM, 1, 1, &req));
  // Group sizes.
  EXPECT_FAILS(E, hcoll_grouped_allreduce(w, "x", 0, &d, &d, HCOLL_SUM, 1, 1, &req));
  EXPECT_FAILS(E, hcoll_grouped_allgather(w, "x", -1, &d, &req));
  EXPECT_FAILS(E, hcoll_grouped_broadcast(w, "x", 0, &d, 0, &req));
  EXPECT_FAILS(E, hcoll_grouped_reducescatter(w, "x", 0, &d, HCOLL_SUM, 1, 1, &req));
  REQUIRE(req == HCOLL_REQUEST_NULL);
  expectWorldWorks();
}

TEST_CASE("sync errors: roots, splits, in/out shapes, 0-d rows", "[errors]") {
  hcoll_comm_t w = world();
  const int n = worldSize();
  hcoll_request_t req = HCOLL_REQUEST_NULL;
  const auto E = HCOLL_ERR_INVALID_ARGUMENT;
  Tensor t(HCOLL_INT32, {2 * n + 1});
  auto d = t.desc();
  EXPECT_FAILS(E, hcoll_broadcast(w, "x", &d, -1, &req));
  EXPECT_FAILS(E, hcoll_broadcast(w, "x", &d, n, &req));
  EXPECT_FAILS(E, hcoll_grouped_broadcast(w, "x", 1, &d, n + 5, &req));
  // alltoall: NULL splits with dim0 not divisible by N, negative splits, sum > dim0.
  if (n > 1) EXPECT_FAILS(E, hcoll_alltoall(w, "x", &d, nullptr, &req));
  std::vector<int64_t> splits(n, 1);
  splits[0] = -1;
  EXPECT_FAILS(E, hcoll_alltoall(w, "x", &d, splits.data(), &req));
  splits.assign(n, 3);
  EXPECT_FAILS(E, hcoll_alltoall(w, "x", &d, splits.data(), &req));
  // in and out differ in shape or dtype.
  Tensor other(HCOLL_INT32, {2 * n}), otherType(HCOLL_INT64, {2 * n + 1});
  auto od = other.desc(), td = otherType.desc();
  EXPECT_FAILS(E, hcoll_allreduce(w, "x", &d, &od, HCOLL_SUM, 1, 1, &req));
  EXPECT_FAILS(E, hcoll_allreduce(w, "x", &d, &td, HCOLL_SUM, 1, 1, &req));
  hcoll_tensor_t ins[] = {d, d}, outs[] = {d, od};
  EXPECT_FAILS(E, hcoll_grouped_allreduce(w, "x", 2, ins, outs, HCOLL_SUM, 1, 1, &req));
  // 0-d inputs where rows are needed.
  Tensor scalar(HCOLL_FLOAT32, {});
  auto sd = scalar.desc();
  EXPECT_FAILS(E, hcoll_allgather(w, "x", &sd, &req));
  EXPECT_FAILS(E, hcoll_alltoall(w, "x", &sd, nullptr, &req));
  EXPECT_FAILS(E, hcoll_reducescatter(w, "x", &sd, HCOLL_SUM, 1, 1, &req));
  hcoll_tensor_t grp[] = {d, sd};
  EXPECT_FAILS(E, hcoll_grouped_allgather(w, "x", 2, grp, &req));
  // Request accessors: NULL outputs, no such output.
  EXPECT_FAILS(E, hcoll_request_output(kGarbageRequest, 0, nullptr));
  REQUIRE(req == HCOLL_REQUEST_NULL);
  expectWorldWorks();
}

TEST_CASE("sync errors: stale and garbage handles are INVALID_HANDLE", "[errors]") {
  const auto H = HCOLL_ERR_INVALID_HANDLE;
  Tensor t(HCOLL_FLOAT32, {2});
  auto d = t.desc();
  hcoll_request_t req = HCOLL_REQUEST_NULL;
  int x;
  for (hcoll_comm_t c : {HCOLL_COMM_NULL, kGarbageComm,
                         reinterpret_cast<hcoll_comm_t>(&x)}) {
    EXPECT_FAILS(H, hcoll_allreduce(c, "x", &d, &d, HCOLL_SUM, 1, 1, &req));
    EXPECT_FAILS(H, hcoll_allgather(c, "x", &d, &req));
    EXPECT_FAILS(H, hcoll_broadcast(c, "x", &d, 0, &req));
    EXPECT_FAILS(H, hcoll_barrier(c, &req));
    EXPECT_FAILS(H, hcoll_join(c, &req));
    EXPECT_FAILS(H, hcoll_comm_rank(c, &x));
    EXPECT_FAILS(H, hcoll_comm_size(c, &x));
    EXPECT_FAILS(H, hcoll_comm_destroy(c));
    hcoll_comm_t out;
    EXPECT_FAILS(H, hcoll_comm_split(c, 0, 0, &out));
  }
  for (hcoll_request_t r : {HCOLL_REQUEST_NULL, kGarbageRequest,
                            reinterpret_cast<hcoll_request_t>(&x)}) {
    EXPECT_FAILS(H, hcoll_test(r));
    EXPECT_FAILS(H, hcoll_wait(r, 0.1));
    EXPECT_FAILS(H, hcoll_request_free(r));
    hcoll_tensor_t out;
    EXPECT_FAILS(H, hcoll_request_output(r, 0, &out));
    const int64_t* splits;
    int count;
    EXPECT_FAILS(H, hcoll_request_received_splits(r, 0, &splits, &count));
    REQUIRE(hcoll_request_error(r) == nullptr);
  }
  // A freed request, and a communicator handle passed as a request (different tag).
  HCOLL_REQUIRE_OK(hcoll_barrier(world(), &req));
  HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
  HCOLL_REQUIRE_OK(hcoll_request_free(req));
  EXPECT_FAILS(H, hcoll_test(req));
  EXPECT_FAILS(H, hcoll_request_free(req));
  EXPECT_FAILS(H, hcoll_test(reinterpret_cast<hcoll_request_t>(world())));
  EXPECT_FAILS(H, hcoll_comm_size(reinterpret_cast<hcoll_comm_t>(req), &x));
  expectWorldWorks();
}

TEST_CASE("sync errors: request accessors on the wrong kind or index", "[errors]") {
  const int n = worldSize();
  Tensor t(HCOLL_INT32, {n});
  auto d = t.desc();
  hcoll_request_t req;
  HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "acc", &d, &d, HCOLL_SUM, 1, 1, &req));
  HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
  hcoll_tensor_t out;
  const int64_t* splits;
  int count;
  EXPECT_FAILS(HCOLL_ERR_INVALID_ARGUMENT, hcoll_request_output(req, 0, &out));  // no outputs
  EXPECT_FAILS(HCOLL_ERR_INVALID_ARGUMENT, hcoll_request_output(req, -1, &out));
  EXPECT_FAILS(HCOLL_ERR_INVALID_ARGUMENT, hcoll_request_received_splits(req, 0, nullptr, &count));
  EXPECT_FAILS(HCOLL_ERR_INVALID_ARGUMENT, hcoll_request_received_splits(req, 0, &splits, &count));
  REQUIRE(std::string(hcoll_request_error(req)).empty());
  HCOLL_REQUIRE_OK(hcoll_request_free(req));
  // An allgather has outputs but no received splits.
  HCOLL_REQUIRE_OK(hcoll_allgather(world(), "acc.ag", &d, &req));
  HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
  EXPECT_FAILS(HCOLL_ERR_INVALID_ARGUMENT, hcoll_request_received_splits(req, 0, &splits, &count));
  EXPECT_FAILS(HCOLL_ERR_INVALID_ARGUMENT, hcoll_request_output(req, 1, &out));
  HCOLL_REQUIRE_OK(hcoll_request_free(req));
}

TEST_CASE("sync errors: status strings and version", "[errors]") {
  REQUIRE(std::string(hcoll_status_string(HCOLL_SUCCESS)) == "success");
  REQUIRE(std::string(hcoll_status_string(HCOLL_ERR_MISMATCH)).size() > 0);
  REQUIRE(std::string(hcoll_status_string(static_cast<hcoll_status_t>(-999))) == "unknown status");
  int major = -1, minor = -1, patch = -1;
  HCOLL_REQUIRE_OK(hcoll_version(&major, &minor, &patch));
  REQUIRE(major == HCOLL_VERSION_MAJOR);
  REQUIRE(minor == HCOLL_VERSION_MINOR);
  REQUIRE(patch == HCOLL_VERSION_PATCH);
  REQUIRE(major * 10000 + minor * 100 + patch == HCOLL_VERSION);
  REQUIRE(std::string(hcoll_version_string()) ==
          std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch));
  HCOLL_REQUIRE_OK(hcoll_version(nullptr, nullptr, nullptr));
  REQUIRE(hcoll_is_initialized() == 1);
}

// Communicator calls are collective: a rank whose own arguments are bad must not leave the other
// ranks waiting for it forever. It fails with INVALID_ARGUMENT, they fail with MISMATCH naming it.
TEST_CASE("sync errors: bad split/create arguments on one rank fail the others, no hang",
          "[errors][comm]") {
  const int r = worldRank();
  const int n = worldSize();
  hcoll_comm_t out = HCOLL_COMM_NULL;
  hcoll_status_t s;
  SECTION("comm_create: only the last rank lists a rank twice") {
    std::vector<int> ranks(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) ranks[i] = i;
    if (r == n - 1) ranks[0] = ranks[n - 1];
    s = hcoll_comm_create(world(), ranks.data(), n, &out);
  }
  SECTION("comm_split: only the last rank passes out = NULL") {
    s = hcoll_comm_split(world(), 0, r, r == n - 1 ? nullptr : &out);
  }
  const std::string message = hcoll_last_error();
  INFO(hcoll_status_string(s) << ": " << message);
  REQUIRE(out == HCOLL_COMM_NULL);
  if (r == n - 1) {
    REQUIRE(s == HCOLL_ERR_INVALID_ARGUMENT);
  } else {
    REQUIRE(s == HCOLL_ERR_MISMATCH);
    REQUIRE(message.find("rank(s) " + std::to_string(n - 1)) != std::string::npos);
  }
  expectWorldWorks();
  // And the communicator calls still match up afterwards.
  hcoll_comm_t sub = HCOLL_COMM_NULL;
  HCOLL_REQUIRE_OK(hcoll_comm_split(world(), 0, r, &sub));
  HCOLL_REQUIRE_OK(hcoll_comm_destroy(sub));
}
