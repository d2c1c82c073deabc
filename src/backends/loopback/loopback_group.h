#pragma once
// The state the ranks of one loopback communicator share: a rendezvous per collective ("round"),
// notices, stall notes. Ranks are threads of one process, so a rank reads its peers' buffers
// directly; everything here is reached through shared_ptr, so that a Pending the runtime
// abandoned (a peer never arrived) stays valid after its channel and every peer are gone.
//
// Matching: each rank numbers the calls it makes on each plane (control, data, management); the
// k-th call of every rank on a plane meets in round k of that plane. The planes have their own
// counters, like the MPI backend's separate communicators, so negotiation never pairs with data.
//
// One mutex per group guards every round's counters and slots. Data moves outside the lock:
// a rank reads its peers' buffers only after it saw, under the lock, that all had arrived, and
// a rank finishes (its buffers may then be reused) only after it saw that all had read them.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "common/scratch_pool.h"

namespace hcoll::backends::loopback {

class Group;

enum class Plane : uint8_t { kControl = 0, kData = 1, kManage = 2 };

enum class OpTag : uint8_t {
  kBitsAnd,
  kGatherBytes,
  kBroadcastBytes,  // control plane
  kAllreduce,
  kAllgatherv,
  kBroadcast,
  kAlltoallv,
  kReduceScatter,
  kBarrier,  // data plane
  kSplit,    // management
};
const char* opTagName(OpTag tag);

// What every rank of a round must agree on; the first rank to arrive sets it.
struct RoundParams {
  OpTag tag = OpTag::kBarrier;
  DataType dtype = DataType::kUint8;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  size_t count = 0;  // elements (reductions) or bytes (broadcast); vectors are checked apart
  bool operator==(const RoundParams& o) const {
    return tag == o.tag && dtype == o.dtype && op == o.op && root == o.root && count == o.count;
  }
};

// One rank's part of a round. Data-plane operations publish their buffers (peers read `in`);
// control-plane ones hand over copies, which peers may read whenever they like.
struct Contribution {
  const void* in = nullptr;
  void* out = nullptr;
  // alltoallv: bytes to and from each rank; allgatherv: {own block} and every rank's block;
  // reduceScatter: recvBytes holds the element counts per rank.
  std::vector<size_t> sendBytes;
  std::vector<size_t> recvBytes;
  std::vector<uint64_t> words;  // allreduceBitsAnd
  // allreduceBitsAnd's fold (backend.h's FoldedCollective): which operation (0: none), its
  // element count and kindWord(); its data is in `bytes`.
  uint64_t foldTag = 0;
  uint64_t foldCount = 0;
  uint64_t foldKind = 0;
  std::vector<uint8_t> bytes;   // gatherBytes, broadcastBytes
  int color = -1;               // split
  int key = 0;
};

struct Round {
  Round(const RoundParams& p, int size, std::shared_ptr<ScratchPool> pool);
  ~Round();
  Round(const Round&) = delete;
  Round& operator=(const Round&) = delete;

  RoundParams params;
  std::vector<Contribution> slots;
  std::vector<bool> present;
  int arrived = 0;
  int read = 0;     // ranks that finished reading their peers' buffers
  int readers = 0;  // ranks reading them right now
  // A rank withdrew its buffers (its Pending was destroyed unfinished): nobody may start
  // reading, so the round never completes, like a round a rank never joined.
  bool broken = false;
  Status failure;  // the ranks called different collectives or passed different sizes
  // allreduce: the reduced vector (each rank reduces its share into it, then copies it all).
  // The allreduce result (count * element size bytes), from the group's pool.
  ScratchPool::Buffer scratch;
  size_t scratchBytes = 0;
  // split: each rank's new group and rank in it (null: not a member), set once all arrived.
  bool splitDone = false;
  std::vector<std::shared_ptr<Group>> newGroups;
  std::vector<int> newRanks;

 private:
  std::shared_ptr<ScratchPool> pool_;
};

class Group {
 public:
  explicit Group(int size);
  int size() const { return size_; }

  // Joins round `seq` of `plane` as `rank` with `mine`. A round whose params differ from the
  // first arrival's fails on every rank; so does one whose vectors disagree (checked when the
  // last rank arrives, before anyone reads).
  std::shared_ptr<Round> arrive(Plane plane, uint64_t seq, int rank, const RoundParams& params,
                                Contribution mine);

  std::mutex& mutex() { return mutex_; }
  // Signalled (under mutex) whenever a round or the membership changes.
  std::condition_variable& changed() { return changed_; }

  // A rank's channel was destroyed: blocking calls waiting for it give up.
  void leave(int rank);
  bool hasLeft(int rank) const { return left_[static_cast<size_t>(rank)]; }  // under mutex

  void post(int from, const PeerSignals::Notice& notice);
  bool take(int rank, PeerSignals::Notice* out);

  void noteWaiting(int rank, uint64_t round);
  std::vector<int> peersWaiting(int rank, uint64_t round);

 private:
  static Status validate(const Round& round);

  const int size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::pair<Plane, uint64_t>, std::shared_ptr<Round>> open_;  // not yet all arrived
  // Keeps the last allreduce result buffer for the next round: first-touching fresh memory costs
  // more than the reduction.
  std::shared_ptr<ScratchPool> pool_ = std::make_shared<ScratchPool>(size_t{1} << 28);
  std::vector<bool> left_;
  std::vector<std::deque<PeerSignals::Notice>> mailboxes_;
  std::vector<uint64_t> notedRound_;
};

}  // namespace hcoll::backends::loopback
