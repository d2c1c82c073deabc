// The MPI backend's algorithm table (mpi_algorithms.h): every data collective has a rule that
// always matches, the point-to-point schedules serve small communicators only (allreduce from
// 4 KiB), and the first matching rule decides.

#include <catch2/catch.hpp>

#include <climits>

#include "backends/mpi/mpi_algorithms.h"

namespace {

using hcoll::OpKind;
using hcoll::backends::mpi::chooseSchedule;
using hcoll::backends::mpi::kAlgorithms;
using hcoll::backends::mpi::kMaxPointToPointRanks;
using hcoll::backends::mpi::Schedule;

constexpr OpKind kDataKinds[] = {OpKind::kAllreduce, OpKind::kAllgather, OpKind::kBroadcast,
                                 OpKind::kAlltoall, OpKind::kReducescatter};

}  // namespace

TEST_CASE("MPI algorithm table: every data collective ends with a rule that always matches",
          "[algorithms]") {
  for (OpKind kind : kDataKinds) {
    const hcoll::backends::mpi::AlgorithmRule* last = nullptr;
    for (const auto& rule : kAlgorithms) {
      if (rule.kind == kind) last = &rule;
    }
    INFO(hcoll::opKindName(kind));
    REQUIRE(last != nullptr);
    CHECK(last->maxRanks == INT_MAX);
    CHECK(last->minBytes == 0);
  }
}

TEST_CASE("MPI algorithm table: point to point on small communicators only", "[algorithms]") {
  for (OpKind kind : kDataKinds) {
    INFO(hcoll::opKindName(kind));
    CHECK(chooseSchedule(kind, kMaxPointToPointRanks + 1, size_t{1} << 20) ==
          Schedule::kMpiCollective);
    CHECK(chooseSchedule(kind, 2, size_t{1} << 20) == Schedule::kPointToPoint);
    CHECK(chooseSchedule(kind, kMaxPointToPointRanks, 8192) == Schedule::kPointToPoint);
  }
  // Allreduce below 4 KiB keeps MPICH's recursive doubling.
  CHECK(chooseSchedule(OpKind::kAllreduce, 2, 4095) == Schedule::kMpiCollective);
  CHECK(chooseSchedule(OpKind::kAllreduce, 2, 4096) == Schedule::kPointToPoint);
  CHECK(chooseSchedule(OpKind::kAllgather, 2, 8) == Schedule::kPointToPoint);
  // Not a data collective: no rule.
  CHECK(chooseSchedule(OpKind::kBarrier, 2, 0) == Schedule::kMpiCollective);
}
