#include "backends/mpi/mpi_p2p.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <utility>

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

  // Room for `n` messages: one allocation, not one per doubling as they are posted.
  void reserve(size_t n) { requests_.reserve(n); }

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

namespace {

// Where each rank's block starts (prefix sums of the byte counts), inline up to 8 ranks: these
// schedules run once per operation on small communicators, where a heap allocation per table is
// a measurable share of the per-operation cost.
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

// Rank r sends block j of `send` to rank j and receives rank j's block for it into block j of
// `recv`; `block(buffer, j)` gives {offset, bytes} (buffer 0 = send, 1 = recv). Receives first;
// peers in the order rank+1, rank+2, ...: not every rank sending to rank 0 first.
template <typename Block>
PendingPtr exchangeBlocks(MPI_Comm comm, int rank, int size, const void* send, void* recv,
                          Block block) {
  auto p = std::make_unique<MessagesPending>(comm);
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
  if (bytes != 0) std::memcpy(out + block(1, rank).first, in + sendOffset, bytes);
  return p;
}

// Reduces the received contributions once every message completed (see
// pointToPointReduceScatter). The first peer's contribution (rank - 1's) is received straight
// into `recv`, the others' into the scratch buffer: on 2 ranks there is none, and `recv` is first
// touched by the transport rather than by a copy (a user-space first touch of a fresh 16 MiB
// output cost ~20 ms in page faults on the test VM).
class ReduceScatterPending final : public MessagesPending {
 public:
  ReduceScatterPending(MPI_Comm comm, int rank, int size, const uint8_t* ownBlock, void* recv,
                       size_t count, MPI_Datatype type, size_t elementSize, MPI_Op op,
                       std::shared_ptr<ScratchPool> pool, ScratchPool::Buffer scratch)
      : MessagesPending(comm),
        rank_(rank),
        size_(size),
        own_(ownBlock),
        recv_(static_cast<uint8_t*>(recv)),
        count_(count),
        type_(type),
        elementSize_(elementSize),
        op_(op),
        pool_(std::move(pool)),
        scratch_(std::move(scratch)) {}
  ~ReduceScatterPending() override {
    // Abandoned (peers lost): MPI may still write into the scratch buffer, as into any abandoned
    // operation's buffers, so it is left allocated.
    if (!done_) (void)scratch_.bytes.release();
  }
  // Where the contribution of the peer `step` ranks below this one (1 <= step < size) lands.
  uint8_t* slot(int step) {
    if (step == 1) return recv_;
    return scratch_.bytes.get() + static_cast<size_t>(step - 2) * count_ * elementSize_;
  }

 private:
  bool advance(Status* status) override {
    done_ = true;
    *status = Status::ok();
    if (size_ == 1) {
      if (recv_ != own_) std::memcpy(recv_, own_, count_ * elementSize_);
    } else {
      // recv holds rank - 1's contribution: recv = own op recv, then each further peer's.
      for (int step = 0; step < size_ - 1 && status->isOk(); ++step) {
        *status = reduceIntoRecv(step == 0 ? own_ : slot(step + 1));
      }
    }
    pool_->give(std::move(scratch_));
    return true;
  }

  Status reduceIntoRecv(const uint8_t* from) {
    for (size_t offset = 0; offset < count_; offset += kMaxReduceElements) {
      const size_t n = std::min(kMaxReduceElements, count_ - offset);
      const size_t at = offset * elementSize_;
      if (int rc = MPI_Reduce_local(from + at, recv_ + at, static_cast<int>(n), type_, op_);
          rc != MPI_SUCCESS) {
        return mpiError("MPI_Reduce_local", rc);
      }
    }
    return Status::ok();
  }

  static constexpr size_t kMaxReduceElements = INT_MAX / 16;
  int rank_;
  int size_;
  const uint8_t* own_;
  uint8_t* recv_;
  size_t count_;
  MPI_Datatype type_;
  size_t elementSize_;
  MPI_Op op_;
  std::shared_ptr<ScratchPool> pool_;
  ScratchPool::Buffer scratch_;
  bool done_ = false;
};

}  // namespace

ScratchPool::Buffer ScratchPool::take(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (spare_.bytes && spare_.capacity >= bytes) return std::move(spare_);
    spare_ = Buffer{};  // too small: replaced by the new one when that comes back
  }
  Buffer fresh;
  fresh.capacity = bytes > 0 ? bytes : 1;
  fresh.bytes.reset(new uint8_t[fresh.capacity]);
  return fresh;
}

void ScratchPool::give(Buffer buffer) {
  if (!buffer.bytes || buffer.capacity > kMaxPooledBytes) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!spare_.bytes || spare_.capacity < buffer.capacity) spare_ = std::move(buffer);
}

PendingPtr pointToPointReduceScatter(MPI_Comm comm, int rank, int size, const void* send,
                                     void* recv, const std::vector<size_t>& counts,
                                     MPI_Datatype type, size_t elementSize, MPI_Op op,
                                     std::shared_ptr<ScratchPool> pool) {
  const auto me = static_cast<size_t>(rank);
  const size_t mine = counts[me];
  const BlockOffsets offset(counts);
  const auto* in = static_cast<const uint8_t*>(send);
  ScratchPool::Buffer scratch;
  if (size > 2) scratch = pool->take(static_cast<size_t>(size - 2) * mine * elementSize);
  auto p = std::make_unique<ReduceScatterPending>(comm, rank, size, in + offset[me] * elementSize,
                                                  recv, mine, type, elementSize, op,
                                                  std::move(pool), std::move(scratch));
  p->reserve(2 * static_cast<size_t>(size - 1));
  for (int step = 1; step < size && mine != 0; ++step) {
    const int from = (rank - step + size) % size;
    if (int rc = p->post(true, p->slot(step), mine * elementSize, from); rc != MPI_SUCCESS) {
      p->cancelReceives();
      return finished(mpiError("MPI_Irecv", rc));
    }
  }
  for (int step = 1; step < size; ++step) {
    const int to = (rank + step) % size;
    const auto j = static_cast<size_t>(to);
    if (counts[j] == 0) continue;  // negotiated: rank `to` expects nothing either
    auto* block = const_cast<uint8_t*>(in + offset[j] * elementSize);  // MPI_Isend's is const
    if (int rc = p->post(false, block, counts[j] * elementSize, to); rc != MPI_SUCCESS) {
      p->cancelReceives();
      return finished(mpiError("MPI_Isend", rc));
    }
  }
  return p;
}

PendingPtr pointToPointAlltoallv(MPI_Comm comm, int rank, int size, const void* send,
                                 const std::vector<size_t>& sendBytes, void* recv,
                                 const std::vector<size_t>& recvBytes) {
  const BlockOffsets sendOffset(sendBytes), recvOffset(recvBytes);
  return exchangeBlocks(comm, rank, size, send, recv, [&](int buffer, int j) {
    const auto k = static_cast<size_t>(j);
    return buffer == 0 ? std::pair(sendOffset[k], sendBytes[k])
                       : std::pair(recvOffset[k], recvBytes[k]);
  });
}

PendingPtr pointToPointAlltoall(MPI_Comm comm, int rank, int size, const void* send, void* recv,
                                size_t bytesPerRank) {
  return exchangeBlocks(comm, rank, size, send, recv, [&](int, int j) {
    return std::pair(static_cast<size_t>(j) * bytesPerRank, bytesPerRank);
  });
}

PendingPtr pointToPointAllgatherv(MPI_Comm comm, int rank, int size, const void* send,
                                  size_t sendBytes, void* recv,
                                  const std::vector<size_t>& recvBytes) {
  auto p = std::make_unique<MessagesPending>(comm);
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
