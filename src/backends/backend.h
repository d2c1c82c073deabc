#pragma once
// The small interface every backend implements. The runtime drives it from a communicator's
// negotiation thread only, so implementations need no locking of their own per channel; all
// calls are non-blocking and return a Pending the thread polls, except communicator management.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/types.h"

namespace hcoll::backends {

// An operation in progress. poll() advances it; it returns true once finished, with *status set
// (ok, or the failure). After it returned true it must not be polled again.
class Pending {
 public:
  virtual ~Pending() = default;
  virtual bool poll(Status* status) = 0;
};
using PendingPtr = std::unique_ptr<Pending>;

// A Pending that finished at creation (used for no-op collectives and immediate failures).
PendingPtr finished(Status status = Status::ok());

// The data plane of one backend on one communicator. Buffers must stay valid until the Pending
// finished. Counts are elements for reductions, bytes otherwise.
class Collectives {
 public:
  virtual ~Collectives() = default;
  // Reduces `send` into `recv` (count elements each). send == nullptr: in place, recv holds this
  // rank's contribution. A distinct send buffer saves the copy into recv (MPI's sendbuf).
  virtual PendingPtr allreduce(const void* send, void* recv, size_t count, DataType dtype,
                               ReduceOp op) = 0;
  // send == nullptr: in place (this rank's block is already at its offset in recv).
  virtual PendingPtr allgatherv(const void* send, size_t sendBytes, void* recv,
                                const std::vector<size_t>& recvBytes) = 0;
  virtual PendingPtr broadcast(void* buf, size_t bytes, int root) = 0;
  virtual PendingPtr alltoallv(const void* send, const std::vector<size_t>& sendBytes, void* recv,
                               const std::vector<size_t>& recvBytes) = 0;
  // The even case: every rank sends `bytesPerRank` to each of `ranks` ranks. Only for a split
  // matrix that is uniform on every rank (the caller checks the whole matrix: all ranks must take
  // the same path). MPI implements it with MPI_Ialltoall, whose algorithms beat alltoallv's;
  // the default is alltoallv.
  virtual PendingPtr alltoall(const void* send, void* recv, size_t bytesPerRank, size_t ranks) {
    const std::vector<size_t> bytes(ranks, bytesPerRank);
    return alltoallv(send, bytes, recv, bytes);
  }
  // Reduces `send` (sum of recvCounts elements, rank-major) and leaves rank r's block in `recv`.
  virtual PendingPtr reduceScatter(const void* send, void* recv,
                                   const std::vector<size_t>& recvCounts, DataType dtype,
                                   ReduceOp op) = 0;
  virtual PendingPtr barrier() = 0;
  // Adasum (common/adasum.h) of `buf` across the ranks, in place: `count` elements of a floating
  // `dtype`, the concatenation of tensors of tensorCounts[i] elements, each reduced on its own.
  // Every rank must end with bitwise the same result, that of adasum::reduceAll. A backend
  // without it (NCCL: device memory) refuses.
  virtual PendingPtr adasum(void* buf, size_t count, DataType dtype,
                            const std::vector<size_t>& tensorCounts) {
    (void)buf;
    (void)count;
    (void)dtype;
    (void)tensorCounts;
    return finished(Status(Code::kUnsupported, "this backend does not implement Adasum"));
  }
};

// Liveness signals between the members of one communicator, outside any round, so that they
// reach a peer whatever it is waiting for (an idle peer takes part in no round). The runtime's
// bounded waits (runtime/bounded_wait.h) consult them; nothing else does. Called from the
// communicator's thread only, like the channel.
class PeerSignals {
 public:
  virtual ~PeerSignals() = default;

  // Notices: small messages to every other member carrying failures that must reach every rank:
  // a member leaving, or giving up on the communicator. Best effort and bounded: sendNotice
  // returns once the messages were handed to the transport or after about a second. pollNotice
  // never blocks.
  enum class NoticeKind : uint8_t {
    kClosing = 1,  // the sender waits in its final round: idle members should join that round
    kGone = 2,     // the sender left the communicator for good: fail everything, join nothing
    // kGone, and the sender gave up on a peer that stopped in the middle of an operation or did
    // not answer its close: that peer may never finalize MPI either.
    kGoneStuck = 3,
  };
  struct Notice {
    int rank = -1;
    NoticeKind kind = NoticeKind::kGone;
    Code code = Code::kShutDown;
    std::string text;
  };
  virtual void sendNotice(NoticeKind kind, Code code, const std::string& text) {
    (void)kind;
    (void)code;
    (void)text;
  }
  virtual bool pollNotice(Notice* out) {
    (void)out;
    return false;
  }

  // Stall diagnostics, best effort. Idle ranks do not negotiate, so a rank stuck entering a
  // control round cannot tell who is missing from the collective itself: ranks that have waited
  // a while in round `round` say so to every other rank (noteWaiting), and a rank reporting the
  // stall asks which peers did (peersWaiting); the others have not entered the round. A backend
  // that cannot tell returns false from tracksWaiting.
  virtual bool tracksWaiting() const { return false; }
  virtual void noteWaiting(uint64_t round) { (void)round; }
  virtual std::vector<int> peersWaiting(uint64_t round) {
    (void)round;
    return {};
  }

  // Signals nothing, sees nothing: what a channel without signals returns.
  static PeerSignals& none();
};

// A backend's view of one communicator: membership, the negotiation (control) plane, the host
// data plane, and the creation of sub-communicators.
class Channel : public Collectives {
 public:
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int localRank() const = 0;
  virtual int localSize() const = 0;

  // Control plane, separate from the data plane so that negotiation never interleaves with data.
  // Bitwise AND of `words` across ranks, in place (same count on every rank).
  virtual PendingPtr allreduceBitsAnd(uint64_t* words, size_t count) = 0;
  // The small-message fold: one rank's lone small collective carried by the readiness AND's own
  // exchange (allreduceBitsAnd's), so that a cached operation needs one exchange, not two.
  // Ranks that fold and ranks that do not take part in the same exchange (a rank not folding
  // calls allreduceBitsAnd). Every rank contributes its `count` elements at `send`. When the
  // step completes, *agreed says whether every rank folded the same `tag` (non-zero) with the
  // same count, dtype, combine, op and root (kindWord()); then `recv` holds what `combine` makes
  // of the contributions (in rank order: the same bits on every rank), else `recv` is untouched.
  // Every rank reaches the same verdict from the same exchanged bytes; whether the result is
  // used is the runtime's decision (negotiator.cc), also from exchanged bits only.
  struct FoldedCollective {
    enum class Combine : uint8_t {
      kReduce = 0,     // the element-wise reduction by `op` (allreduce; a reducescatter's part)
      kGather = 1,     // every rank's elements, rank after rank: recv holds size x count
      kBroadcast = 2,  // rank `root`'s elements
    };
    uint64_t tag = 0;
    const void* send = nullptr;
    void* recv = nullptr;
    size_t count = 0;
    DataType dtype = DataType::kFloat32;
    Combine combine = Combine::kReduce;
    ReduceOp op = ReduceOp::kSum;  // kReduce only
    int root = 0;                  // kBroadcast only
    // Words from this index on are the same on every rank that folds the same operation alike
    // (the runtime's slot words: a folding rank marks its operation's cache slot and no other),
    // so when every rank did, their AND is this rank's own and a channel may leave the others'
    // unread. SIZE_MAX: no such words.
    size_t alikeFrom = SIZE_MAX;
    bool* agreed = nullptr;  // required
    // What the ranks compare besides tag and count: equal only for the same collective.
    uint64_t kindWord() const {
      const ReduceOp reduction = combine == Combine::kReduce ? op : ReduceOp{};
      const auto rootRank = static_cast<uint32_t>(combine == Combine::kBroadcast ? root : 0);
      return static_cast<uint64_t>(dtype) | static_cast<uint64_t>(reduction) << 8 |
             static_cast<uint64_t>(combine) << 16 | static_cast<uint64_t>(rootRank) << 32;
    }
  };
  // The most payload bytes a rank may fold into a readiness AND of `words` words: 0 where this
  // channel cannot fold (then every rank's answer is 0: it depends only on what the ranks share).
  virtual size_t foldableBytes(size_t words) const {
    (void)words;
    return 0;
  }
  // allreduceBitsAnd carrying `fold` (see FoldedCollective). A dtype/op the channel cannot fold
  // is sent as "no fold" (*agreed then ends false on every rank).
  virtual PendingPtr allreduceBitsAndFolded(uint64_t* words, size_t count,
                                            const FoldedCollective& fold) {
    *fold.agreed = false;
    return allreduceBitsAnd(words, count);
  }
  // Rank 0 receives every rank's bytes into (*atRoot)[rank]; other ranks only send.
  virtual PendingPtr gatherBytes(std::vector<uint8_t> mine,
                                 std::vector<std::vector<uint8_t>>* atRoot) = 0;
  // Rank 0's *buf replaces every other rank's *buf.
  virtual PendingPtr broadcastBytes(std::vector<uint8_t>* buf) = 0;

  // The largest count or displacement one rank's part of an allgather or alltoall (bytes) or a
  // reducescatter (elements) may have: the runtime refuses bigger operations at submission.
  // allreduce and broadcast have no such limit (they are split into chunks).
  virtual size_t maxVectorCount() const { return SIZE_MAX; }
  // Why maxVectorCount is what it is, for the message that refuses an operation over it.
  virtual std::string maxVectorCountReason() const { return "the backend's limit"; }

  // Collective over this channel; blocking. *out is null on ranks that are not members.
  virtual Status split(int color, int key, std::unique_ptr<Channel>* out) = 0;
  virtual Status create(const std::vector<int32_t>& ranks, std::unique_ptr<Channel>* out) = 0;

  // How the members signal each other outside any round (notices, stall notes). The default:
  // none (a channel of one rank, or a test double). Valid for the channel's life.
  virtual PeerSignals& signals() { return PeerSignals::none(); }
};

// Process-wide state of a backend (for MPI: the library's initialization; for loopback: the
// ranks this process hosts as threads). Created through the registry (backends/registry.h).
class Backend {
 public:
  virtual ~Backend() = default;
  virtual int worldSize() const = 0;
  // The world ranks this process drives, ascending: its own rank for a backend with one rank
  // per process (MPI), every rank for one that hosts them all in this process (loopback).
  virtual std::vector<int> hostedRanks() const = 0;
  // A channel over the world as seen by `rank`, one of hostedRanks(). Called once per hosted
  // rank at initialize.
  virtual Status world(int rank, std::unique_ptr<Channel>* out) = 0;
  // A channel over a communicator of the backend's own transport that the application hands
  // over by `handle` (MPI: a duplicate of the communicator whose Fortran handle it is).
  virtual Status fromExternal(int64_t handle, std::unique_ptr<Channel>* out) {
    (void)handle;
    out->reset();
    return Status(Code::kUnsupported, "this backend cannot adopt an external communicator");
  }
};

}  // namespace hcoll::backends
