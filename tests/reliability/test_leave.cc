// A member that leaves, aborts or is configured differently never hangs the others or makes them
// compute wrong data. One scenario per run, chosen by argv[1]; run_bounded.sh times the whole
// job. Prints PASS/FAIL lines; exits non-zero on failure.
//   return-from-main MARKER  rank 1 returns from main without hcoll_shutdown (writing the time
//                            it left to MARKER first) while rank 0 waits on an op rank 1 never
//                            submits: rank 0 gets SHUT_DOWN naming rank 1 and the op within 1 s.
//   shutdown-while-waiting   the same with an explicit hcoll_shutdown on rank 1; later
//                            submissions on rank 0 fail with SHUT_DOWN at once.
//   unnamed-ahead-shutdown   unnamed cached calls, rank 0 a call ahead: the common one sums
//                            right; rank 1 then shuts down and rank 0's extra one fails with
//                            SHUT_DOWN within 1 s.
//   destroy-split            rank 1 destroys a split communicator while rank 0 waits on it:
//                            rank 0's op fails within 1 s, its destroy returns, world works.
//   idle-peer                rank 1 shuts down while rank 0 has nothing pending: rank 1's
//                            shutdown returns within 1 s (rank 0's idle thread joins its final
//                            round); rank 0's next submission fails with SHUT_DOWN.
//   np3-leave                3 ranks: rank 2 shuts down while ranks 0 and 1 wait on world ops
//                            it never submits: they fail within 1 s; their own 2-rank
//                            communicator keeps working.
//   abort                    rank 1 calls hcoll_abort while rank 0 waits: the job ends.
//   set-timeout              hcoll_comm_set_timeout: different values -> MISMATCH on both, an
//                            invalid value -> INVALID_ARGUMENT there and MISMATCH on the peer;
//                            then 1 s on both: an op rank 1 never submits fails with TIMEOUT on
//                            rank 0 within a few seconds, and rank 1 (idle) learns it too.
//   stuck-transfer PIDFILE   rank 1 stops itself (SIGSTOP) in the middle of a 128 MB grouped
//                            allreduce; rank 0 (timeout 2 s) gets TIMEOUT, and its hcoll_shutdown
//                            returns within the bound; then it resumes rank 1 (SIGCONT).
//   killed-transfer PIDFILE  the same with SIGKILL: the job ends within the bound (the launcher
//                            ends it, or rank 0's op fails and it exits).
//   peer-dies-after-close PIDFILE  both ranks close cleanly (hcoll_shutdown), then rank 1 stops
//                            (SIGSTOP) before its MPI_Finalize; rank 0 returns 0 from main, and
//                            its exit's MPI_Finalize, which waits for rank 1 forever, ends within
//                            the exit bound; then rank 1 is SIGKILLed (run_exit_bound.sh).
//   peer-works-after-close   rank 0 closes and returns from main while rank 1, alive and busy
//                            with work of its own, closes 6 s later (beyond the 3 s exit bound):
//                            rank 0's exit waits for it (no watchdog: the ranks did not close
//                            together), and rank 1 finishes its work (a watchdog ending rank 0
//                            inside MPI_Finalize would have the launcher end rank 1 too).
//   settings-differ VAR      rank-dependent environment (set by the launcher): hcoll_initialize
//                            fails with INVALID_ARGUMENT naming VAR on every rank.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "hcoll/hcoll.h"

namespace {

using Clock = std::chrono::steady_clock;
int gFailures = 0;
int gRank = -1;

void check(bool ok, const char* what, const std::string& detail = "") {
  std::printf("rank %d: %s: %s %s\n", gRank, ok ? "PASS" : "FAIL", what, detail.c_str());
  std::fflush(stdout);
  if (!ok) ++gFailures;
}

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Wall-clock seconds, comparable between the processes of one machine.
double wallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Submits an in-place SUM allreduce of `data`; returns the call's status.
hcoll_status_t submitAllreduce(hcoll_comm_t comm, const char* name, std::vector<float>& data,
                               hcoll_request_t* req) {
  int64_t shape[1] = {static_cast<int64_t>(data.size())};
  hcoll_tensor_t t = {data.data(), HCOLL_FLOAT32, 1, shape, HCOLL_DEVICE_HOST, nullptr};
  return hcoll_allreduce(comm, name, &t, &t, HCOLL_SUM, 1.0, 1.0, req);
}

// Submits one that must be accepted (a refusal is printed; the request is then null).
hcoll_request_t allreduce(hcoll_comm_t comm, const char* name, std::vector<float>& data) {
  hcoll_request_t req = HCOLL_REQUEST_NULL;
  hcoll_status_t s = submitAllreduce(comm, name, data, &req);
  if (s != HCOLL_SUCCESS) {
    std::printf("rank %d: allreduce '%s' returned %s: %s\n", gRank, name,
                hcoll_status_string(s), hcoll_last_error());
  }
  return req;
}

void barrier(hcoll_comm_t comm) {
  hcoll_request_t req;
  if (hcoll_barrier(comm, &req) != HCOLL_SUCCESS) return;
  hcoll_wait(req, -1);
  hcoll_request_free(req);
}

int returnFromMain(hcoll_comm_t world, const std::string& marker) {
  if (gRank == 1) {
    barrier(world);
    std::ofstream(marker) << std::to_string(wallNow()) << "\n";
    std::printf("rank 1: returning from main without hcoll_shutdown\n");
    std::fflush(stdout);
    return 0;  // the exit path announces the leave
  }
  std::remove(marker.c_str());
  std::vector<float> data(16, 1.0f);
  hcoll_request_t req = allreduce(world, "never-submitted-by-1", data);
  barrier(world);  // overtakes the pending named op
  hcoll_status_t s = hcoll_wait(req, 30);
  const double failedAt = wallNow();
  const std::string message = hcoll_request_error(req);
  check(s == HCOLL_ERR_SHUT_DOWN, "pending op fails with SHUT_DOWN",
        std::string(hcoll_status_string(s)) + ": " + message);
  check(contains(message, "rank 1") && contains(message, "never-submitted-by-1"),
        "the message names rank 1 and the operation", message);
  double leftAt = 0;
  std::ifstream(marker) >> leftAt;
  check(leftAt > 0 && failedAt - leftAt <= 1.0, "error within 1 s of rank 1 leaving",
        std::to_string(failedAt - leftAt) + " s");
  hcoll_request_free(req);
  hcoll_shutdown();
  return gFailures == 0 ? 0 : 1;
}

int shutdownWhileWaiting(hcoll_comm_t world) {
  if (gRank == 1) {
    barrier(world);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    hcoll_shutdown();
    return 0;
  }
  std::vector<float> data(16, 1.0f);
  hcoll_request_t req = allreduce(world, "pending-at-peer-shutdown", data);
  barrier(world);
  const auto start = Clock::now();
  hcoll_status_t s = hcoll_wait(req, 30);
  const std::string message = hcoll_request_error(req);
  check(s == HCOLL_ERR_SHUT_DOWN && since(start) < 1.2 + 0.2,
        "pending op fails with SHUT_DOWN within 1 s of the peer's shutdown",
        std::to_string(since(start) - 0.2) + " s: " + message);
  check(contains(message, "rank 1") && contains(message, "pending-at-peer-shutdown"),
        "the message names rank 1 and the operation", message);
  hcoll_request_free(req);
  hcoll_request_t later = HCOLL_REQUEST_NULL;
  s = submitAllreduce(world, "after", data, &later);
  check(s == HCOLL_ERR_SHUT_DOWN && contains(hcoll_last_error(), "rank 1"),
        "a later submission fails with SHUT_DOWN naming rank 1", hcoll_last_error());
  const auto closing = Clock::now();
  hcoll_shutdown();
  check(since(closing) < 1.0, "shutdown returns at once", std::to_string(since(closing)) + " s");
  return gFailures == 0 ? 0 : 1;
}

// Unnamed calls through the response cache with rank 0 a call ahead (the round compares their
// names in a second exchange): the common call completes with the right sum on both, and when
// rank 1 then shuts down, rank 0's second call fails with SHUT_DOWN instead of waiting.
int unnamedAheadShutdown(hcoll_comm_t world) {
  std::vector<float> a(16), b(8);
  for (int step = 0; step < 3; ++step) {  // both shapes cached from the second step on
    for (std::vector<float>* v : {&a, &b}) {
      std::fill(v->begin(), v->end(), 1.0f);
      hcoll_request_t req = allreduce(world, nullptr, *v);
      hcoll_wait(req, 30);
      hcoll_request_free(req);
    }
  }
  std::fill(a.begin(), a.end(), static_cast<float>(gRank + 1));
  hcoll_request_t qa = allreduce(world, nullptr, a);
  hcoll_request_t qb = HCOLL_REQUEST_NULL;
  if (gRank == 0) qb = allreduce(world, nullptr, b);  // the peer never submits it
  hcoll_status_t s = hcoll_wait(qa, 30);
  check(s == HCOLL_SUCCESS && a[15] == 3.0f, "the call both ranks made gives the right sum",
        std::string(hcoll_status_string(s)) + ", " + std::to_string(a[15]));
  hcoll_request_free(qa);
  if (gRank == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    hcoll_shutdown();
    return gFailures == 0 ? 0 : 1;
  }
  const auto start = Clock::now();
  s = hcoll_wait(qb, 30);
  const std::string message = hcoll_request_error(qb);
  check(s == HCOLL_ERR_SHUT_DOWN && since(start) < 1.2 + 0.2,
        "the call rank 1 never made fails with SHUT_DOWN within 1 s of its shutdown",
        std::to_string(since(start) - 0.2) + " s: " + message);
  check(contains(message, "rank 1"), "the message names rank 1", message);
  hcoll_request_free(qb);
  hcoll_shutdown();
  return gFailures == 0 ? 0 : 1;
}

int destroySplit(hcoll_comm_t world) {
  hcoll_comm_t sub = HCOLL_COMM_NULL;
  if (hcoll_comm_split(world, 0, gRank, &sub) != HCOLL_SUCCESS) {
    check(false, "split", hcoll_last_error());
    return 1;
  }
  if (gRank == 1) {
    barrier(world);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const auto start = Clock::now();
    check(hcoll_comm_destroy(sub) == HCOLL_SUCCESS, "destroy", hcoll_last_error());
    check(since(start) < 1.0, "destroy returns within 1 s", std::to_string(since(start)) + " s");
  } else {
    std::vector<float> data(16, 1.0f);
    hcoll_request_t req = allreduce(sub, "on-split", data);
    barrier(world);
    const auto start = Clock::now();
    hcoll_status_t s = hcoll_wait(req, 30);
    const std::string message = hcoll_request_error(req);
    check(s == HCOLL_ERR_SHUT_DOWN && since(start) < 1.4,
          "op on the split fails with SHUT_DOWN within 1 s of the peer's destroy",
          std::to_string(since(start) - 0.2) + " s: " + message);
    check(contains(message, "rank 1") && contains(message, "on-split"), "message names them",
          message);
    hcoll_request_free(req);
    const auto destroying = Clock::now();
    check(hcoll_comm_destroy(sub) == HCOLL_SUCCESS, "own destroy", hcoll_last_error());
    check(since(destroying) < 1.0, "own destroy returns at once");
  }
  // The world is unaffected.
  std::vector<float> data(8, static_cast<float>(gRank + 1));
  hcoll_request_t req = allreduce(world, "world-after", data);
  check(hcoll_wait(req, 30) == HCOLL_SUCCESS && data[0] == 3.0f, "world still works",
        hcoll_request_error(req));
  hcoll_request_free(req);
  hcoll_shutdown();
  return gFailures == 0 ? 0 : 1;
}

int idlePeer(hcoll_comm_t world) {
  barrier(world);
  if (gRank == 1) {
    const auto start = Clock::now();
    hcoll_shutdown();
    check(since(start) < 1.0, "shutdown with an idle peer returns within 1 s",
          std::to_string(since(start)) + " s");
    return gFailures == 0 ? 0 : 1;
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  std::vector<float> data(16, 1.0f);
  hcoll_request_t req;
  hcoll_status_t s = submitAllreduce(world, "after-peer-left", data, &req);
  check(s == HCOLL_ERR_SHUT_DOWN && contains(hcoll_last_error(), "rank 1"),
        "the next submission fails with SHUT_DOWN naming rank 1", hcoll_last_error());
  hcoll_shutdown();
  return gFailures == 0 ? 0 : 1;
}

int np3Leave(hcoll_comm_t world) {
  const int ranks01[2] = {0, 1};
  hcoll_comm_t pair = HCOLL_COMM_NULL;
  if (hcoll_comm_create(world, ranks01, 2, &pair) != HCOLL_SUCCESS) {
    check(false, "create", hcoll_last_error());
    return 1;
  }
  if (gRank == 2) {
    barrier(world);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    hcoll_shutdown();
    return 0;
  }
  const char* name = gRank == 0 ? "world-op-a" : "world-op-b";
  std::vector<float> pending(16, 1.0f);
  hcoll_request_t waiting = allreduce(world, name, pending);
  barrier(world);  // overtakes the pending named ops; then rank 2 leaves
  const auto start = Clock::now();
  hcoll_status_t s = hcoll_wait(waiting, 30);
  const std::string message = hcoll_request_error(waiting);
  check(s == HCOLL_ERR_SHUT_DOWN && since(start) < 1.4,
        "world op fails with SHUT_DOWN within 1 s of rank 2 leaving",
        std::to_string(since(start) - 0.2) + " s: " + message);
  check(contains(message, "rank 2") && contains(message, name), "message names them", message);
  hcoll_request_free(waiting);
  std::vector<float> data(8, static_cast<float>(gRank + 1));
  hcoll_request_t req = allreduce(pair, "pair-after", data);
  check(hcoll_wait(req, 30) == HCOLL_SUCCESS && data[0] == 3.0f,
        "the 2-rank communicator without rank 2 keeps working", hcoll_request_error(req));
  hcoll_request_free(req);
  check(hcoll_comm_destroy(pair) == HCOLL_SUCCESS, "destroy pair", hcoll_last_error());
  hcoll_shutdown();
  return gFailures == 0 ? 0 : 1;
}

int abortScenario(hcoll_comm_t world) {
  if (gRank == 1) {
    barrier(world);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    hcoll_abort("the test aborts on purpose");
  }
  std::vector<float> data(16, 1.0f);
  hcoll_request_t req = allreduce(world, "pending-at-abort", data);
  barrier(world);
  hcoll_status_t s = hcoll_wait(req, 20);
  // The launcher usually kills this rank first; if not, the op must have failed.
  check(s != HCOLL_SUCCESS, "op pending at the peer's abort does not succeed",
        hcoll_status_string(s));
  return 1;  // reaching here is not expected: the job should have ended
}

int setTimeout(hcoll_comm_t world, const std::string& doneFile) {
  if (gRank == 0) std::remove(doneFile.c_str());
  hcoll_status_t s = hcoll_comm_set_timeout(world, gRank == 0 ? 5.0 : 6.0);
  check(s == HCOLL_ERR_MISMATCH, "different timeouts -> MISMATCH on every rank",
        std::string(hcoll_status_string(s)) + ": " + hcoll_last_error());
  s = hcoll_comm_set_timeout(world, gRank == 0 ? 5.0 : -3.0);
  check(s == (gRank == 0 ? HCOLL_ERR_MISMATCH : HCOLL_ERR_INVALID_ARGUMENT),
        "an invalid timeout on rank 1 -> INVALID_ARGUMENT there, MISMATCH on rank 0",
        std::string(hcoll_status_string(s)) + ": " + hcoll_last_error());
  s = hcoll_comm_set_timeout(world, 1.0);
  check(s == HCOLL_SUCCESS, "the same timeout on every rank", hcoll_last_error());
  barrier(world);
  const auto start = Clock::now();
  std::vector<float> data(16, 1.0f);
  if (gRank == 0) {
    hcoll_request_t req = allreduce(world, "orphan", data);
    s = hcoll_wait(req, 30);
    check(s == HCOLL_ERR_TIMEOUT && since(start) < 4.0,
          "an op the peer never submits fails with TIMEOUT after the 1 s timeout",
          std::to_string(since(start)) + " s: " + hcoll_request_error(req));
    hcoll_request_free(req);
    // This rank skips MPI_Finalize at exit (a communicator timed out), which makes the launcher
    // end the job: let rank 1 finish its check first.
    for (int i = 0; i < 200 && !std::ifstream(doneFile).good(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    check(std::ifstream(doneFile).good(), "rank 1 finished its check");
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(4));
    hcoll_request_t req;
    s = submitAllreduce(world, "late", data, &req);
    check(s == HCOLL_ERR_SHUT_DOWN && contains(hcoll_last_error(), "timed out"),
          "the idle peer learned of the timeout: its next submission fails", hcoll_last_error());
    std::ofstream(doneFile) << "done\n";
  }
  hcoll_shutdown();
  return gFailures == 0 ? 0 : 1;
}

int stuckTransfer(hcoll_comm_t world, const std::string& pidFile, bool kill9) {
  check(hcoll_comm_set_timeout(world, 2.0) == HCOLL_SUCCESS, "timeout 2 s", hcoll_last_error());
  if (gRank == 1) std::ofstream(pidFile) << getpid() << "\n";
  barrier(world);
  // 128 MB in four members.
  const size_t n = 8u << 20;
  std::vector<std::vector<float>> members(4, std::vector<float>(n, 1.0f));
  std::vector<int64_t> shapes(4, static_cast<int64_t>(n));
  std::vector<hcoll_tensor_t> ts;
  for (int i = 0; i < 4; ++i) {
    ts.push_back({members[i].data(), HCOLL_FLOAT32, 1, &shapes[i], HCOLL_DEVICE_HOST, nullptr});
  }
  hcoll_request_t req;
  if (hcoll_grouped_allreduce(world, "big", 4, ts.data(), ts.data(), HCOLL_SUM, 1, 1, &req) !=
      HCOLL_SUCCESS) {
    check(false, "submit", hcoll_last_error());
    return 1;
  }
  if (gRank == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    if (kill9) {
      std::printf("rank 1: killing itself in the middle of the transfer\n");
      std::fflush(stdout);
      raise(SIGKILL);
    }
    raise(SIGSTOP);  // stuck in the middle of the transfer until rank 0 resumes it
    hcoll_wait(req, 10);
    hcoll_request_free(req);
    hcoll_shutdown();
    return 0;
  }
  const auto start = Clock::now();
  hcoll_status_t s = hcoll_wait(req, 30);
  check(s == HCOLL_ERR_TIMEOUT && since(start) < 6.0,
        "the survivor's op fails with TIMEOUT within the bound",
        std::to_string(since(start)) + " s: " + hcoll_request_error(req));
  hcoll_request_free(req);
  const auto closing = Clock::now();
  hcoll_shutdown();
  check(since(closing) < 3.0, "shutdown returns within the bound",
        std::to_string(since(closing)) + " s");
  int pid = 0;
  std::ifstream(pidFile) >> pid;
  if (pid > 0) kill(pid, SIGCONT);
  return gFailures == 0 ? 0 : 1;
}

int peerDiesAfterClose(hcoll_comm_t world, const std::string& pidFile) {
  std::vector<float> data(16, 1.0f);
  hcoll_request_t req = allreduce(world, "before-close", data);
  check(hcoll_wait(req, 30) == HCOLL_SUCCESS && data[0] == 2.0f, "allreduce before the close");
  hcoll_request_free(req);
  barrier(world);
  check(hcoll_shutdown() == HCOLL_SUCCESS, "clean close");
  if (gRank == 1) {
    // Stopped here, rank 1 never reaches its MPI_Finalize, as if it had died; the wrapper
    // SIGKILLs it once rank 0 has ended. (Dying here at once would not test hcoll: MPICH's hydra
    // kills every local process when one dies with its PMI connection open, racing its own
    // -disable-auto-cleanup, so the launcher rather than hcoll would often end rank 0.)
    std::ofstream(pidFile) << getpid() << "\n";
    std::printf("rank 1: stopping after its clean close (pid %d)\n", static_cast<int>(getpid()));
    std::fflush(stdout);
    raise(SIGSTOP);
    return 0;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // rank 1 is stopped by now
  std::printf("rank 0: returning 0 from main (MPI_Finalize at exit)\n");
  std::fflush(stdout);
  return gFailures == 0 ? 0 : 1;
}

int peerWorksAfterClose(hcoll_comm_t world) {
  std::vector<float> data(16, 1.0f);
  hcoll_request_t req = allreduce(world, "before-close", data);
  check(hcoll_wait(req, 30) == HCOLL_SUCCESS && data[0] == 2.0f, "allreduce before the close");
  hcoll_request_free(req);
  barrier(world);
  if (gRank == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(6));  // its own work, past the exit bound
    std::printf("rank 1: PASS: finished its work after rank 0's close\n");
    std::fflush(stdout);
  }
  check(hcoll_shutdown() == HCOLL_SUCCESS, "close");
  return gFailures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  const std::string arg = argc > 2 ? argv[2] : "";
  hcoll_status_t s = hcoll_initialize(nullptr);
  if (scenario == "settings-differ") {
    const std::string message = hcoll_last_error();
    check(s == HCOLL_ERR_INVALID_ARGUMENT && contains(message, arg),
          "initialize fails with INVALID_ARGUMENT naming the variable",
          std::string(hcoll_status_string(s)) + ": " + message);
    if (s == HCOLL_SUCCESS) hcoll_shutdown();
    return gFailures == 0 ? 0 : 1;
  }
  if (s != HCOLL_SUCCESS) {
    std::fprintf(stderr, "init: %s\n", hcoll_last_error());
    return 2;
  }
  hcoll_comm_t world;
  hcoll_comm_world(&world);
  hcoll_comm_rank(world, &gRank);
  if (scenario == "peer-dies-after-close") return peerDiesAfterClose(world, arg);
  if (scenario == "peer-works-after-close") return peerWorksAfterClose(world);
  if (scenario == "return-from-main") return returnFromMain(world, arg);
  if (scenario == "shutdown-while-waiting") return shutdownWhileWaiting(world);
  if (scenario == "destroy-split") return destroySplit(world);
  if (scenario == "unnamed-ahead-shutdown") return unnamedAheadShutdown(world);
  if (scenario == "idle-peer") return idlePeer(world);
  if (scenario == "np3-leave") return np3Leave(world);
  if (scenario == "abort") return abortScenario(world);
  if (scenario == "set-timeout") return setTimeout(world, arg);
  if (scenario == "stuck-transfer") return stuckTransfer(world, arg, false);
  // The launcher usually ends the job first (MPICH's hydra kills the others when a process dies);
  // if it does not, rank 0's op fails within the timeout: either way the job ends.
  if (scenario == "killed-transfer") return stuckTransfer(world, arg, true);
  std::fprintf(stderr, "unknown scenario '%s'\n", scenario.c_str());
  hcoll_shutdown();
  return 2;
}
