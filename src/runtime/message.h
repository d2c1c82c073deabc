#pragma once
// What ranks tell the coordinator (an OpSpec per operation, in a RequestList) and what it answers
// (a Response per ready operation, in a ResponseList). The wire encoding lives in wire.h.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/types.h"

namespace hcoll::runtime {

// The shape of one member tensor of an operation (a plain operation has one member).
struct MemberSpec {
  DataType dtype = DataType::kFloat32;
  Shape shape;
  size_t bytes() const { return static_cast<size_t>(numElements(shape)) * dataTypeSize(dtype); }
  bool operator==(const MemberSpec& o) const { return dtype == o.dtype && shape == o.shape; }
};

// One rank's description of one operation: everything other ranks must agree with, plus the
// per-rank parts (allgather dim0, alltoall splits, split color/key).
struct OpSpec {
  std::string name;
  OpKind kind = OpKind::kAllreduce;
  ReduceOp op = ReduceOp::kSum;
  double prescale = 1.0;
  double postscale = 1.0;
  int32_t root = 0;
  int32_t device = kHostDevice;  // HOST or a CUDA ordinal (ranks agree on host vs CUDA only)
  std::vector<MemberSpec> members;
  std::vector<int64_t> splits;  // alltoall: rows to each rank
  std::vector<int32_t> ranks;   // comm_create: the parent ranks of the new communicator
  int32_t color = 0;            // comm_split
  int32_t key = 0;              // comm_split
  // *_into (caller-provided outputs): dim0 of this rank's output of each member; empty when the
  // runtime allocates the outputs. Per rank: the coordinator checks it against the result.
  std::vector<int64_t> outputRows;
  // Named "<op>.<n>" by the communicator's call order (no name given): a joined rank that sees
  // such an operation complete without it advances its own counter, so later automatic names
  // stay aligned across ranks.
  bool autoNamed = false;
  // join: how long it had been submitted on this rank when announced (microseconds). Rounds
  // gather announcements from all ranks at about the same moment, so the coordinator orders
  // joins by (arrival - age) in its own clock: the rank that joined last in time, even when two
  // joins arrive in one round (no clocks of different nodes are compared).
  int64_t ageMicros = 0;

  bool operator==(const OpSpec& o) const;
  // operator== but for the name: the same call under another name.
  bool sameCallAs(const OpSpec& o) const;
  // Back to a default OpSpec, keeping the storage of the name and the vectors (a recycled
  // operation, local_op.h). Every field above must be reset here.
  void clearKeepingStorage() {
    name.clear();
    kind = OpKind::kAllreduce;
    op = ReduceOp::kSum;
    prescale = 1.0;
    postscale = 1.0;
    root = 0;
    device = kHostDevice;
    members.clear();
    splits.clear();
    ranks.clear();
    color = 0;
    key = 0;
    outputRows.clear();
    autoNamed = false;
    ageMicros = 0;
  }
};

// A rank whose arguments to a collective communicator call were bad still announces the call,
// marked with these, so that the other ranks fail at once instead of waiting for it forever: an
// empty rank list (comm_create; a valid list has at least one rank) or this split color.
constexpr int32_t kRefusedSplitColor = -2;

struct RequestList {
  std::vector<OpSpec> ops;
};

// The coordinator's decision about one operation, identical on every rank.
struct Response {
  Code error = Code::kSuccess;  // kSuccess: execute; otherwise fail the operation with it
  std::string errorMessage;
  OpSpec spec;  // the lowest announcing rank's spec: joined ranks execute from it
  // allgather: dim0 of each member on each rank, [member * size + rank]
  std::vector<int64_t> dim0PerRank;
  // alltoall: rows sent from rank i to rank j at [i * size + j]
  std::vector<int64_t> splitMatrix;
  int32_t lastJoinedRank = -1;  // join

  bool cacheable() const;
  // Whether a successful response has the per-rank parts the executor indexes for a
  // communicator of `size` ranks (dim0PerRank, splitMatrix, rows, root); "" if so, else why.
  // Rank 0's coordinator only produces such responses; this guards the other ranks against a
  // corrupt or foreign one.
  std::string malformation(int size) const;
  // Whether this rank's own spec is what this cached response was made from, so that the
  // response can be replayed without asking the coordinator (automatically named: any such
  // call of the same shape; the negotiator renames the replay).
  bool matchesLocal(const OpSpec& local, int rank, int size) const;
  // Rows of member m's output on `rank` (allgather, reducescatter, alltoall): what a caller's
  // output must hold (exactly; alltoall: at least).
  int64_t resultRows(size_t m, int rank, int size) const;
};

// Responses are shared, not copied, between the response cache and a round's list: a cached
// grouped operation replays every round, and its spec holds one shape per member.
using ResponsePtr = std::shared_ptr<const Response>;

struct ResponseList {
  std::vector<Response> responses;
};

}  // namespace hcoll::runtime
