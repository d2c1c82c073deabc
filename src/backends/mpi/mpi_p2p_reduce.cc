#include <cstring>
#include <utility>

#include "backends/mpi/mpi_messages.h"
#include "backends/mpi/mpi_p2p.h"

namespace hcoll::backends::mpi {
namespace {

using p2p::BlockOffsets;
using p2p::MessagesPending;

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

}  // namespace hcoll::backends::mpi
