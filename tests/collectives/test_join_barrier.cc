// join (joined ranks contribute zeros, AVERAGE still divides by N, last joined rank everywhere,
// allgather while joined is MISMATCH), barrier, and request semantics (test/wait/timeout/free).
#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "support/test_util.h"

using namespace htest;

namespace {

// Value of element i on rank r in the join tests.
double jv(int r, int i) { return (r + 1) * 10 + i; }

// `first` joins at once; the others allreduce (first contributes zeros), then everyone but `last`
// joins; `last` runs alone (all others contribute zeros) and joins last.
void runJoin(int first, int last) {
  const int r = worldRank();
  const int n = worldSize();
  hcoll_request_t join = HCOLL_REQUEST_NULL;
  if (r == first) HCOLL_REQUIRE_OK(hcoll_join(world(), &join));
  if (r != first) {
    Tensor sum(HCOLL_FLOAT64, {5}), avg(HCOLL_FLOAT32, {5}), isum(HCOLL_INT32, {3});
    for (int i = 0; i < 5; ++i) sum.set(i, jv(r, i));
    for (int i = 0; i < 5; ++i) avg.set(i, jv(r, i));
    for (int i = 0; i < 3; ++i) isum.set(i, jv(r, i));
    auto sd = sum.desc(), ad = avg.desc(), id = isum.desc();
    hcoll_request_t q1, q2, q3;
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "join.sum", &sd, &sd, HCOLL_SUM, 1, 1, &q1));
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "join.avg", &ad, &ad, HCOLL_AVERAGE, 1, 1, &q2));
    hcoll_tensor_t grp[] = {id};
    HCOLL_REQUIRE_OK(hcoll_grouped_allreduce(world(), "join.grp", 1, grp, grp, HCOLL_MAX, 1, 1, &q3));
    HCOLL_REQUIRE_OK(waitAndFree(q1));
    HCOLL_REQUIRE_OK(waitAndFree(q2));
    HCOLL_REQUIRE_OK(waitAndFree(q3));
    for (int i = 0; i < 5; ++i) {
      double want = 0;
      for (int k = 0; k < n; ++k) want += k == first ? 0 : jv(k, i);
      HREQUIRE(sum.get(i) == want);
      HREQUIRE(avg.get(i) == Approx(want / n));  // divides by N, not by the ranks that joined
    }
    // MAX with a zero from the joined rank: all values are positive, so zeros never win.
    for (int i = 0; i < 3; ++i) {
      double want = 0;
      for (int k = 0; k < n; ++k) want = std::max(want, k == first ? 0 : jv(k, i));
      HREQUIRE(isum.get(i) == want);
    }
    if (r != last) HCOLL_REQUIRE_OK(hcoll_join(world(), &join));
  }
  if (r == last) {
    // Every other rank has joined once this completes: it needs no one else's tensor.
    Tensor solo(HCOLL_INT64, {2});
    solo.set(0, 7);
    solo.set(1, -3);
    auto d = solo.desc();
    hcoll_request_t q;
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "join.solo", &d, &d, HCOLL_SUM, 1, 1, &q));
    HCOLL_REQUIRE_OK(waitAndFree(q));
    HREQUIRE(solo.get(0) == 7);
    HREQUIRE(solo.get(1) == -3);
    // allgather while other ranks are joined is a MISMATCH naming them.
    HCOLL_REQUIRE_OK(hcoll_allgather(world(), "join.ag", &d, &q));
    HREQUIRE(hcoll_wait(q, 30) == HCOLL_ERR_MISMATCH);
    std::string msg = hcoll_request_error(q);
    HINFO(msg);
    HREQUIRE(msg.find("join.ag") != std::string::npos);
    HREQUIRE(msg.find("joined") != std::string::npos);
    hcoll_request_free(q);
    HCOLL_REQUIRE_OK(hcoll_join(world(), &join));
  }
  HCOLL_REQUIRE_OK(hcoll_wait(join, 30));
  hcoll_tensor_t out;
  HCOLL_REQUIRE_OK(hcoll_request_output(join, 0, &out));
  HREQUIRE(out.dtype == HCOLL_INT32);
  HREQUIRE(out.ndim == 0);
  HREQUIRE(outputElement(out, 0) == last);
  HCOLL_REQUIRE_OK(hcoll_request_free(join));
}

}  // namespace

HTEST_CASE("join: the last rank joins, first rank joined early", "[join]") {
  runJoin(worldSize() - 1, 0);
}

HTEST_CASE("join: the coordinator joins first", "[join]") { runJoin(0, worldSize() - 1); }

HTEST_CASE("join: a second round works and allgather succeeds after everyone joined", "[join]") {
  const int n = worldSize();
  hcoll_request_t join;
  HCOLL_REQUIRE_OK(hcoll_join(world(), &join));
  HCOLL_REQUIRE_OK(hcoll_wait(join, 30));
  hcoll_tensor_t out;
  HCOLL_REQUIRE_OK(hcoll_request_output(join, 0, &out));
  int last = static_cast<int>(outputElement(out, 0));
  HREQUIRE(last >= 0);
  HREQUIRE(last < n);
  hcoll_request_free(join);
  // Everyone sees the same last rank.
  Tensor t(HCOLL_INT32, {1});
  t.set(0, last);
  auto d = t.desc();
  hcoll_request_t req;
  HCOLL_REQUIRE_OK(hcoll_allgather(world(), "join.same", &d, &req));
  HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
  HCOLL_REQUIRE_OK(hcoll_request_output(req, 0, &out));
  for (int k = 0; k < n; ++k) HREQUIRE(outputElement(out, k) == last);
  hcoll_request_free(req);
}

namespace {

// Every rank joins after a delay given by its place in a rotation that puts `last` at the end
// (150 ms apart); returns what join reported, checked to be the same on every rank. Ranks are
// idle until they join, so joins submitted at different times can reach the coordinator in one
// round: the answer must come from when they joined, not from rank numbers.
int joinInTurn(int last) {
  const int r = worldRank();
  const int n = worldSize();
  hcoll_request_t req;
  HCOLL_REQUIRE_OK(hcoll_barrier(world(), &req));  // a common start
  HCOLL_REQUIRE_OK(waitAndFree(req));
  const int place = ((r - last - 1) % n + n) % n;  // last gets n - 1
  std::this_thread::sleep_for(std::chrono::milliseconds(150 * place));
  HCOLL_REQUIRE_OK(hcoll_join(world(), &req));
  HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
  hcoll_tensor_t out;
  HCOLL_REQUIRE_OK(hcoll_request_output(req, 0, &out));
  const int reported = static_cast<int>(outputElement(out, 0));
  hcoll_request_free(req);
  Tensor t(HCOLL_INT32, {1});
  t.set(0, reported);
  auto d = t.desc();
  HCOLL_REQUIRE_OK(hcoll_allgather(world(), "join.turn.same", &d, &req));
  HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
  HCOLL_REQUIRE_OK(hcoll_request_output(req, 0, &out));
  for (int k = 0; k < n; ++k) HREQUIRE(outputElement(out, k) == reported);
  hcoll_request_free(req);
  return reported;
}

}  // namespace

HTEST_CASE("join: reports the rank that joined last in time, whatever its number", "[join]") {
  const int n = worldSize();
  for (int last : {0, n - 1, 1 % n, n / 2}) {
    HINFO("rank " << last << " joins " << 150 * (n - 1) << " ms after the first");
    HREQUIRE(joinInTurn(last) == last);
  }
}

HTEST_CASE("barrier and unnamed allreduce while a rank has joined keep later names aligned",
          "[join][barrier]") {
  // The joined rank takes part in barriers and allreduces that complete without it; its own
  // automatic names ("barrier.<n>", "allreduce.<n>") must move on with them, or its next
  // unnamed call pairs with an older name on the others and never completes.
  const int r = worldRank();
  const int n = worldSize();
  const int joined = n - 1;
  hcoll_request_t join, req;
  if (r == joined) {
    HCOLL_REQUIRE_OK(hcoll_join(world(), &join));
  } else {
    for (int i = 0; i < 2; ++i) {
      HCOLL_REQUIRE_OK(hcoll_barrier(world(), &req));
      HCOLL_REQUIRE_OK(waitAndFree(req, 10));
    }
    Tensor t(HCOLL_INT32, {1});
    t.set(0, 1);
    auto d = t.desc();
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), nullptr, &d, &d, HCOLL_SUM, 1, 1, &req));
    HCOLL_REQUIRE_OK(waitAndFree(req, 10));
    HREQUIRE(t.get(0) == n - 1);  // the joined rank contributed zero
    HCOLL_REQUIRE_OK(hcoll_join(world(), &join));
  }
  HCOLL_REQUIRE_OK(waitAndFree(join, 30));
  for (int i = 0; i < 3; ++i) {
    HCOLL_REQUIRE_OK(hcoll_barrier(world(), &req));
    HCOLL_REQUIRE_OK(waitAndFree(req, 10));
    Tensor t(HCOLL_INT32, {1});
    t.set(0, r + 1);
    auto d = t.desc();
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), nullptr, &d, &d, HCOLL_SUM, 1, 1, &req));
    HCOLL_REQUIRE_OK(waitAndFree(req, 10));
    HREQUIRE(t.get(0) == n * (n + 1) / 2);
  }
}

HTEST_CASE("barrier: completes on every rank, repeatedly", "[barrier]") {
  for (int i = 0; i < 5; ++i) {
    hcoll_request_t req;
    HCOLL_REQUIRE_OK(hcoll_barrier(world(), &req));
    HCOLL_REQUIRE_OK(waitAndFree(req));
  }
}

HTEST_CASE("requests: test is IN_PROGRESS, wait times out, then both SUCCESS", "[requests]") {
  const int r = worldRank();
  const int n = worldSize();
  Tensor t(HCOLL_INT32, {3});
  for (int i = 0; i < 3; ++i) t.set(i, r + i);
  auto d = t.desc();
  hcoll_request_t req = HCOLL_REQUEST_NULL, barrier;
  if (r == 0) {
    // The others submit only after the barrier (which overtakes the pending named op).
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "req.pending", &d, &d, HCOLL_SUM, 1, 1, &req));
    HREQUIRE(hcoll_test(req) == HCOLL_IN_PROGRESS);
    HREQUIRE(std::string(hcoll_request_error(req)).empty());
    hcoll_tensor_t out;
    HREQUIRE(hcoll_request_output(req, 0, &out) == HCOLL_IN_PROGRESS);
    // The wait's own timeout is a state, not a failure of the operation (no error message).
    HREQUIRE(hcoll_wait(req, 0.001) == HCOLL_IN_PROGRESS);
    HREQUIRE(hcoll_wait(req, 0.05) == HCOLL_IN_PROGRESS);
    HREQUIRE(std::string(hcoll_request_error(req)).empty());
    HREQUIRE(hcoll_test(req) == HCOLL_IN_PROGRESS);  // still valid and in flight
    HREQUIRE(hcoll_wait(req, 0) == HCOLL_IN_PROGRESS);
    HCOLL_REQUIRE_OK(hcoll_barrier(world(), &barrier));
    HCOLL_REQUIRE_OK(waitAndFree(barrier));
  } else {
    HCOLL_REQUIRE_OK(hcoll_barrier(world(), &barrier));
    HCOLL_REQUIRE_OK(waitAndFree(barrier));
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "req.pending", &d, &d, HCOLL_SUM, 1, 1, &req));
  }
  HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
  HREQUIRE(hcoll_test(req) == HCOLL_SUCCESS);
  HREQUIRE(hcoll_wait(req, 0) == HCOLL_SUCCESS);  // waiting again is fine
  HCOLL_REQUIRE_OK(hcoll_request_free(req));
  for (int i = 0; i < 3; ++i) HREQUIRE(t.get(i) == n * (n - 1) / 2 + n * i);
}

HTEST_CASE("requests: freeing an in-flight request lets the operation complete", "[requests]") {
  const int r = worldRank();
  const int n = worldSize();
  Tensor t(HCOLL_INT32, {4}), ag(HCOLL_INT32, {2});
  for (int i = 0; i < 4; ++i) t.set(i, 1);
  auto d = t.desc(), agd = ag.desc();
  hcoll_request_t req, agReq, barrier;
  if (r == 0) {
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "req.freed", &d, &d, HCOLL_SUM, 1, 1, &req));
    HCOLL_REQUIRE_OK(hcoll_allgather(world(), "req.freed.ag", &agd, &agReq));
    HCOLL_REQUIRE_OK(hcoll_request_free(req));  // in flight: the others have not submitted
    HCOLL_REQUIRE_OK(hcoll_request_free(agReq));  // its output is discarded
    HREQUIRE(hcoll_test(req) == HCOLL_ERR_INVALID_HANDLE);
    HCOLL_REQUIRE_OK(hcoll_barrier(world(), &barrier));
    HCOLL_REQUIRE_OK(waitAndFree(barrier));
  } else {
    HCOLL_REQUIRE_OK(hcoll_barrier(world(), &barrier));
    HCOLL_REQUIRE_OK(waitAndFree(barrier));
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "req.freed", &d, &d, HCOLL_SUM, 1, 1, &req));
    HCOLL_REQUIRE_OK(hcoll_allgather(world(), "req.freed.ag", &agd, &agReq));
    HCOLL_REQUIRE_OK(waitAndFree(req));
    HCOLL_REQUIRE_OK(waitAndFree(agReq));
  }
  // A later op completes on every rank after the freed one (first announced, first executed).
  Tensor after(HCOLL_INT32, {1});
  after.set(0, 1);
  auto ad = after.desc();
  HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "req.after", &ad, &ad, HCOLL_SUM, 1, 1, &req));
  HCOLL_REQUIRE_OK(waitAndFree(req));
  HREQUIRE(after.get(0) == n);
  for (int i = 0; i < 4; ++i) HREQUIRE(t.get(i) == n);
}
