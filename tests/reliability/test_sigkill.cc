// Rank 1 kills itself with SIGKILL mid-run while rank 0 waits in hcoll_wait(-1). The wrapper
// (run_sigkill.sh) asserts that the job ends (an error on rank 0, or the launcher aborting the
// job) within a bound instead of hanging.
#include <csignal>
#include <cstdio>

#include "hcoll/hcoll.h"

int main() {
  if (hcoll_initialize(nullptr) != HCOLL_SUCCESS) return 2;
  hcoll_comm_t w;
  hcoll_comm_world(&w);
  int rank = 0;
  hcoll_comm_rank(w, &rank);
  float data[64] = {};
  int64_t shape[] = {64};
  hcoll_tensor_t t{data, HCOLL_FLOAT32, 1, shape, HCOLL_DEVICE_HOST, nullptr};
  hcoll_request_t req;
  // One operation that works, so both ranks are fully up.
  hcoll_allreduce(w, "warmup", &t, &t, HCOLL_SUM, 1, 1, &req);
  if (hcoll_wait(req, 30) != HCOLL_SUCCESS) return 3;
  hcoll_request_free(req);
  std::printf("rank %d: warmed up\n", rank);
  std::fflush(stdout);
  if (rank == 1) std::raise(SIGKILL);
  hcoll_allreduce(w, "after-kill", &t, &t, HCOLL_SUM, 1, 1, &req);
  hcoll_status_t s = hcoll_wait(req, -1);
  std::printf("rank 0: wait returned %s: %s\n", hcoll_status_string(s), hcoll_request_error(req));
  std::fflush(stdout);
  hcoll_request_free(req);
  hcoll_shutdown();
  return s == HCOLL_SUCCESS ? 1 : 0;  // success would be wrong: the peer is dead
}
