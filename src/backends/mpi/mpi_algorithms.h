#pragma once
// Which schedule runs each collective of the MPI backend, as one table (UCC's coll_score): kind x
// communicator size x bytes -> MPICH's non-blocking collective or hcoll's point-to-point schedule
// (mpi_p2p.h), and which transfers of a schedule go through the shared-memory lanes (mpi_shm.h)
// rather than MPI messages. Every input is negotiated or derived from the communicator's size,
// so every rank chooses alike. The choice is logged at debug level ("hcoll.backend").

#include <climits>
#include <cstddef>

#include "common/types.h"

namespace hcoll::backends::mpi {

enum class Schedule { kMpiCollective, kPointToPoint };

struct AlgorithmRule {
  OpKind kind;
  int maxRanks;     // communicators of at most this many ranks
  size_t minBytes;  // operations of at least this many bytes (the whole vector)
  Schedule schedule;
  const char* why;  // the measurement behind the rule, also in the debug log
};

// Up to this many ranks the point-to-point schedules run (MPICH's non-blocking collectives build a
// schedule and allocate temporaries per call: mpi_p2p.h has the figures).
constexpr int kMaxPointToPointRanks = 7;

// The first rule that matches wins; every kind ends with a rule that always matches.
inline constexpr AlgorithmRule kAlgorithms[] = {
    // Raw MPI, 2 ranks, against MPI_Allreduce: 0.96x at 512 B, 0.91x at 4 KiB, 0.83-0.92x at
    // 16-512 KiB, 0.62-0.66x at 2-8 MiB; below 4 KiB MPICH's recursive doubling is as fast (8 B:
    // 1.6x either way) in one exchange instead of two.
    {OpKind::kAllreduce, kMaxPointToPointRanks, 4096, Schedule::kPointToPoint,
     "reduce-scatter + allgather from 4 KiB on small communicators"},
    {OpKind::kAllreduce, INT_MAX, 0, Schedule::kMpiCollective, "MPI_Iallreduce"},
    {OpKind::kAllgather, kMaxPointToPointRanks, 0, Schedule::kPointToPoint,
     "every message posted at once (MPICH's allgatherv: 52 against 32 us at 512 KiB)"},
    {OpKind::kAllgather, INT_MAX, 0, Schedule::kMpiCollective, "MPI_Iallgather(v)"},
    {OpKind::kBroadcast, kMaxPointToPointRanks, 0, Schedule::kPointToPoint,
     "binomial tree (MPICH's choice below 8 ranks), no schedule per call"},
    {OpKind::kBroadcast, INT_MAX, 0, Schedule::kMpiCollective, "MPI_Ibcast"},
    {OpKind::kAlltoall, kMaxPointToPointRanks, 0, Schedule::kPointToPoint,
     "every message posted at once (MPICH's scattered alltoall)"},
    {OpKind::kAlltoall, INT_MAX, 0, Schedule::kMpiCollective, "MPI_Ialltoall(v)"},
    {OpKind::kReducescatter, kMaxPointToPointRanks, 0, Schedule::kPointToPoint,
     "every block to its owner (5-10 % faster than MPI_Reduce_scatter_block, 32 KiB-2 MiB)"},
    {OpKind::kReducescatter, INT_MAX, 0, Schedule::kMpiCollective, "MPI_Ireduce_scatter"},
};

// When the communicator has shared-memory lanes, a transfer of more than this many bytes goes
// through its lane: at and below MPI's eager size one MPI message is cheaper than the lane's two
// copies. The byte count is negotiated, so both sides route a transfer alike.
constexpr size_t kLanesFrom = 8192;

// The schedule of a `kind` operation of `bytes` bytes on `ranks` ranks (logged at debug level).
Schedule chooseSchedule(OpKind kind, int ranks, size_t bytes);

}  // namespace hcoll::backends::mpi
