// The small-message fold (negotiator.cc, backend.h's FoldedAllreduce): a lone cached small
// allreduce rides in its round's readiness exchange, and its result stands only when the
// exchanged bits say every rank would run exactly it. Results must be right whatever each rank
// does: ranks that submit in different orders, the same name with a different shape on one rank
// (an error on every rank, the communicator still usable), a rank late by milliseconds,
// postscale and Average, in place. hcoll_comm_stats' `folded` counts folded operations: on
// loopback and on the MPI backend with the shared-memory control block (one node) most of a loop
// folds; where the channel cannot fold (HCOLL_MPI_SHM_SMALL=0) none does and nothing else
// changes.
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "support/test_util.h"

using namespace htest;

namespace {

// Whether this run's channel can fold: loopback always, the MPI backend with its control block
// (all ranks on this node, the block not turned off).
bool channelFolds() {
  if (ranksOnThreads()) return true;  // loopback
  const char* off = std::getenv("HCOLL_MPI_SHM_SMALL");
  const char* shm = std::getenv("HCOLL_MPI_SHM");
  if ((off != nullptr && std::string(off) == "0") || (shm != nullptr && std::string(shm) == "0")) {
    return false;
  }
  int local = 0;
  HCOLL_REQUIRE_OK(hcoll_comm_local_size(world(), &local));
  return local == worldSize() && worldSize() > 1;
}

// An 8-byte (two float32) allreduce of (rank + 1, k) named `name`, waited for and checked.
void sumOf(const std::string& name, int k, hcoll_reduce_op_t op = HCOLL_SUM,
           double postscale = 1.0, bool inPlace = false) {
  Tensor in(HCOLL_FLOAT32, {2}), out(HCOLL_FLOAT32, {2});
  in.set(0, worldRank() + 1);
  in.set(1, k);
  hcoll_tensor_t din = in.desc(), dout = inPlace ? in.desc() : out.desc();
  hcoll_request_t req = HCOLL_REQUEST_NULL;
  HCOLL_REQUIRE_OK(hcoll_allreduce(world(), name.c_str(), &din, &dout, op, 1.0, postscale, &req));
  HCOLL_REQUIRE_OK(waitAndFree(req));
  const Tensor& result = inPlace ? in : out;
  const double n = worldSize();
  const double sum0 = n * (n + 1) / 2, sum1 = n * k;
  const double scale = op == HCOLL_AVERAGE ? postscale / n : postscale;
  HINFO(name << " call " << k);
  HREQUIRE(result.get(0) == static_cast<float>(sum0 * scale));
  HREQUIRE(result.get(1) == static_cast<float>(sum1 * scale));
}

}  // namespace

HTEST_CASE("fold: a loop of one named small allreduce folds and stays right", "[fold]") {
  const auto before = commStats(world());
  constexpr int kCalls = 200;
  for (int k = 0; k < kCalls; ++k) sumOf("fold.loop", k);
  const auto after = commStats(world());
  const uint64_t folded = after.folded - before.folded;
  const uint64_t calls = after.backend_calls - before.backend_calls;
  HINFO("folded " << folded << " of " << kCalls << ", backend calls " << calls);
  HREQUIRE(folded + calls == kCalls);  // each call either folded or called the backend once
  if (channelFolds()) {
    // The first call is not cached yet; the rest fold unless a round happened to carry more.
    HREQUIRE(folded >= kCalls / 2);
  } else {
    HREQUIRE(folded == 0);
  }
}

HTEST_CASE("fold: in place, postscale, Average, MIN and MAX", "[fold]") {
  for (int k = 0; k < 20; ++k) {
    sumOf("fold.inplace", k, HCOLL_SUM, 1.0, /*inPlace=*/true);
    sumOf("fold.postscale", k, HCOLL_SUM, 0.5);
    sumOf("fold.average", k, HCOLL_AVERAGE);
  }
  for (int k = 0; k < 20; ++k) {
    Tensor t(HCOLL_INT64, {3});
    for (int i = 0; i < 3; ++i) t.set(i, (worldRank() + 1) * (i + 1) * (k % 2 ? -1 : 1));
    hcoll_tensor_t d = t.desc();
    hcoll_request_t req = HCOLL_REQUEST_NULL;
    const hcoll_reduce_op_t op = k % 2 ? HCOLL_MIN : HCOLL_MAX;
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), k % 2 ? "fold.min" : "fold.max", &d, &d, op, 1, 1,
                                     &req));
    HCOLL_REQUIRE_OK(waitAndFree(req));
    const int n = worldSize();
    for (int i = 0; i < 3; ++i) HREQUIRE(t.get(i) == (k % 2 ? -n * (i + 1) : n * (i + 1)));
  }
}

HTEST_CASE("fold: ranks that submit in different orders", "[fold]") {
  // Two cached operations, submitted in rank-dependent order and waited for in the other: a
  // round may see one on one rank and the other elsewhere (the fold is then discarded), or both.
  for (int k = 0; k < 50; ++k) sumOf(k % 2 ? "fold.order.a" : "fold.order.b", k);  // cache both
  for (int k = 0; k < 100; ++k) {
    const bool flip = (worldRank() + k) % 2 == 1;
    Tensor a(HCOLL_FLOAT32, {2}), b(HCOLL_FLOAT32, {2});
    a.set(0, 1);
    a.set(1, k);
    b.set(0, 2);
    b.set(1, -k);
    hcoll_tensor_t da = a.desc(), db = b.desc();
    hcoll_request_t ra = HCOLL_REQUEST_NULL, rb = HCOLL_REQUEST_NULL;
    if (flip) {
      HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "fold.order.b", &db, &db, HCOLL_SUM, 1, 1, &rb));
      if (k % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
      HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "fold.order.a", &da, &da, HCOLL_SUM, 1, 1, &ra));
      HCOLL_REQUIRE_OK(waitAndFree(ra));
      HCOLL_REQUIRE_OK(waitAndFree(rb));
    } else {
      HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "fold.order.a", &da, &da, HCOLL_SUM, 1, 1, &ra));
      HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "fold.order.b", &db, &db, HCOLL_SUM, 1, 1, &rb));
      HCOLL_REQUIRE_OK(waitAndFree(rb));
      HCOLL_REQUIRE_OK(waitAndFree(ra));
    }
    const float n = static_cast<float>(worldSize());
    HINFO("iteration " << k);
    HREQUIRE(a.get(0) == n);
    HREQUIRE(a.get(1) == n * k);
    HREQUIRE(b.get(0) == 2 * n);
    HREQUIRE(b.get(1) == -n * k);
  }
}

HTEST_CASE("fold: a rank late by milliseconds", "[fold]") {
  for (int k = 0; k < 10; ++k) {
    if (worldRank() == k % worldSize()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    sumOf("fold.late", k);
  }
}

HTEST_CASE("fold: the same name with another shape on one rank fails everywhere, then works",
           "[fold]") {
  for (int k = 0; k < 5; ++k) sumOf("fold.shape", k);  // cached with shape {2}
  // The last rank submits {3} under the cached name: its call is not in the cache, so the round
  // goes to the coordinator, which finds the shapes differ; every rank's call fails.
  const bool odd = worldRank() == worldSize() - 1;
  Tensor t(HCOLL_FLOAT32, {odd ? 3 : 2});
  hcoll_tensor_t d = t.desc();
  hcoll_request_t req = HCOLL_REQUEST_NULL;
  HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "fold.shape", &d, &d, HCOLL_SUM, 1, 1, &req));
  const hcoll_status_t status = waitAndFree(req);
  HINFO("mismatched call: " << hcoll_status_string(status));
  HREQUIRE(status == HCOLL_ERR_MISMATCH);
  for (int k = 0; k < 5; ++k) sumOf("fold.shape", k);  // still right afterwards
}
