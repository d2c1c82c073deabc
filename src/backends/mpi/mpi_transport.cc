// MPI messages and shared-memory lanes as transports of the point-to-point schedules
// (mpi_transport_impl.h).
#include "backends/mpi/mpi_transport_impl.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "backends/mpi/mpi_types.h"
#include "common/copy_bytes.h"

namespace hcoll::backends::mpi {

Status MpiTransport::postSend(int peer, const void* data, size_t bytes) {
  // MPI_Isend's buffer is const; ours is typed for both directions.
  return post(false, static_cast<char*>(const_cast<void*>(data)), bytes, peer);
}

Status MpiTransport::postRecv(int peer, void* data, size_t bytes) {
  return post(true, static_cast<char*>(data), bytes, peer);
}

void MpiTransport::postLocalCopy(void* to, const void* from, size_t bytes) {
  copyBytes(to, from, bytes);
}

Status MpiTransport::post(bool receive, char* data, size_t bytes, int peer) {
  const size_t piece = pieceBytes(bytes);
  for (size_t offset = 0; offset < bytes;) {
    const size_t n = std::min(piece, bytes - offset);
    const int count = static_cast<int>(n);
    MPI_Request request = MPI_REQUEST_NULL;
    const int rc = receive ? MPI_Irecv(data + offset, count, MPI_BYTE, peer, tag_, comm_, &request)
                           : MPI_Isend(data + offset, count, MPI_BYTE, peer, tag_, comm_, &request);
    if (rc != MPI_SUCCESS) return mpiError(receive ? "MPI_Irecv" : "MPI_Isend", rc);
    requests_.push_back(request);
    if (receive) {
      // Receives first: swap it in front of the stage's sends (Testall does not mind the order).
      std::swap(requests_.back(), requests_[receives_]);
      ++receives_;
    }
    offset += n;
  }
  return Status::ok();
}

bool MpiTransport::poll(Status* status) {
  if (requests_.empty()) {
    *status = Status::ok();
    return true;
  }
  int done = 0;
  const int rc =
      MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS) {
    abandon();
    *status = mpiError("MPI_Testall", rc);
    return true;
  }
  if (!done) return false;
  requests_.clear();
  receives_ = 0;
  *status = Status::ok();
  return true;
}

void MpiTransport::abandon() {
  // A receive left posted would match a later operation's message: withdraw them. Sends stay
  // with MPI (the peer may still receive them; freeing the buffer under them is not allowed).
  for (size_t i = 0; i < receives_ && i < requests_.size(); ++i) {
    if (requests_[i] == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&requests_[i]);
    MPI_Request_free(&requests_[i]);
  }
  receives_ = 0;
}

Status LaneTransport::postSend(int peer, const void* data, size_t bytes) {
  transfers_.push_back(
      Transfer{static_cast<char*>(const_cast<void*>(data)), bytes, 0, peer, false});
  return Status::ok();
}

Status LaneTransport::postRecv(int peer, void* data, size_t bytes) {
  transfers_.push_back(Transfer{static_cast<char*>(data), bytes, 0, peer, true});
  return Status::ok();
}

void LaneTransport::postLocalCopy(void* to, const void* from, size_t bytes) {
  if (bytes <= ShmLanes::kChunkBytes) {
    copyBytes(to, from, bytes);
    return;
  }
  ownBlock_ = OwnBlock{static_cast<char*>(to), static_cast<const char*>(from), bytes, 0};
}

bool LaneTransport::poll(Status* status) {
  uint64_t laneBusy = 0;  // bit 2 * peer + receive: an earlier transfer on it is unfinished
  bool all = true;
  for (Transfer& t : transfers_) {
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
    copyBytes(ownBlock_.to + ownBlock_.done, ownBlock_.from + ownBlock_.done, n);
    ownBlock_.done += n;
    all = all && ownBlock_.done == ownBlock_.bytes;
  }
  if (!all) return false;
  transfers_.clear();
  ownBlock_ = OwnBlock{};
  *status = Status::ok();
  return true;
}

}  // namespace hcoll::backends::mpi
