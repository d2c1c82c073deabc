#include "backends/mpi/mpi_p2p.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "backends/mpi/mpi_types.h"

namespace hcoll::backends::mpi {
namespace {

// The data communicator carries no other point-to-point traffic (negotiation has its own).
constexpr int kDataTag = 0;
// One message carries at most this much; longer transfers are cut the same way on both sides
// (both know the byte count from the negotiation), and non-overtaking keeps the pieces in order.
constexpr size_t kMaxMessageBytes = size_t{1} << 30;

// The messages of one operation. Receives are posted first (requests_[0, receives_)), so the
// sends of a fast peer find them waiting rather than going through MPI's unexpected queue.
class MessagesPending : public Pending {
 public:
  explicit MessagesPending(MPI_Comm comm) : comm_(comm) {}
  // Requests still active at destruction belong to an operation given up on after the peers
  // were lost: they are left to MPI, as the collectives' are (RequestsPending).
  ~MessagesPending() override = default;

  // Posts one transfer (in pieces of at most kMaxMessageBytes); the MPI return code.
  int post(bool receive, void* data, size_t bytes, int peer) {
    for (size_t offset = 0; offset < bytes;) {
      const size_t n = std::min(kMaxMessageBytes, bytes - offset);
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
    if (requests_.empty()) return advance(status);
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
    return advance(status);
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

  MPI_Comm comm_;
  std::vector<MPI_Request> requests_;
  size_t receives_ = 0;
};

// Binomial tree rooted at `root` (MPICH's MPIR_Bcast_intra_binomial, non-blocking): in ranks
// relative to the root, rank v receives from v minus its lowest set bit, then sends to v + 2^k
// for every 2^k below that bit.
class BinomialBroadcastPending final : public MessagesPending {
 public:
  BinomialBroadcastPending(MPI_Comm comm, int rank, int size, void* buf, size_t bytes, int root)
      : MessagesPending(comm), size_(size), root_(root), buf_(buf), bytes_(bytes) {
    relative_ = (rank - root + size) % size;
    int mask = 1;
    while (mask < size) {
      if ((relative_ & mask) != 0) {
        parent_ = (relative_ - mask + root) % size;
        break;
      }
      mask <<= 1;
    }
    childMask_ = mask >> 1;
  }

  int start() {
    if (parent_ >= 0) return post(/*receive=*/true, buf_, bytes_, parent_);
    return postChildren();
  }

 private:
  int postChildren() {
    sent_ = true;
    for (int mask = childMask_; mask > 0; mask >>= 1) {
      if (relative_ + mask >= size_) continue;
      const int child = (relative_ + mask + root_) % size_;
      if (int rc = post(/*receive=*/false, buf_, bytes_, child); rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
  }

  bool advance(Status* status) override {
    if (sent_) return MessagesPending::advance(status);
    if (int rc = postChildren(); rc != MPI_SUCCESS) {
      *status = mpiError("MPI_Isend", rc);
      return true;
    }
    return requests_.empty() ? MessagesPending::advance(status) : false;
  }

  int size_;
  int root_;
  void* buf_;
  size_t bytes_;
  int relative_ = 0;
  int parent_ = -1;
  int childMask_ = 0;
  bool sent_ = false;
};

}  // namespace

PendingPtr pointToPointAlltoallv(MPI_Comm comm, int rank, int size, const void* send,
                                 const std::vector<size_t>& sendBytes, void* recv,
                                 const std::vector<size_t>& recvBytes) {
  auto p = std::make_unique<MessagesPending>(comm);
  std::vector<size_t> sendOffset(static_cast<size_t>(size)), recvOffset(static_cast<size_t>(size));
  for (size_t j = 1; j < static_cast<size_t>(size); ++j) {
    sendOffset[j] = sendOffset[j - 1] + sendBytes[j - 1];
    recvOffset[j] = recvOffset[j - 1] + recvBytes[j - 1];
  }
  auto* in = static_cast<char*>(const_cast<void*>(send));  // MPI_Isend's buffer is const
  auto* out = static_cast<char*>(recv);
  // Peers in the order rank+1, rank+2, ...: not every rank sending to rank 0 first.
  for (int step = 1; step < size; ++step) {
    const int from = (rank - step + size) % size;
    if (recvBytes[from] == 0) continue;  // the peer's count for us is the same, negotiated
    if (int rc = p->post(true, out + recvOffset[from], recvBytes[from], from); rc != MPI_SUCCESS) {
      p->cancelReceives();
      return finished(mpiError("MPI_Irecv", rc));
    }
  }
  for (int step = 1; step < size; ++step) {
    const int to = (rank + step) % size;
    if (sendBytes[to] == 0) continue;
    if (int rc = p->post(false, in + sendOffset[to], sendBytes[to], to); rc != MPI_SUCCESS) {
      p->cancelReceives();
      return finished(mpiError("MPI_Isend", rc));
    }
  }
  const auto me = static_cast<size_t>(rank);
  if (sendBytes[me] != 0) std::memcpy(out + recvOffset[me], in + sendOffset[me], sendBytes[me]);
  return p;
}

PendingPtr pointToPointAllgatherv(MPI_Comm comm, int rank, int size, const void* send,
                                  size_t sendBytes, void* recv,
                                  const std::vector<size_t>& recvBytes) {
  auto p = std::make_unique<MessagesPending>(comm);
  auto* out = static_cast<char*>(recv);
  std::vector<size_t> offset(static_cast<size_t>(size));
  for (size_t j = 1; j < static_cast<size_t>(size); ++j)
    offset[j] = offset[j - 1] + recvBytes[j - 1];
  const auto me = static_cast<size_t>(rank);
  char* mine = send != nullptr ? static_cast<char*>(const_cast<void*>(send)) : out + offset[me];
  for (int step = 1; step < size; ++step) {
    const int from = (rank - step + size) % size;
    if (recvBytes[from] == 0) continue;  // the peer sends nothing either: negotiated sizes
    if (int rc = p->post(true, out + offset[from], recvBytes[from], from); rc != MPI_SUCCESS) {
      p->cancelReceives();
      return finished(mpiError("MPI_Irecv", rc));
    }
  }
  for (int step = 1; step < size && sendBytes != 0; ++step) {
    if (int rc = p->post(false, mine, sendBytes, (rank + step) % size); rc != MPI_SUCCESS) {
      p->cancelReceives();
      return finished(mpiError("MPI_Isend", rc));
    }
  }
  if (send != nullptr && sendBytes != 0) std::memcpy(out + offset[me], send, sendBytes);
  return p;
}

PendingPtr binomialBroadcast(MPI_Comm comm, int rank, int size, void* buf, size_t bytes, int root) {
  auto p = std::make_unique<BinomialBroadcastPending>(comm, rank, size, buf, bytes, root);
  if (int rc = p->start(); rc != MPI_SUCCESS) {
    p->cancelReceives();
    return finished(mpiError(rank == root ? "MPI_Isend" : "MPI_Irecv", rc));
  }
  return p;
}

}  // namespace hcoll::backends::mpi
