// Shutdown with work in flight never hangs and completes every pending request with SHUT_DOWN
// (or TIMEOUT once a peer is gone). One scenario per run, chosen by argv[1]:
//   in-flight:  rank 0 has an op rank 1 never submits; both shut down; a thread blocked in
//               hcoll_wait(-1) on it returns SHUT_DOWN and shutdown returns promptly.
//   peer-gone:  rank 1 shuts down and exits while rank 0 still has work rank 1 never submits;
//               rank 0's request fails within the stall shutdown time and its shutdown returns.
//   peer-gone-pending MARKER:
//               rank 1 shuts down and exits (then creates the file MARKER); only after that
//               does rank 0 submit work: the submission fails with SHUT_DOWN naming rank 1 (its
//               leave was announced), and rank 0's shutdown returns at once.
//   destroy:    destroying a communicator with an unmatched op in flight completes it with
//               SHUT_DOWN on the submitting rank.
// Prints PASS/FAIL lines; exits non-zero on failure.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "hcoll/hcoll.h"

namespace {

using Clock = std::chrono::steady_clock;
int gFailures = 0;

void check(bool ok, const char* what, const std::string& detail = "") {
  std::printf("%s: %s %s\n", ok ? "PASS" : "FAIL", what, detail.c_str());
  std::fflush(stdout);
  if (!ok) ++gFailures;
}

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Waiter {
  hcoll_status_t status = HCOLL_IN_PROGRESS;
  std::string message;
  double at = -1;
  std::thread thread;
  void start(hcoll_request_t req, Clock::time_point origin) {
    thread = std::thread([this, req, origin] {
      status = hcoll_wait(req, -1);
      message = hcoll_request_error(req);
      at = since(origin);
    });
  }
};

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "in-flight";
  if (hcoll_initialize(nullptr) != HCOLL_SUCCESS) {
    std::fprintf(stderr, "init: %s\n", hcoll_last_error());
    return 2;
  }
  hcoll_comm_t w;
  hcoll_comm_world(&w);
  int rank = 0;
  hcoll_comm_rank(w, &rank);
  float data[16] = {};
  int64_t shape[] = {16};
  hcoll_tensor_t t{data, HCOLL_FLOAT32, 1, shape, HCOLL_DEVICE_HOST, nullptr};
  hcoll_request_t req;
  Waiter waiter;
  const auto origin = Clock::now();

  if (scenario == "in-flight") {
    if (rank == 0) {
      check(hcoll_allreduce(w, "never-matched", &t, &t, HCOLL_SUM, 1, 1, &req) == HCOLL_SUCCESS,
            "submit");
      waiter.start(req, origin);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    const auto start = Clock::now();
    check(hcoll_shutdown() == HCOLL_SUCCESS, "shutdown returns success", hcoll_last_error());
    check(since(start) < 5.0, "shutdown returns promptly", std::to_string(since(start)) + " s");
    if (rank == 0) {
      waiter.thread.join();
      check(waiter.status == HCOLL_ERR_SHUT_DOWN, "pending request completes with SHUT_DOWN",
            hcoll_status_string(waiter.status) + std::string(": ") + waiter.message);
    }
  } else if (scenario == "peer-gone") {
    if (rank == 1) {
      const auto start = Clock::now();
      check(hcoll_shutdown() == HCOLL_SUCCESS, "rank 1 shutdown");
      check(since(start) < 10.0, "rank 1 shutdown is bounded", std::to_string(since(start)) + " s");
      return gFailures ? 1 : 0;  // exits (finalizing MPI) while rank 0 still has work
    }
    check(hcoll_allreduce(w, "peer-never-submits", &t, &t, HCOLL_SUM, 1, 1, &req) == HCOLL_SUCCESS,
          "submit");
    waiter.start(req, origin);
    waiter.thread.join();
    check(waiter.status == HCOLL_ERR_TIMEOUT || waiter.status == HCOLL_ERR_SHUT_DOWN,
          "request fails once the peer is gone",
          hcoll_status_string(waiter.status) + std::string(": ") + waiter.message);
    check(waiter.at < 15.0, "within the stall bound", std::to_string(waiter.at) + " s");
    const auto start = Clock::now();
    check(hcoll_shutdown() == HCOLL_SUCCESS, "rank 0 shutdown", hcoll_last_error());
    check(since(start) < 10.0, "rank 0 shutdown is bounded", std::to_string(since(start)) + " s");
  } else if (scenario == "peer-gone-pending") {
    if (argc < 3) {
      check(false, "peer-gone-pending needs a marker path");
      return 1;
    }
    const std::string marker = argv[2];
    // The marker must not be left over from an earlier run: rank 1 removes it, and the barrier
    // keeps rank 0 from looking before that.
    if (rank == 1) std::remove(marker.c_str());
    hcoll_request_t b;
    check(hcoll_barrier(w, &b) == HCOLL_SUCCESS && hcoll_wait(b, 30) == HCOLL_SUCCESS, "barrier");
    hcoll_request_free(b);
    if (rank == 1) {
      const auto start = Clock::now();
      check(hcoll_shutdown() == HCOLL_SUCCESS, "rank 1 shutdown");
      check(since(start) < 15.0, "rank 1 shutdown is bounded", std::to_string(since(start)) + " s");
      if (FILE* f = std::fopen(marker.c_str(), "w")) std::fclose(f);
      return gFailures ? 1 : 0;
    }
    bool gone = false;
    while (!gone && since(origin) < 30.0) {
      if (FILE* f = std::fopen(marker.c_str(), "r")) {
        std::fclose(f);
        gone = true;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    check(gone, "rank 1 has shut down");
    // Rank 1 announced its leave: submissions on the world fail at once, naming it.
    hcoll_status_t s = hcoll_allreduce(w, "pending-at-shutdown", &t, &t, HCOLL_SUM, 1, 1, &req);
    const std::string why = hcoll_last_error();
    check(s == HCOLL_ERR_SHUT_DOWN && why.find("rank 1") != std::string::npos,
          "submit after the peer is gone fails with SHUT_DOWN naming it", why);
    const auto start = Clock::now();
    check(hcoll_shutdown() == HCOLL_SUCCESS, "rank 0 shutdown", hcoll_last_error());
    check(since(start) < 1.0, "rank 0 shutdown is immediate", std::to_string(since(start)) + " s");
    std::remove(marker.c_str());
  } else if (scenario == "destroy") {
    hcoll_comm_t c;
    check(hcoll_comm_split(w, 0, rank, &c) == HCOLL_SUCCESS, "split");
    if (rank == 0) {
      check(hcoll_allreduce(c, "unmatched", &t, &t, HCOLL_SUM, 1, 1, &req) == HCOLL_SUCCESS,
            "submit");
      waiter.start(req, origin);
    }
    const auto start = Clock::now();
    check(hcoll_comm_destroy(c) == HCOLL_SUCCESS, "destroy", hcoll_last_error());
    check(since(start) < 5.0, "destroy returns promptly", std::to_string(since(start)) + " s");
    if (rank == 0) {
      waiter.thread.join();
      check(waiter.status == HCOLL_ERR_SHUT_DOWN, "pending request completes with SHUT_DOWN",
            hcoll_status_string(waiter.status) + std::string(": ") + waiter.message);
    }
    hcoll_request_t b;
    check(hcoll_barrier(w, &b) == HCOLL_SUCCESS && hcoll_wait(b, 10) == HCOLL_SUCCESS,
          "the world still works");
    hcoll_request_free(b);
    check(hcoll_shutdown() == HCOLL_SUCCESS, "shutdown");
  } else {
    check(false, "unknown scenario", scenario);
  }
  return gFailures ? 1 : 0;
}
