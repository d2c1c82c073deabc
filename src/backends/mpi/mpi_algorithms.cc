// The algorithm table's lookup (mpi_algorithms.h).
#include "backends/mpi/mpi_algorithms.h"

#include <memory>

#include "common/logging.h"

namespace hcoll::backends::mpi {

Schedule chooseSchedule(OpKind kind, int ranks, size_t bytes) {
  // Looked up once: this runs for every collective, and the level check inside debug() is cheap.
  static const std::shared_ptr<spdlog::logger> log = logging::get("backend");
  for (const AlgorithmRule& rule : kAlgorithms) {
    if (rule.kind != kind || ranks > rule.maxRanks || bytes < rule.minBytes) continue;
    log->debug("{} of {} bytes on {} ranks: {} ({})", opKindName(kind), bytes, ranks,
               rule.schedule == Schedule::kPointToPoint ? "point to point" : "MPI collective",
               rule.why);
    return rule.schedule;
  }
  return Schedule::kMpiCollective;  // a kind without rules (not a data collective)
}

}  // namespace hcoll::backends::mpi
