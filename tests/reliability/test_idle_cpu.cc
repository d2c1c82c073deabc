// An idle process with 3 communicators (each with its own negotiation thread) must not burn CPU:
// after some traffic, all ranks sleep 2 s and each measures its own CPU time (user + system,
// every thread) over that window, asserting < 1% of one core (the "well under 1%").
// Measured on the 2-core CI machine at load average 9-11: 0.02-0.04% per rank in 13 two-rank runs,
// so the bound has a margin of 25x. hcoll's barrier (not MPI's, which busy-polls) brings the ranks
// together before and after.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "hcoll/hcoll.h"

namespace {

constexpr double kMaxPercent = 1.0;

double cpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec +
         u.ru_stime.tv_usec * 1e-6;
}

bool barrier(hcoll_comm_t c) {
  hcoll_request_t r;
  if (hcoll_barrier(c, &r) != HCOLL_SUCCESS) return false;
  bool ok = hcoll_wait(r, 30) == HCOLL_SUCCESS;
  hcoll_request_free(r);
  return ok;
}

}  // namespace

int main() {
  if (hcoll_initialize(nullptr) != HCOLL_SUCCESS) return 2;
  hcoll_comm_t comms[3];
  hcoll_comm_world(&comms[0]);
  int rank = 0;
  hcoll_comm_rank(comms[0], &rank);
  hcoll_comm_split(comms[0], 0, rank, &comms[1]);
  hcoll_comm_split(comms[0], 0, -rank, &comms[2]);
  float data[256] = {};
  int64_t shape[] = {256};
  hcoll_tensor_t t{data, HCOLL_FLOAT32, 1, shape, HCOLL_DEVICE_HOST, nullptr};
  for (int i = 0; i < 20; ++i) {
    for (hcoll_comm_t c : comms) {
      hcoll_request_t r;
      hcoll_allreduce(c, nullptr, &t, &t, HCOLL_SUM, 1, 1, &r);
      hcoll_wait(r, 30);
      hcoll_request_free(r);
    }
  }
  bool ok = barrier(comms[0]);
  // Let the threads settle back to sleep, then measure.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double cpu0 = cpuSeconds();
  const auto wall0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double cpu = cpuSeconds() - cpu0;
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  const double percent = 100.0 * cpu / wall;
  ok = barrier(comms[0]) && ok;
  std::printf("rank %d: idle with 3 communicators: %.3f s CPU over %.2f s = %.2f%% of a core\n",
              rank, cpu, wall, percent);
  hcoll_comm_destroy(comms[1]);
  hcoll_comm_destroy(comms[2]);
  hcoll_shutdown();
  if (!ok) std::printf("FAIL: a barrier failed\n");
  if (percent >= kMaxPercent) {
    std::printf("FAIL: idle CPU %.2f%% >= %.0f%%\n", percent, kMaxPercent);
  }
  return ok && percent < kMaxPercent ? 0 : 1;
}
