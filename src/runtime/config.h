#pragma once
// Runtime settings read once at initialize from the HCOLL_* environment variables.

#include <cstdint>
#include <string>

#include "common/status.h"

namespace hcoll::runtime {

struct Config {
  uint64_t fusionThresholdBytes = 128ull * 1024 * 1024;  // HCOLL_FUSION_THRESHOLD; 0 = no fusion
  double cycleTimeMs = 0.0;            // HCOLL_CYCLE_TIME_MS: batching window (0 = none)
  uint32_t cacheCapacity = 1024;       // HCOLL_CACHE_CAPACITY; 0 = response cache off
  double stallCheckSeconds = 60.0;     // HCOLL_STALL_CHECK_TIME_SECONDS; 0 = no warnings
  // HCOLL_STALL_SHUTDOWN_TIME_SECONDS; 0 = never. 600 s, as torch.distributed's NCCL watchdog:
  // long enough for a legitimately slow rank (a checkpoint, an evaluation on one rank), short
  // enough that a typo in a name or a stuck peer ends the job in minutes, not never.
  double stallShutdownSeconds = 600.0;
  std::string timelinePath;            // HCOLL_TIMELINE
  std::string flightRecorderPath;      // HCOLL_FLIGHT_RECORDER: dumps go to <path>.<world rank>
  std::string logLevel = "warning";    // HCOLL_LOG_LEVEL
  std::string backend;                 // HCOLL_BACKEND: host backend by name; "" = the default
  // HCOLL_CALLER_PROGRESS (1 = on, 0 = off): a caller waiting on a host operation runs its
  // negotiation and execution on its own thread while the communicator's thread is idle. Local:
  // which thread runs a round changes nothing that other ranks see.
  bool callerProgress = true;

  // Reads the environment; a malformed value is an INVALID_ARGUMENT naming the variable.
  static Status fromEnvironment(Config* out);
};

}  // namespace hcoll::runtime
