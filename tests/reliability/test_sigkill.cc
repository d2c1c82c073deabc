// Rank 1 kills itself with SIGKILL mid-run while rank 0 waits in hcoll_wait(-1). The wrapper
// (run_sigkill.sh) asserts that the job ends (an error on rank 0, or the launcher aborting the
// job) within a bound instead of hanging. Default: rank 1 dies before submitting, so rank 0 waits
// in negotiation. "data-phase": both submit a 64 MiB allreduce (the MPI backend's point-to-point
// schedule, tens of ms here) and rank 1 dies 1 ms later, while the data moves. "lane-phase": the
// same with a 64 MiB broadcast from rank 0, which on one node moves through the MPI backend's
// shared-memory lanes (mpi_shm.h): rank 0 waits for room in a ring its dead peer never empties.
// "small-phase": both run a loop of 8-byte allreduces and allgathers, whose readiness rounds and
// data move through the shared-memory control block (mpi_shm_control.h; folded once cached), and
// rank 1 dies right after an allgather's submission, while the block's slots are in use: rank 0
// waits on a flag its peer never sets.
// "adasum-phase": the same as data-phase with a 64 MiB HCOLL_ADASUM allreduce (mpi_adasum.cc's
// stages).
// Each rank prints its pid: the wrapper checks that no segment of rank 0's is left in /dev/shm.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "hcoll/hcoll.h"

int main(int argc, char** argv) {
  const bool lanePhase = argc > 1 && std::string(argv[1]) == "lane-phase";
  const bool smallPhase = argc > 1 && std::string(argv[1]) == "small-phase";
  const bool adasumPhase = argc > 1 && std::string(argv[1]) == "adasum-phase";
  const bool dataPhase = lanePhase || smallPhase || adasumPhase ||
                         (argc > 1 && std::string(argv[1]) == "data-phase");
  if (hcoll_initialize(nullptr) != HCOLL_SUCCESS) return 2;
  hcoll_comm_t w;
  hcoll_comm_world(&w);
  int rank = 0;
  hcoll_comm_rank(w, &rank);
  std::vector<float> data(dataPhase && !smallPhase ? size_t{16} << 20 : smallPhase ? 2 : 64);
  int64_t shape[] = {static_cast<int64_t>(data.size())};
  hcoll_tensor_t t{data.data(), HCOLL_FLOAT32, 1, shape, HCOLL_DEVICE_HOST, nullptr};
  hcoll_request_t req;
  // One operation that works, so both ranks are fully up.
  hcoll_allreduce(w, "warmup", &t, &t, HCOLL_SUM, 1, 1, &req);
  if (hcoll_wait(req, 30) != HCOLL_SUCCESS) return 3;
  hcoll_request_free(req);
  std::printf("rank %d: warmed up (pid %d)\n", rank, static_cast<int>(getpid()));
  std::fflush(stdout);
  if (rank == 1 && !dataPhase) std::raise(SIGKILL);
  if (smallPhase) {
    // Steady small operations (cached after the first of each), until rank 1 dies after the
    // 2001st submission (an allgather); rank 0 goes on until an operation fails.
    for (int i = 0;; ++i) {
      if (i % 2 == 0) {
        hcoll_allreduce(w, "small", &t, &t, HCOLL_SUM, 1, 1, &req);
      } else {
        hcoll_allgather(w, "small.gather", &t, &req);
      }
      if (rank == 1 && i == 2001) std::raise(SIGKILL);
      if (rank == 0) {
        const hcoll_status_t s = hcoll_wait(req, -1);
        if (s != HCOLL_SUCCESS) {
          std::printf("rank 0: wait returned %s after %d operations: %s\n",
                      hcoll_status_string(s), i, hcoll_request_error(req));
          hcoll_request_free(req);
          hcoll_shutdown();
          return 0;
        }
      } else if (hcoll_wait(req, 30) != HCOLL_SUCCESS) {
        return 4;
      }
      hcoll_request_free(req);
    }
  } else if (lanePhase) {
    hcoll_broadcast(w, "after-kill", &t, 0, &req);
  } else {
    hcoll_allreduce(w, "after-kill", &t, &t, adasumPhase ? HCOLL_ADASUM : HCOLL_SUM, 1, 1, &req);
  }
  if (rank == 1) {  // data-phase: dies while the operation runs, never reports
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::raise(SIGKILL);
  }
  hcoll_status_t s = hcoll_wait(req, -1);
  std::printf("rank 0: wait returned %s: %s\n", hcoll_status_string(s), hcoll_request_error(req));
  std::fflush(stdout);
  hcoll_request_free(req);
  hcoll_shutdown();
  return s == HCOLL_SUCCESS ? 1 : 0;  // success would be wrong: the peer is dead
}
