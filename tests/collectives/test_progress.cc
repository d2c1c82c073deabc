// Caller progress: a caller waiting on a host operation runs its communicator's rounds on its own
// thread (hcoll_comm_stats' caller_rounds counts them); an operation nobody waits on still runs
// (the communicator's thread takes it); a wait with a deadline hands a round the peers have not
// entered back to the thread on time, and the thread finishes it. HCOLL_CALLER_PROGRESS=0 (the
// "thread_only" variant) runs every round on the thread and changes no result.
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "support/test_util.h"

using namespace htest;

namespace {

bool callerProgressOff() {
  const char* v = std::getenv("HCOLL_CALLER_PROGRESS");
  return v != nullptr && std::string(v) == "0";
}

// A host int32 allreduce of rank + i named `name`, submitted (not waited for).
struct Sum {
  Tensor t{HCOLL_INT32, {4}};
  hcoll_tensor_t d{};
  hcoll_request_t req = HCOLL_REQUEST_NULL;
  explicit Sum(const char* name) {
    for (int i = 0; i < 4; ++i) t.set(i, worldRank() + i);
    d = t.desc();
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), name, &d, &d, HCOLL_SUM, 1, 1, &req));
  }
  void check() const {
    const int n = worldSize();
    for (int i = 0; i < 4; ++i) HREQUIRE(t.get(i) == n * (n - 1) / 2 + n * i);
  }
};

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Polls with hcoll_test only (which never drives: the communicator's thread must run the
// operation) until it is no longer in progress or 20 s passed since `start`; frees it on success.
hcoll_status_t testUntilDone(hcoll_request_t req, std::chrono::steady_clock::time_point start) {
  hcoll_status_t status;
  while ((status = hcoll_test(req)) == HCOLL_IN_PROGRESS && secondsSince(start) < 20) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (status == HCOLL_SUCCESS) status = hcoll_request_free(req);
  return status;
}

}  // namespace

HTEST_CASE("progress: a waiting caller runs its own rounds", "[progress]") {
  const auto before = commStats(world());
  constexpr int kCalls = 50;
  for (int k = 0; k < kCalls; ++k) {
    // A pause first lets the communicator's thread fall asleep, as between the steps of a real
    // loop: back to back on an oversubscribed machine (a sanitizer build in CI) its post-round
    // polling can win every race for the seat, and the caller then never drives (seen once).
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    Sum s(("progress.loop." + std::to_string(k)).c_str());
    HCOLL_REQUIRE_OK(waitAndFree(s.req));
    s.check();
  }
  const auto after = commStats(world());
  const uint64_t byCaller = after.caller_rounds - before.caller_rounds;
  const uint64_t rounds = after.cycles - before.cycles;
  HINFO("rounds " << rounds << ", run by the waiting caller " << byCaller);
  HREQUIRE(byCaller <= rounds);
  if (callerProgressOff()) {
    HREQUIRE(byCaller == 0);
  } else {
    // Most of them; at least one even on a loaded machine (a caller that reaches its wait after
    // the claim window, or finds the thread polling for more work, leaves it to the thread).
    HREQUIRE(byCaller >= 1);
  }
}

HTEST_CASE("progress: an operation nobody waits on still runs", "[progress]") {
  Sum s("progress.unwaited");
  if (worldRank() == 0) {
    HCOLL_REQUIRE_OK(testUntilDone(s.req, std::chrono::steady_clock::now()));
  } else {
    HCOLL_REQUIRE_OK(waitAndFree(s.req));
  }
  s.check();
}

HTEST_CASE("progress: a wait's deadline hands the round to the thread, which finishes it",
           "[progress]") {
  hcoll_request_t barrier;
  HCOLL_REQUIRE_OK(hcoll_barrier(world(), &barrier));
  HCOLL_REQUIRE_OK(waitAndFree(barrier));
  if (worldRank() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  Sum s("progress.late");
  if (worldRank() == 0) {
    // The others submit 1.5 s later: this wait (driving the round, or not) returns on time.
    const auto start = std::chrono::steady_clock::now();
    HREQUIRE(hcoll_wait(s.req, 0.2) == HCOLL_IN_PROGRESS);
    const double waited = secondsSince(start);
    HINFO("hcoll_wait(0.2) returned after " << waited << " s");
    HREQUIRE(waited < 1.0);
    HREQUIRE(std::string(hcoll_request_error(s.req)).empty());
    // No more waits: the round left in flight completes on the thread once the others join.
    HCOLL_REQUIRE_OK(testUntilDone(s.req, start));
  } else {
    HCOLL_REQUIRE_OK(waitAndFree(s.req));
  }
  s.check();
}

HTEST_CASE("progress: two threads waiting on one communicator", "[progress]") {
  // One drives, the other finds the seat taken and waits; both complete, in any order.
  Sum a("progress.pair.a");
  Sum b("progress.pair.b");
  hcoll_status_t sa = HCOLL_ERR_INTERNAL;
  std::thread other([&] { sa = waitAndFree(a.req); });
  const hcoll_status_t sb = waitAndFree(b.req);
  other.join();
  HREQUIRE(sa == HCOLL_SUCCESS);
  HREQUIRE(sb == HCOLL_SUCCESS);
  a.check();
  b.check();
}
