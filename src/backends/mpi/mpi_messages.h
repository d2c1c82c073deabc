#pragma once
// The message machinery of the point-to-point schedules (mpi_p2p.h): internal to the MPI
// backend, shared by mpi_p2p.cc (data movement) and mpi_p2p_reduce.cc (reductions).

#include <mpi.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "backends/mpi/mpi_algorithms.h"
#include "backends/mpi/mpi_shm.h"
#include "backends/mpi/mpi_types.h"

namespace hcoll::backends::mpi::p2p {

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

// Which transfers go through the shared-memory lanes: kLanesFrom (mpi_algorithms.h).

// The messages of one operation. Receives are posted first (requests_[0, receives_)), so the
// sends of a fast peer find them waiting rather than going through MPI's unexpected queue.
class MessagesPending : public Pending {
 public:
  explicit MessagesPending(MPI_Comm comm, std::shared_ptr<ShmLanes> lanes = nullptr)
      : comm_(comm), lanes_(std::move(lanes)) {}
  // Requests still active at destruction belong to an operation given up on after the peers
  // were lost: they are left to MPI, as the collectives' are (RequestsPending).
  ~MessagesPending() override = default;

  // Room for `n` messages: one allocation, not one per doubling as they are posted.
  void reserve(size_t n) { requests_.reserve(n); }

  // Posts one transfer (through a lane, or as MPI messages in pieces: pieceBytes); the MPI
  // return code.
  int post(bool receive, void* data, size_t bytes, int peer) {
    if (lanes_ && bytes > kLanesFrom) {
      laneTransfers_.push_back(LaneTransfer{static_cast<char*>(data), bytes, 0, peer, receive});
      return MPI_SUCCESS;
    }
    const size_t piece = pieceBytes(bytes);
    for (size_t offset = 0; offset < bytes;) {
      const size_t n = std::min(piece, bytes - offset);
      char* at = static_cast<char*>(data) + offset;
      const int count = static_cast<int>(n);
      requests_.push_back(MPI_REQUEST_NULL);
      MPI_Request* r = &requests_.back();
      const int rc = receive ? MPI_Irecv(at, count, MPI_BYTE, peer, kDataTag, comm_, r)
                             : MPI_Isend(at, count, MPI_BYTE, peer, kDataTag, comm_, r);
      if (rc != MPI_SUCCESS) {
        requests_.pop_back();
        return rc;
      }
      if (receive) ++receives_;
      offset += n;
    }
    return MPI_SUCCESS;
  }

  bool poll(Status* status) override {
    const bool lanesDone =
        (laneTransfers_.empty() && ownBlock_.done == ownBlock_.bytes) || moveLanes();
    if (requests_.empty()) return lanesDone && finishStage(status);
    int done = 0;
    const int rc = MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done,
                               MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) {
      cancelReceives();
      *status = mpiError("MPI_Testall", rc);
      return true;
    }
    if (!done) return false;
    requests_.clear();
    receives_ = 0;
    return lanesDone && finishStage(status);
  }

  // This rank's own block (alltoall, allgather). With lanes it is copied a chunk at a time
  // between moves on the lanes, so the peers' rings keep filling and emptying meanwhile: copied
  // at once, a peer would wait for this rank's first chunk until the whole block was copied.
  void copyOwnBlock(void* to, const void* from, size_t bytes) {
    if (!lanes_ || bytes <= ShmLanes::kChunkBytes) {
      std::memcpy(to, from, bytes);
      return;
    }
    ownBlock_ = OwnBlock{static_cast<char*>(to), static_cast<const char*>(from), bytes, 0};
  }

  // A receive left posted would match a later operation's message: withdraw them.
  void cancelReceives() {
    for (size_t i = 0; i < receives_ && i < requests_.size(); ++i) {
      if (requests_[i] == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&requests_[i]);
      MPI_Request_free(&requests_[i]);
    }
  }

 protected:
  // Called once every posted message completed: posts the next stage and returns false, or
  // returns true (finished, *status set).
  virtual bool advance(Status* status) {
    *status = Status::ok();
    return true;
  }

  // Nothing posted in this stage (an advance that posted nothing has finished).
  bool idle() const { return requests_.empty() && laneTransfers_.empty(); }

  MPI_Comm comm_;
  std::vector<MPI_Request> requests_;
  size_t receives_ = 0;

 private:
  struct LaneTransfer {
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

  bool finishStage(Status* status) {
    laneTransfers_.clear();
    ownBlock_ = OwnBlock{};
    return advance(status);
  }

  // Copies what the lanes allow; true once every lane transfer of this stage is done. Transfers
  // on one lane (direction and peer) go in the order they were posted, as MPI would match them.
  bool moveLanes() {
    uint64_t laneBusy = 0;  // bit 2 * peer + receive: an earlier transfer on it is unfinished
    bool all = true;
    for (LaneTransfer& t : laneTransfers_) {
      if (t.done == t.bytes) continue;
      const uint64_t bit = uint64_t{1} << (2 * t.peer + (t.receive ? 1 : 0));
      if ((laneBusy & bit) == 0) {
        t.done += t.receive ? lanes_->pull(t.peer, t.data + t.done, t.bytes - t.done)
                            : lanes_->push(t.peer, t.data + t.done, t.bytes - t.done);
      }
      if (t.done < t.bytes) {
        laneBusy |= bit;
        all = false;
      }
    }
    if (ownBlock_.done < ownBlock_.bytes) {
      const size_t n = std::min(ShmLanes::kChunkBytes, ownBlock_.bytes - ownBlock_.done);
      std::memcpy(ownBlock_.to + ownBlock_.done, ownBlock_.from + ownBlock_.done, n);
      ownBlock_.done += n;
      all = all && ownBlock_.done == ownBlock_.bytes;
    }
    return all;
  }

  std::shared_ptr<ShmLanes> lanes_;  // null: MPI messages only
  std::vector<LaneTransfer> laneTransfers_;
  OwnBlock ownBlock_;
};

// Where each rank's block starts (prefix sums of the byte counts), inline up to 8 ranks: these
// schedules run on small communicators, and need no heap allocation per table and operation.
class BlockOffsets {
 public:
  explicit BlockOffsets(const std::vector<size_t>& bytes) {
    if (bytes.size() > inline_.size()) heap_.resize(bytes.size());
    size_t* at = heap_.empty() ? inline_.data() : heap_.data();
    size_t sum = 0;
    for (size_t j = 0; j < bytes.size(); ++j) {
      at[j] = sum;
      sum += bytes[j];
    }
  }
  size_t operator[](size_t j) const { return heap_.empty() ? inline_[j] : heap_[j]; }

 private:
  std::array<size_t, 8> inline_{};
  std::vector<size_t> heap_;
};

}  // namespace hcoll::backends::mpi::p2p
