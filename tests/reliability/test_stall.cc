// The stall inspector end to end, with HCOLL_STALL_CHECK_TIME_SECONDS=1,
// HCOLL_STALL_SHUTDOWN_TIME_SECONDS=3 and HCOLL_FLIGHT_RECORDER set by CTest.
//   [coordinator]: both ranks are busy but each submitted an op the other did not; rank 0's
//     coordinator warns naming the op and the missing rank, then fails both with TIMEOUT; the
//     communicator keeps working and another communicator is unaffected meanwhile.
//   [idle]: the missing rank has nothing pending on the communicator, so its thread sleeps and
//     rounds cannot complete; the waiting rank still warns and times out, and the communicator
//     then refuses new work with a clear error while the world keeps working.
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "reliability/stderr_capture.h"
#include "support/test_util.h"

using namespace htest;
using Clock = std::chrono::steady_clock;

namespace {

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

hcoll_comm_t splitAll() {
  hcoll_comm_t c = HCOLL_COMM_NULL;
  REQUIRE(hcoll_comm_split(world(), 0, worldRank(), &c) == HCOLL_SUCCESS);
  return c;
}

void allreduceOk(hcoll_comm_t c, const char* name) {
  Tensor t(HCOLL_INT32, {4});
  for (int i = 0; i < 4; ++i) t.set(i, 1);
  auto d = t.desc();
  hcoll_request_t req;
  HCOLL_REQUIRE_OK(hcoll_allreduce(c, name, &d, &d, HCOLL_SUM, 1, 1, &req));
  HCOLL_REQUIRE_OK(waitAndFree(req, 10));
  REQUIRE(t.get(3) == sizeOf(c));
}

std::string recorderFile() {
  const char* p = std::getenv("HCOLL_FLIGHT_RECORDER");
  return p ? std::string(p) + "." + std::to_string(worldRank()) : std::string();
}

}  // namespace

TEST_CASE("stall: ops some ranks never submit warn, then time out", "[coordinator]") {
  const int r = worldRank();
  REQUIRE(worldSize() == 2);
  hcoll_comm_t stalled = splitAll();
  hcoll_comm_t other = splitAll();
  StderrCapture log("stall-coordinator.log." + std::to_string(r));

  Tensor t(HCOLL_FLOAT32, {8});
  auto d = t.desc();
  hcoll_request_t req;
  const char* mine = r == 0 ? "only-on-rank-0" : "only-on-rank-1";
  HCOLL_REQUIRE_OK(hcoll_allreduce(stalled, mine, &d, &d, HCOLL_SUM, 1, 1, &req));
  const auto start = Clock::now();

  // Another communicator keeps working at full speed while this one stalls (a fixed number of
  // paced ops, the same on both ranks, spanning the stall shutdown time).
  for (int n = 0; n < 100; ++n) {
    const auto opStart = Clock::now();
    allreduceOk(other, ("other." + std::to_string(n)).c_str());
    REQUIRE(secondsSince(opStart) < 1.0);
    std::this_thread::sleep_for(std::chrono::milliseconds(45));
  }
  hcoll_status_t s = hcoll_wait(req, 10);
  const double waited = secondsSince(start);
  std::string message = hcoll_request_error(req);
  hcoll_request_free(req);
  INFO("status " << hcoll_status_string(s) << ": " << message);
  REQUIRE(s == HCOLL_ERR_TIMEOUT);
  REQUIRE(waited >= 2.5);
  REQUIRE(waited < 8.0);
  REQUIRE(message.find(mine) != std::string::npos);
  REQUIRE(message.find(r == 0 ? "ranks [1] did not submit it" : "ranks [0] did not submit it") !=
          std::string::npos);

  // The coordinator (rank 0) named both ops and who is missing, and dumped its recorder.
  if (r == 0) {
    std::string text = log.text();
    INFO(text);
    REQUIRE(text.find("stall: operation 'only-on-rank-0'") != std::string::npos);
    REQUIRE(text.find("ranks [1] have not submitted it") != std::string::npos);
    REQUIRE(text.find("ranks [0] have not submitted it") != std::string::npos);
    REQUIRE(text.find("flight recorder: communicator") != std::string::npos);
    if (!recorderFile().empty()) {
      std::string dump = readFile(recorderFile());
      INFO(dump);
      REQUIRE(dump.find("'only-on-rank-0' allreduce float32") != std::string::npos);
    }
  }
  // After a stall shutdown the communicator keeps working.
  allreduceOk(stalled, "after-stall");
  REQUIRE(hcoll_comm_destroy(stalled) == HCOLL_SUCCESS);
  REQUIRE(hcoll_comm_destroy(other) == HCOLL_SUCCESS);
}

TEST_CASE("stall: the missing rank is idle on the communicator", "[idle]") {
  const int r = worldRank();
  REQUIRE(worldSize() == 2);
  hcoll_comm_t c = splitAll();
  StderrCapture log("stall-idle.log." + std::to_string(r));
  if (r == 0) {
    Tensor t(HCOLL_INT64, {3});
    auto d = t.desc();
    hcoll_request_t req;
    HCOLL_REQUIRE_OK(hcoll_allreduce(c, "waits-for-idle-rank", &d, &d, HCOLL_SUM, 1, 1, &req));
    const auto start = Clock::now();
    hcoll_status_t s = hcoll_wait(req, 15);
    const double waited = secondsSince(start);
    std::string message = hcoll_request_error(req);
    hcoll_request_free(req);
    INFO("status " << hcoll_status_string(s) << ": " << message);
    REQUIRE(s == HCOLL_ERR_TIMEOUT);
    REQUIRE(waited >= 2.5);
    REQUIRE(waited < 8.0);
    REQUIRE(message.find("'waits-for-idle-rank'") != std::string::npos);
    REQUIRE(message.find("unusable") != std::string::npos);
    std::string text = log.text();
    INFO(text);
    REQUIRE(text.find("stall: rank 0 has waited") != std::string::npos);
    REQUIRE(text.find("operations pending here: 'waits-for-idle-rank'") != std::string::npos);
    REQUIRE(text.find("flight recorder: communicator") != std::string::npos);
    REQUIRE(text.find("'waits-for-idle-rank' allreduce int64 members=1 elements=3 bytes=24 "
                      "state=submitted") != std::string::npos);
    // The communicator refuses new work, saying why.
    hcoll_status_t again = hcoll_allreduce(c, "next", &d, &d, HCOLL_SUM, 1, 1, &req);
    REQUIRE(again == HCOLL_ERR_SHUT_DOWN);
    REQUIRE(std::string(hcoll_last_error()).find("unusable") != std::string::npos);
  }
  // The world is unaffected. Rank 1 first lets rank 0 finish its ~3 s stall: waiting that long
  // on the world would itself be a stall past the shutdown time.
  if (r == 1) std::this_thread::sleep_for(std::chrono::seconds(4));
  allreduceOk(world(), "world-after-idle-stall");
  // The timeout reached rank 1 too (rank 0 told it when it gave up): destroying the broken
  // communicator is immediate on both ranks, and rank 1's submissions on it fail meanwhile.
  if (r == 1) {
    Tensor t(HCOLL_INT64, {3});
    auto d = t.desc();
    hcoll_request_t req;
    REQUIRE(hcoll_allreduce(c, "late", &d, &d, HCOLL_SUM, 1, 1, &req) == HCOLL_ERR_SHUT_DOWN);
    INFO(hcoll_last_error());
    REQUIRE(std::string(hcoll_last_error()).find("timed out") != std::string::npos);
  }
  const auto start = Clock::now();
  REQUIRE(hcoll_comm_destroy(c) == HCOLL_SUCCESS);
  REQUIRE(secondsSince(start) < 1.0);
  allreduceOk(world(), "world-after-destroy");
}

TEST_CASE("stall: the warning names the idle rank among several", "[idle_named]") {
  // At 3 ranks, ranks 0 and 1 wait for rank 2, which has nothing pending and so never enters a
  // negotiation round: the warnings and the timeout name rank 2, not "the other 2 rank(s)".
  const int r = worldRank();
  const int n = worldSize();
  REQUIRE(n >= 3);
  const int idle = n - 1;
  hcoll_comm_t c = splitAll();
  StderrCapture log("stall-idle-named.log." + std::to_string(r));
  const std::string idleList = "ranks [" + std::to_string(idle) + "] of the communicator";
  if (r != idle) {
    Tensor t(HCOLL_INT64, {3});
    auto d = t.desc();
    hcoll_request_t req;
    HCOLL_REQUIRE_OK(hcoll_allreduce(c, "waits-for-the-idle-rank", &d, &d, HCOLL_SUM, 1, 1, &req));
    hcoll_status_t s = hcoll_wait(req, 15);
    std::string message = hcoll_request_error(req);
    hcoll_request_free(req);
    INFO("status " << hcoll_status_string(s) << ": " << message);
    REQUIRE(s == HCOLL_ERR_TIMEOUT);
    REQUIRE(message.find(idleList) != std::string::npos);
    std::string text = log.text();
    INFO(text);
    REQUIRE(text.find("stall: rank " + std::to_string(r) + " has waited") != std::string::npos);
    REQUIRE(text.find("for " + idleList + ", which have not entered this negotiation round") !=
            std::string::npos);
    REQUIRE(text.find("the other " + std::to_string(n - 1) + " rank(s)") == std::string::npos);
  }
  // As in [idle]: the idle rank lets the others finish their ~3 s stall before using the world.
  if (r == idle) std::this_thread::sleep_for(std::chrono::seconds(4));
  allreduceOk(world(), "world-after-idle-named-stall");
  // The ranks that timed out told the idle rank: every destroy is immediate.
  const auto start = Clock::now();
  REQUIRE(hcoll_comm_destroy(c) == HCOLL_SUCCESS);
  REQUIRE(secondsSince(start) < 1.0);
  allreduceOk(world(), "world-after-idle-named-destroy");
}
