#pragma once
// The small-message path: a per-communicator shared-memory control block through which the
// readiness AND (allreduceBitsAnd) and the data plane's small collectives move, on communicators
// of 2-8 ranks that all share a node. Over MPI messages on 2 ranks of the test VM, each of an
// operation's two exchanges (readiness, then data) cost ~1.1-1.5 us (MPICH over UCX shared
// memory); through cache lines of a segment every rank maps, an exchange is one store and one
// cache-line transfer per peer.
//
// The readiness AND may carry one small collective (the fold, backend.h's FoldedCollective): its
// payload starts with a header saying which operation a rank folded (or none), and every rank
// combines the folded data (reduces, gathers or takes the root's), in rank order, only when every
// header is the same.
//
// Every rank has, per plane (control, data) and per slot (kSlots per plane, used round-robin by the
// plane's operations in the order they are started), an `acked` line, then a `published` counter
// followed by the payload in the same line. The k-th operation of a plane (k from 1) in slot
// k % kSlots: each rank copies its contribution into its payload and stores k into `published`
// (with how far its ack watermark, below, was behind k), waits until every rank it needs published
// k, computes its result from the payloads (reductions in rank order 0..n-1 on every rank, so
// every rank gets the same bits), then stores k into `acked`. A rank reuses a slot for operation k
// only once every rank acked k - kSlots: it looks first at what it knows of that rank's ack
// watermark (every operation up to it acked: carried by the published words it waited on, and in
// a line per rank and plane), then at the watermark's line, and only then at the slot's `acked`.
// The route (this block or MPI) depends only on what every rank shares: the block's presence,
// agreed at creation (MIN over the ranks, like the lanes), and the operation's negotiated sizes;
// so the k-th operation routed here is the same on every rank, and MPI's own matching is never
// involved.
//
// Waiting is polling a flag, like an MPI request: the runtime's bounded waits (stall shutdown,
// close bound, the peers' notices) apply unchanged, so a peer that died holding the block fails
// the survivor within those bounds. The segment is unlinked once every rank mapped it.
//
// An operation points into the block without owning it (a shared_ptr copy per operation was two
// locked instructions, ~12 ns on this VM, a small operation's every round): the block must
// outlive every operation that is still polled. The runtime polls them only from its engine,
// which dies before the channel that owns the block; one it gave up on goes to keepForever
// (common/keep_forever.h) and is never polled or read again.

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/mpi/mpi_local_reduce.h"

namespace hcoll::backends::mpi {

// HCOLL_MPI_SHM_SMALL (0 | 1, default 1): what is wrong with its value, or empty. `0` on any rank
// (or HCOLL_MPI_SHM=0) turns the path off for every communicator that rank is part of.
std::string shmSmallSettingError();

// A rank's `published` word (pure; unit-tested): the operation's number k in the low 48 bits
// (2.8e14 operations, years at a microsecond each), and in the top 16 how far behind k the rank's
// ack watermark was when it published (0: unknown, a lag past the field). A peer reads the word
// anyway to see that k is there, and so learns the watermark without reading the watermark's
// line: the next publishes of a steady stream find their slots free from what they already know.
namespace shm_control_detail {
constexpr int kLagShift = 48;
constexpr uint64_t kSeqMask = (uint64_t{1} << kLagShift) - 1;
constexpr uint64_t kMaxLag = (uint64_t{1} << (64 - kLagShift)) - 1;

// `ackedThrough` < `seq`: a rank acks an operation only after publishing it.
constexpr uint64_t publishedWord(uint64_t seq, uint64_t ackedThrough) {
  const uint64_t lag = seq - ackedThrough;
  return (seq & kSeqMask) | (lag <= kMaxLag ? lag << kLagShift : 0);
}
// The watermark a published word carries (0 when it carries none).
constexpr uint64_t carriedWatermark(uint64_t word) {
  const uint64_t seq = word & kSeqMask, lag = word >> kLagShift;
  return lag != 0 && lag <= seq ? seq - lag : 0;
}
}  // namespace shm_control_detail

class ShmControl {
 public:
  static constexpr int kMaxRanks = 8;
  static constexpr size_t kSlots = 4;
  // The most one rank contributes to one data-plane operation here (its whole send buffer; for a
  // reduction, before the reduction): from 32 KiB the MPI schedules with the lanes are as fast.
  static constexpr size_t kDataSlotBytes = size_t{16} << 10;
  // The readiness AND's words and a folded operation of up to 2 KiB (negotiator.h's
  // kMaxFoldBytes) with its header.
  static constexpr size_t kControlSlotBytes = 3072;

  // Collective over `comm` (whose ranks are `size`, all on this node when localSize == size).
  // Returns the block, or null on every rank alike.
  static std::shared_ptr<ShmControl> make(MPI_Comm comm, int rank, int size, int localSize,
                                          uint64_t uniqueId);
  ~ShmControl();
  ShmControl(const ShmControl&) = delete;
  ShmControl& operator=(const ShmControl&) = delete;

  // Each returns the operation through the block, or null where it is not routed here (the
  // caller then uses MPI); the decision is the same on every rank (see the top of this file).
  // The readiness AND; `fold` (may be null: this rank folds nothing) rides in the same exchange
  // (backend.h's FoldedCollective). Null where the words do not fit a control slot.
  PendingPtr andBits(uint64_t* words, size_t count,
                     const Channel::FoldedCollective* fold = nullptr);
  // The most bytes one rank can fold into an AND of `words` words.
  size_t foldableBytes(size_t words) const;
  PendingPtr allreduce(const void* send, void* recv, size_t count, const Reduction& reduction);
  PendingPtr allgatherv(const void* send, size_t sendBytes, void* recv,
                        const std::vector<size_t>& recvBytes);
  PendingPtr broadcast(void* buf, size_t bytes, int root);
  PendingPtr alltoall(const void* send, void* recv, size_t bytesPerRank);
  PendingPtr reduceScatter(const void* send, void* recv, const std::vector<size_t>& recvCounts,
                           const Reduction& reduction);
  PendingPtr barrier();

  // One plane's slots (public for the operations in mpi_shm_control.cc).
  struct Plane {
    char* base = nullptr;
    size_t slotBytes = 0;
    size_t slotStride = 0;  // from one slot to the next: its header and bytes, whole lines
    // Per rank, a cache line with the highest k such that the rank acked every operation up to
    // k (its ack watermark; after the slots).
    char* watermarks = nullptr;
    // Only the driving thread (the seat holder) touches the rest.
    uint64_t started = 0;  // operations started on this plane
    // This rank's watermark, and which operations beyond watermark + 1 it acked (bit i:
    // watermark + 2 + i), for acks out of order.
    uint64_t ackedThrough = 0;
    uint64_t ackedAhead = 0;
    // Per rank, the highest watermark read so far.
    uint64_t knownThrough[kMaxRanks] = {};
  };
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  ShmControl(void* base, size_t bytes, int rank, int size);

  void* base_;
  size_t bytes_;
  int rank_;
  int size_;
  Plane control_;
  Plane data_;
};

}  // namespace hcoll::backends::mpi
