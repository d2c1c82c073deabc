#pragma once
// One rank's view of a loopback communicator. Every rank of the communicator is a thread of this
// process with its own channel over the same shared Group; calls follow the Channel contract
// (one negotiation thread per channel, non-blocking collectives, blocking split/create).

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "backends/loopback/loopback_group.h"
#include "backends/loopback/loopback_pending.h"

namespace hcoll::backends::loopback {

class LoopbackChannel final : public Channel {
 public:
  LoopbackChannel(std::shared_ptr<Group> group, int rank);
  // Tells the group this rank left (a split waiting for it gives up); Pendings stay valid.
  ~LoopbackChannel() override;

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  // One process: every rank is node-local.
  int localRank() const override { return rank_; }
  int localSize() const override { return group_->size(); }

  PendingPtr allreduceBitsAnd(uint64_t* words, size_t count) override;
  size_t foldableBytes(size_t words) const override;
  PendingPtr allreduceBitsAndFolded(uint64_t* words, size_t count,
                                    const FoldedCollective& fold) override;
  PendingPtr gatherBytes(std::vector<uint8_t> mine,
                         std::vector<std::vector<uint8_t>>* atRoot) override;
  PendingPtr broadcastBytes(std::vector<uint8_t>* buf) override;

  PendingPtr allreduce(const void* send, void* recv, size_t count, DataType dtype,
                       ReduceOp op) override;
  PendingPtr allgatherv(const void* send, size_t sendBytes, void* recv,
                        const std::vector<size_t>& recvBytes) override;
  PendingPtr broadcast(void* buf, size_t bytes, int root) override;
  PendingPtr alltoallv(const void* send, const std::vector<size_t>& sendBytes, void* recv,
                       const std::vector<size_t>& recvBytes) override;
  PendingPtr reduceScatter(const void* send, void* recv, const std::vector<size_t>& recvCounts,
                           DataType dtype, ReduceOp op) override;
  PendingPtr barrier() override;
  PendingPtr adasum(void* buf, size_t count, DataType dtype,
                    const std::vector<size_t>& tensorCounts) override;

  // Blocking and collective over this channel's ranks, like MPI_Comm_split: returns once every
  // rank called it, or fails with SHUT_DOWN when a rank that had not called it left.
  Status split(int color, int key, std::unique_ptr<Channel>* out) override;
  Status create(const std::vector<int32_t>& ranks, std::unique_ptr<Channel>* out) override;

  PeerSignals& signals() override { return signals_; }

 private:
  // Notices and stall notes through the group's mailboxes (loopback_group.h).
  class Signals final : public PeerSignals {
   public:
    Signals(std::shared_ptr<Group> group, int rank) : group_(std::move(group)), rank_(rank) {}
    void sendNotice(NoticeKind kind, Code code, const std::string& text) override;
    bool pollNotice(Notice* out) override { return group_->take(rank_, out); }
    bool tracksWaiting() const override { return true; }
    void noteWaiting(uint64_t round) override { group_->noteWaiting(rank_, round); }
    std::vector<int> peersWaiting(uint64_t round) override {
      return group_->peersWaiting(rank_, round);
    }

   private:
    std::shared_ptr<Group> group_;
    int rank_;
  };

  Seat seat(Plane plane) { return Seat{group_, plane, next_[static_cast<size_t>(plane)]++, rank_}; }

  std::shared_ptr<Group> group_;
  int rank_;
  uint64_t next_[3] = {0, 0, 0};  // the next sequence number per Plane
  Signals signals_;
};

}  // namespace hcoll::backends::loopback
