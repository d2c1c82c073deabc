#pragma once
// The two transports of the point-to-point schedules (mpi_transport.h): MPI messages on the data
// communicator, and the shared-memory lanes (mpi_shm.h); and the factory a communicator opens
// both through, routed by RoutedTransport. Kept apart from the interface so that a schedule sees
// only P2pTransport; the unit tests use LaneTransport over in-memory lanes (ShmLanes::overMemory).

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "backends/mpi/mpi_shm.h"
#include "backends/mpi/mpi_transport.h"

namespace hcoll::backends::mpi {

// The data communicator carries no other point-to-point traffic (negotiation has its own).
constexpr int kDataTag = 0;
// One message carries at most this much; longer transfers are cut the same way on both sides
// (both know the byte count from the negotiation), and non-overtaking keeps the pieces in order.
constexpr size_t kMaxMessageBytes = size_t{1} << 30;

// MPICH (over UCX shared memory, measured on 2 ranks) sends messages of up to 8 KiB eagerly and
// larger ones with a rendezvous handshake that costs more than the copy at these sizes: 16 KiB
// took 4.0 us as one message and 1.3 us as two 8 KiB ones, 32 KiB 5.6 and 4.2 us, 64 KiB 6.8 and
// 8.4 us (worse from there on). So transfers of (8, 32] KiB go as 8 KiB pieces. Open MPI's
// shared-memory transport measured 2-5x slower in pieces: it sends them whole. Both sides cut a
// transfer the same way: they know its byte count from the negotiation.
#ifdef MPICH
constexpr size_t kEagerPieceBytes = 8192;
constexpr size_t kEagerPiecesUpTo = 32768;
#else
constexpr size_t kEagerPieceBytes = 0;
constexpr size_t kEagerPiecesUpTo = 0;
#endif

// The size of the pieces a transfer of `bytes` is cut into.
constexpr size_t pieceBytes(size_t bytes) {
  return bytes > kEagerPieceBytes && bytes <= kEagerPiecesUpTo ? kEagerPieceBytes
                                                               : kMaxMessageBytes;
}

// Transfers as MPI_Isend/MPI_Irecv on one communicator and tag, in pieces (pieceBytes). Receives
// are kept first in the request array (requests_[0, receives_)), so that giving up withdraws
// exactly them. Requests still active at destruction belong to an operation given up on after
// the peers were lost: they are left to MPI, as the collectives' are (RequestsPending).
class MpiTransport final : public P2pTransport {
 public:
  MpiTransport(MPI_Comm comm, int tag, size_t transfersPerStage) : comm_(comm), tag_(tag) {
    requests_.reserve(transfersPerStage);
  }
  MpiTransport(MpiTransport&&) = default;

  bool available() const { return comm_ != MPI_COMM_NULL; }
  Status postSend(int peer, const void* data, size_t bytes) override;
  Status postRecv(int peer, void* data, size_t bytes) override;
  void postLocalCopy(void* to, const void* from, size_t bytes) override;
  bool poll(Status* status) override;
  bool idle() const override { return requests_.empty(); }
  void abandon() override;

 private:
  Status post(bool receive, char* data, size_t bytes, int peer);

  MPI_Comm comm_;
  int tag_;
  std::vector<MPI_Request> requests_;
  size_t receives_ = 0;
};

// Transfers through the shared-memory lanes, each copied chunk by chunk as its lane allows.
// Transfers on one lane (direction and peer) move in the order they were posted, as MPI would
// match them; a rank's own block (postLocalCopy) is copied a chunk per poll between moves on the
// lanes, so the peers' rings keep filling and emptying meanwhile (copied at once, a peer would
// wait for this rank's first chunk until the whole block was copied). Nothing is withdrawn on
// giving up: a lane half-way through a transfer is out of step, and the communicator ends with
// the operation (the executor).
class LaneTransport final : public P2pTransport {
 public:
  LaneTransport(std::shared_ptr<ShmLanes> lanes, size_t transfersPerStage)
      : lanes_(std::move(lanes)) {
    if (lanes_) transfers_.reserve(transfersPerStage);
  }
  LaneTransport(LaneTransport&&) = default;

  bool available() const { return lanes_ != nullptr; }
  Status postSend(int peer, const void* data, size_t bytes) override;
  Status postRecv(int peer, void* data, size_t bytes) override;
  void postLocalCopy(void* to, const void* from, size_t bytes) override;
  bool poll(Status* status) override;
  bool idle() const override { return transfers_.empty() && ownBlock_.done == ownBlock_.bytes; }
  void abandon() override {}

 private:
  struct Transfer {
    char* data;
    size_t bytes;
    size_t done;
    int peer;
    bool receive;
  };
  struct OwnBlock {
    char* to = nullptr;
    const char* from = nullptr;
    size_t bytes = 0;
    size_t done = 0;
  };

  std::shared_ptr<ShmLanes> lanes_;  // null: no lanes on this communicator
  std::vector<Transfer> transfers_;
  OwnBlock ownBlock_;
};

// A communicator's transports: MPI messages on `comm`, and its lanes when it has them.
class CommTransports final : public TransportFactory {
 public:
  CommTransports() = default;
  CommTransports(MPI_Comm comm, std::shared_ptr<ShmLanes> lanes)
      : comm_(comm), lanes_(std::move(lanes)) {}
  std::unique_ptr<P2pTransport> open(size_t transfersPerStage) const override {
    return std::make_unique<RoutedTransport<MpiTransport, LaneTransport>>(
        MpiTransport(comm_, kDataTag, transfersPerStage), LaneTransport(lanes_, transfersPerStage));
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::shared_ptr<ShmLanes> lanes_;
};

}  // namespace hcoll::backends::mpi
