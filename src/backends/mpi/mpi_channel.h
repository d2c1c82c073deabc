#pragma once
// The MPI backend's view of one communicator. It owns two duplicates of the communicator it was
// made from: `control_` for negotiation messages and communicator management, `data_` for the
// collectives, so that negotiation traffic can never match a data-plane operation.

#include <mpi.h>

#include <memory>

#include "backends/mpi/mpi_p2p.h"
#include "backends/mpi/mpi_peer_signals.h"
#include "backends/mpi/mpi_shm_control.h"
#include "backends/mpi/mpi_transport_impl.h"
#include "backends/mpi/mpi_widen.h"

#include <memory>

#include "backends/backend.h"

namespace hcoll::backends::mpi {

// Owns an MPI communicator; frees it unless MPI has been finalized meanwhile.
class CommHandle {
 public:
  CommHandle() = default;
  explicit CommHandle(MPI_Comm c) : comm_(c) {}
  CommHandle(CommHandle&& o) noexcept : comm_(o.release()) {}
  CommHandle& operator=(CommHandle&& o) noexcept;
  CommHandle(const CommHandle&) = delete;
  CommHandle& operator=(const CommHandle&) = delete;
  ~CommHandle() { reset(); }
  MPI_Comm get() const { return comm_; }
  MPI_Comm release() {
    MPI_Comm c = comm_;
    comm_ = MPI_COMM_NULL;
    return c;
  }
  void reset();

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

class MpiChannel final : public Channel {
 public:
  // Builds a channel over `base` (taking ownership); collective over base's members.
  static Status make(CommHandle base, std::unique_ptr<Channel>* out);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int localRank() const override { return localRank_; }
  int localSize() const override { return localSize_; }

  PendingPtr allreduceBitsAnd(uint64_t* words, size_t count) override;
  size_t foldableBytes(size_t words) const override;
  PendingPtr allreduceBitsAndFolded(uint64_t* words, size_t count,
                                    const FoldedCollective& fold) override;
  PendingPtr gatherBytes(std::vector<uint8_t> mine,
                         std::vector<std::vector<uint8_t>>* atRoot) override;
  PendingPtr broadcastBytes(std::vector<uint8_t>* buf) override;
  size_t maxVectorCount() const override;
  std::string maxVectorCountReason() const override;
  ~MpiChannel() override;

  PendingPtr allreduce(const void* send, void* recv, size_t count, DataType dtype,
                       ReduceOp op) override;
  PendingPtr allgatherv(const void* send, size_t sendBytes, void* recv,
                        const std::vector<size_t>& recvBytes) override;
  PendingPtr broadcast(void* buf, size_t bytes, int root) override;
  PendingPtr alltoallv(const void* send, const std::vector<size_t>& sendBytes, void* recv,
                       const std::vector<size_t>& recvBytes) override;
  PendingPtr alltoall(const void* send, void* recv, size_t bytesPerRank, size_t ranks) override;
  PendingPtr reduceScatter(const void* send, void* recv, const std::vector<size_t>& recvCounts,
                           DataType dtype, ReduceOp op) override;
  PendingPtr barrier() override;
  // mpi_adasum.cc: the tree of common/adasum.h in point-to-point messages.
  PendingPtr adasum(void* buf, size_t count, DataType dtype,
                    const std::vector<size_t>& tensorCounts) override;

  Status split(int color, int key, std::unique_ptr<Channel>* out) override;
  Status create(const std::vector<int32_t>& ranks, std::unique_ptr<Channel>* out) override;

  PeerSignals& signals() override { return *signals_; }

 private:
  // Whether a `kind` operation of `bytes` bytes runs point to point here (mpi_algorithms.h).
  bool pointToPoint(OpKind kind, size_t bytes) const {
    return chooseSchedule(kind, size_, bytes) == Schedule::kPointToPoint;
  }

  // What the point-to-point schedules run with (mpi_transport.h).
  ScheduleContext scheduleContext(Reduction reduction = {}) const {
    return ScheduleContext{rank_, size_, &transports_, reduceScratch_, reduction};
  }

  MpiChannel() = default;

  CommHandle control_;
  CommHandle data_;
  int rank_ = 0;
  int size_ = 1;
  int localRank_ = 0;
  int localSize_ = 1;
  // This channel's id, agreed at creation: it tells this channel's notices and shared-memory
  // segments from those of a freed communicator whose context id was reused.
  uint64_t noticeId_ = 0;
  // Notices and stall notes on control_ (destroyed before it: declared after).
  std::unique_ptr<MpiPeerSignals> signals_;
  // Scratch kept across calls (common/scratch_pool.h), one pool per use (a widened reduction holds a
  // buffer of each at once): float32 copies of float16/bfloat16 sums (mpi_widen.h), and where
  // the point-to-point reduce-scatter receives (mpi_p2p.h).
  std::shared_ptr<ScratchPool> widePool_ = std::make_shared<ScratchPool>();
  std::shared_ptr<ScratchPool> reduceScratch_ = std::make_shared<ScratchPool>();
  // The point-to-point schedules' transports: MPI messages on data_, and shared-memory lanes
  // between the ranks when they all live on this node (mpi_shm.h).
  CommTransports transports_;
  // The small-message control block when the ranks all live on this node (mpi_shm_control.h), or
  // null: the readiness AND and the small collectives go through it.
  std::shared_ptr<ShmControl> small_;
};

}  // namespace hcoll::backends::mpi
