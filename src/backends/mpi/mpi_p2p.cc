#include "backends/mpi/mpi_p2p.h"

#include <cstring>
#include <utility>

#include "backends/mpi/mpi_messages.h"

namespace hcoll::backends::mpi {
namespace {

using p2p::BlockOffsets;
using p2p::MessagesPending;

// Binomial tree rooted at `root` (MPICH's MPIR_Bcast_intra_binomial, non-blocking): in ranks
// relative to the root, rank v receives from v minus its lowest set bit, then sends to v + 2^k
// for every 2^k below that bit.
class BinomialBroadcastPending final : public MessagesPending {
 public:
  BinomialBroadcastPending(MPI_Comm comm, int rank, int size, void* buf, size_t bytes, int root,
                           std::shared_ptr<ShmLanes> lanes)
      : MessagesPending(comm, std::move(lanes)),
        size_(size),
        root_(root),
        buf_(buf),
        bytes_(bytes) {
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
    return idle() ? MessagesPending::advance(status) : false;
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

// Rank r sends block j of `send` to rank j and receives rank j's block for it into block j of
// `recv`; `block(buffer, j)` gives {offset, bytes} (buffer 0 = send, 1 = recv). Receives first;
// peers in the order rank+1, rank+2, ...: not every rank sending to rank 0 first.
template <typename Block>
PendingPtr exchangeBlocks(MPI_Comm comm, int rank, int size, const void* send, void* recv,
                          std::shared_ptr<ShmLanes> lanes, Block block) {
  auto p = std::make_unique<MessagesPending>(comm, std::move(lanes));
  p->reserve(2 * static_cast<size_t>(size - 1));
  auto* in = static_cast<char*>(const_cast<void*>(send));  // MPI_Isend's buffer is const
  auto* out = static_cast<char*>(recv);
  for (int step = 1; step < size; ++step) {
    const int from = (rank - step + size) % size;
    const auto [offset, bytes] = block(1, from);
    if (bytes == 0) continue;  // the peer's count for us is the same, negotiated
    if (int rc = p->post(true, out + offset, bytes, from); rc != MPI_SUCCESS) {
      p->cancelReceives();
      return finished(mpiError("MPI_Irecv", rc));
    }
  }
  for (int step = 1; step < size; ++step) {
    const int to = (rank + step) % size;
    const auto [offset, bytes] = block(0, to);
    if (bytes == 0) continue;
    if (int rc = p->post(false, in + offset, bytes, to); rc != MPI_SUCCESS) {
      p->cancelReceives();
      return finished(mpiError("MPI_Isend", rc));
    }
  }
  const auto [sendOffset, bytes] = block(0, rank);
  if (bytes != 0) p->copyOwnBlock(out + block(1, rank).first, in + sendOffset, bytes);
  return p;
}

}  // namespace

PendingPtr pointToPointAlltoallv(MPI_Comm comm, int rank, int size, const void* send,
                                 const std::vector<size_t>& sendBytes, void* recv,
                                 const std::vector<size_t>& recvBytes,
                                 std::shared_ptr<ShmLanes> lanes) {
  const BlockOffsets sendOffset(sendBytes), recvOffset(recvBytes);
  return exchangeBlocks(comm, rank, size, send, recv, std::move(lanes), [&](int buffer, int j) {
    const auto k = static_cast<size_t>(j);
    return buffer == 0 ? std::pair(sendOffset[k], sendBytes[k])
                       : std::pair(recvOffset[k], recvBytes[k]);
  });
}

PendingPtr pointToPointAlltoall(MPI_Comm comm, int rank, int size, const void* send, void* recv,
                                size_t bytesPerRank, std::shared_ptr<ShmLanes> lanes) {
  return exchangeBlocks(comm, rank, size, send, recv, std::move(lanes), [&](int, int j) {
    return std::pair(static_cast<size_t>(j) * bytesPerRank, bytesPerRank);
  });
}

PendingPtr pointToPointAllgatherv(MPI_Comm comm, int rank, int size, const void* send,
                                  size_t sendBytes, void* recv,
                                  const std::vector<size_t>& recvBytes,
                                  std::shared_ptr<ShmLanes> lanes) {
  auto p = std::make_unique<MessagesPending>(comm, std::move(lanes));
  p->reserve(2 * static_cast<size_t>(size - 1));
  auto* out = static_cast<char*>(recv);
  const BlockOffsets offset(recvBytes);
  const auto me = static_cast<size_t>(rank);
  char* mine = send != nullptr ? static_cast<char*>(const_cast<void*>(send)) : out + offset[me];
  for (int step = 1; step < size; ++step) {
    const int from = (rank - step + size) % size;
    const auto j = static_cast<size_t>(from);
    if (recvBytes[j] == 0) continue;  // the peer sends nothing either: negotiated sizes
    if (int rc = p->post(true, out + offset[j], recvBytes[j], from); rc != MPI_SUCCESS) {
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
  if (send != nullptr && sendBytes != 0) p->copyOwnBlock(out + offset[me], send, sendBytes);
  return p;
}

PendingPtr binomialBroadcast(MPI_Comm comm, int rank, int size, void* buf, size_t bytes, int root,
                             std::shared_ptr<ShmLanes> lanes) {
  auto p = std::make_unique<BinomialBroadcastPending>(
      comm, rank, size, buf, bytes, root, std::move(lanes));
  if (int rc = p->start(); rc != MPI_SUCCESS) {
    p->cancelReceives();
    return finished(mpiError(rank == root ? "MPI_Isend" : "MPI_Irecv", rc));
  }
  return p;
}

}  // namespace hcoll::backends::mpi
