// The reductions of the point-to-point schedules (mpi_p2p.h): reduce-scatter with every block
// sent to its owner and reduced there (common/reduce.h), and allreduce as that reduce-scatter
// then an allgather of the reduced blocks.
#include <utility>

#include "backends/mpi/mpi_local_reduce.h"
#include "backends/mpi/mpi_p2p.h"
#include "backends/mpi/mpi_schedule.h"
#include "common/copy_bytes.h"

namespace hcoll::backends::mpi {
namespace {

using p2p::BlockOffsets;
using p2p::StagedSchedule;

// Reduces the received contributions once every message completed (see
// pointToPointReduceScatter). The first peer's contribution (rank - 1's) is received straight
// into `recv`, the others' into the scratch buffer: on 2 ranks there is none, and `recv` is first
// touched by the transport rather than by a copy (a user-space first touch of a fresh 16 MiB
// output cost ~20 ms in page faults on the test VM).
class ReduceScatterPending final : public StagedSchedule {
 public:
  ReduceScatterPending(const ScheduleContext& context, const uint8_t* ownBlock, void* recv,
                       size_t count)
      : StagedSchedule(context, 2 * static_cast<size_t>(context.size - 1)),
        size_(context.size),
        own_(ownBlock),
        recv_(static_cast<uint8_t*>(recv)),
        count_(count),
        reduction_(context.reduction),
        pool_(context.pool) {
    if (size_ > 2)
      scratch_ = pool_->take(static_cast<size_t>(size_ - 2) * count_ * reduction_.elementSize);
  }
  ~ReduceScatterPending() override {
    // Abandoned (peers lost): MPI may still write into the scratch buffer, as into any abandoned
    // operation's buffers, so it is left allocated.
    if (!done_) (void)scratch_.bytes.release();
  }
  // Where the contribution of the peer `step` ranks below this one (1 <= step < size) lands.
  uint8_t* slot(int step) {
    if (step == 1) return recv_;
    return scratch_.bytes.get() + static_cast<size_t>(step - 2) * count_ * reduction_.elementSize;
  }

 private:
  bool advance(Status* status) override {
    done_ = true;
    *status = Status::ok();
    if (size_ == 1) {
      if (recv_ != own_) copyBytes(recv_, own_, count_ * reduction_.elementSize);
    } else {
      // recv holds rank - 1's contribution: recv = own op recv, then each further peer's.
      for (int step = 0; step < size_ - 1; ++step) {
        reduceLocal(reduction_, step == 0 ? own_ : slot(step + 1), recv_, count_);
      }
    }
    pool_->give(std::move(scratch_));
    return true;
  }

  int size_;
  const uint8_t* own_;
  uint8_t* recv_;
  size_t count_;
  Reduction reduction_;
  std::shared_ptr<ScratchPool> pool_;
  ScratchPool::Buffer scratch_;
  bool done_ = false;
};

// Allreduce as a reduce-scatter into the owner's block of `recv`, then an allgather of the
// reduced blocks. Each block is reduced by exactly one rank (its owner) and copied to the others,
// so every rank ends with bitwise the same result whatever the op does with operand order (MIN
// and MAX of a NaN, say), as MPI advises and NCCL's ring guarantees.
class AllreducePending final : public StagedSchedule {
 public:
  struct Layout {
    int rank = 0;
    int size = 1;
    size_t count = 0;  // elements in all
    Reduction reduction;
    size_t elementSize() const { return reduction.elementSize; }
    // Rank j owns elements [first(j), first(j) + owned(j)): count / size each, the first
    // count % size ranks one more.
    size_t owned(int j) const {
      const auto n = static_cast<size_t>(size);
      return count / n + (static_cast<size_t>(j) < count % n ? 1 : 0);
    }
    size_t first(int j) const {
      const auto n = static_cast<size_t>(size), k = static_cast<size_t>(j);
      return k * (count / n) + std::min(k, count % n);
    }
  };

  AllreducePending(const ScheduleContext& context, const Layout& layout, const uint8_t* send,
                   uint8_t* recv)
      : StagedSchedule(context, 2 * static_cast<size_t>(layout.size - 1)),
        layout_(layout),
        send_(send),
        recv_(recv),
        inPlace_(send == nullptr),
        pool_(context.pool) {
    const size_t mine = layout_.owned(layout_.rank);
    // Out of place, rank - 1's contribution lands straight in the own block of recv. (Signed:
    // one rank out of place needs no slot, not SIZE_MAX of them.)
    const int slots = layout_.size - (inPlace_ ? 1 : 2);
    if (slots > 0 && mine > 0) {
      scratch_ = pool_->take(static_cast<size_t>(slots) * mine * layout_.elementSize());
    }
  }
  ~AllreducePending() override {
    // Abandoned (peers lost): MPI may still write into the scratch buffer.
    if (!done_) (void)scratch_.bytes.release();
  }

  // Posts the reduce-scatter's transfers.
  Status start() {
    const int rank = layout_.rank, size = layout_.size;
    const size_t mineBytes = layout_.owned(rank) * layout_.elementSize();
    for (int step = 1; step < size && mineBytes != 0; ++step) {
      HCOLL_RETURN_IF_ERROR(
          transport().postRecv((rank - step + size) % size, slot(step), mineBytes));
    }
    const uint8_t* source = inPlace_ ? recv_ : send_;
    for (int step = 1; step < size; ++step) {
      const int to = (rank + step) % size;
      const size_t bytes = layout_.owned(to) * layout_.elementSize();
      if (bytes == 0) continue;  // the same on every rank: count is negotiated
      HCOLL_RETURN_IF_ERROR(
          transport().postSend(to, source + layout_.first(to) * layout_.elementSize(), bytes));
    }
    return Status::ok();
  }

 private:
  // Where the contribution of the peer `step` ranks below this one lands.
  uint8_t* slot(int step) {
    if (!inPlace_ && step == 1) return ownBlock();
    const int index = step - (inPlace_ ? 1 : 2);
    return scratch_.bytes.get() +
           static_cast<size_t>(index) * layout_.owned(layout_.rank) * layout_.elementSize();
  }
  uint8_t* ownBlock() { return recv_ + layout_.first(layout_.rank) * layout_.elementSize(); }

  bool advance(Status* status) override {
    if (!reduced_) {
      reduced_ = true;
      *status = reduceOwnBlock();
      if (status->isOk()) *status = postAllgather();
      if (!status->isOk()) {
        transport().abandon();
        return finish();
      }
      if (!idle()) return false;
    }
    *status = Status::ok();
    return finish();
  }

  bool finish() {
    done_ = true;
    pool_->give(std::move(scratch_));
    return true;
  }

  Status reduceOwnBlock() {
    const size_t n = layout_.owned(layout_.rank);
    if (n == 0 || layout_.size == 1) {
      if (!inPlace_ && n != 0) {
        copyBytes(ownBlock(), send_ + layout_.first(layout_.rank) * layout_.elementSize(),
                  n * layout_.elementSize());
      }
      return Status::ok();
    }
    // In place the own block holds this rank's contribution; out of place, rank - 1's (slot 1).
    if (!inPlace_) {
      reduceLocal(layout_.reduction, send_ + layout_.first(layout_.rank) * layout_.elementSize(),
                  ownBlock(), n);
    }
    for (int step = inPlace_ ? 1 : 2; step < layout_.size; ++step) {
      reduceLocal(layout_.reduction, slot(step), ownBlock(), n);
    }
    return Status::ok();
  }

  // Every owner's reduced block to every other rank. Posted once the reduce-scatter completed:
  // its sends read the blocks these receives overwrite (in place), and every message of that
  // phase from a peer was matched before any of this phase is received (non-overtaking).
  Status postAllgather() {
    const int rank = layout_.rank, size = layout_.size;
    for (int step = 1; step < size; ++step) {
      const int from = (rank - step + size) % size;
      const size_t bytes = layout_.owned(from) * layout_.elementSize();
      if (bytes == 0) continue;
      HCOLL_RETURN_IF_ERROR(
          transport().postRecv(from, recv_ + layout_.first(from) * layout_.elementSize(), bytes));
    }
    const size_t mineBytes = layout_.owned(rank) * layout_.elementSize();
    for (int step = 1; step < size && mineBytes != 0; ++step) {
      HCOLL_RETURN_IF_ERROR(transport().postSend((rank + step) % size, ownBlock(), mineBytes));
    }
    return Status::ok();
  }

  Layout layout_;
  const uint8_t* send_;
  uint8_t* recv_;
  bool inPlace_;
  std::shared_ptr<ScratchPool> pool_;
  ScratchPool::Buffer scratch_;
  bool reduced_ = false;
  bool done_ = false;
};

}  // namespace

PendingPtr pointToPointReduceScatter(const ScheduleContext& context, const void* send, void* recv,
                                     const std::vector<size_t>& counts) {
  const int rank = context.rank, size = context.size;
  const size_t elementSize = context.reduction.elementSize;
  const auto me = static_cast<size_t>(rank);
  const size_t mine = counts[me];
  const BlockOffsets offset(counts);
  const auto* in = static_cast<const uint8_t*>(send);
  auto p =
      std::make_unique<ReduceScatterPending>(context, in + offset[me] * elementSize, recv, mine);
  P2pTransport& transport = p->transport();
  for (int step = 1; step < size && mine != 0; ++step) {
    const int from = (rank - step + size) % size;
    if (Status s = transport.postRecv(from, p->slot(step), mine * elementSize); !s.isOk()) {
      return failedToStart(*p, std::move(s));
    }
  }
  for (int step = 1; step < size; ++step) {
    const int to = (rank + step) % size;
    const auto j = static_cast<size_t>(to);
    if (counts[j] == 0) continue;  // negotiated: rank `to` expects nothing either
    if (Status s = transport.postSend(to, in + offset[j] * elementSize, counts[j] * elementSize);
        !s.isOk()) {
      return failedToStart(*p, std::move(s));
    }
  }
  return p;
}

PendingPtr pointToPointAllreduce(const ScheduleContext& context, const void* send, void* recv,
                                 size_t count) {
  AllreducePending::Layout layout;
  layout.rank = context.rank;
  layout.size = context.size;
  layout.count = count;
  layout.reduction = context.reduction;
  auto p = std::make_unique<AllreducePending>(context, layout, static_cast<const uint8_t*>(send),
                                              static_cast<uint8_t*>(recv));
  if (Status s = p->start(); !s.isOk()) return failedToStart(*p, std::move(s));
  return p;
}

}  // namespace hcoll::backends::mpi
