// Adasum as a point-to-point schedule: the tree of common/adasum.h, run as a sequence of stages
// over the transport (mpi_transport.h: MPI messages or shared-memory lanes). Every stage posts its
// receives and sends, waits (non-blocking, through poll) until all completed, then computes
// locally and posts the next; a peer that died leaves the stage unfinished, and the executor's
// bounded wait gives the operation up (as for every other data-plane schedule). Stages with one
// peer pair their transfers by the transport's order: both sides post the same steps in the same
// order.

#include <memory>
#include <utility>
#include <vector>

#include "backends/mpi/mpi_channel.h"
#include "backends/mpi/mpi_p2p.h"
#include "backends/mpi/mpi_schedule.h"
#include "common/adasum.h"

namespace hcoll::backends::mpi {
namespace {

using adasum::Dots;
using adasum::Range;

class AdasumPending final : public p2p::StagedSchedule {
 public:
  AdasumPending(const ScheduleContext& context, void* buf, size_t count, DataType dtype,
                const std::vector<size_t>& tensorCounts)
      : StagedSchedule(context, 2),
        rank_(context.rank),
        tree_(context.size),
        buf_(static_cast<uint8_t*>(buf)),
        count_(count),
        dtype_(dtype),
        elementSize_(dataTypeSize(dtype)),
        offsets_(adasum::tensorOffsets(tensorCounts)),
        tensors_(tensorCounts.size()),
        pool_(context.pool) {
    planSteps();
    const int partner = tree_.foldPartner(rank_);
    size_t scratchElements = 0;
    if (rank_ < tree_.power) {
      scratchElements = partner >= 0 ? count_ : count_ - count_ / 2;
    }
    if (scratchElements > 0 && tree_.size > 1) {
      scratch_ = pool_->take(scratchElements * elementSize_);
    }
    dots_.reset(new Dots[2 * tensors_]);  // this rank's sums, then the partner's
  }
  ~AdasumPending() override {
    // Abandoned (peers lost): MPI may still write into these, as into any abandoned buffers.
    if (!done_) {
      (void)scratch_.bytes.release();
      (void)dots_.release();
    }
  }

  // Posts the first stage.
  Status start() { return steps_.empty() ? Status::ok() : postStep(steps_[0]); }

 private:
  enum class Kind {
    kFoldSend,
    kFoldReceive,
    kHalve,
    kSumDots,
    kGather,
    kUnfoldSend,
    kUnfoldReceive
  };
  struct Step {
    Kind kind;
    int level = 0;  // halving level k (pairs rank with rank ^ 2^k)
    int bit = 0;    // kSumDots: the recursive-doubling step s (partner rank ^ 2^s)
  };

  void planSteps() {
    if (tree_.size == 1) return;
    if (rank_ >= tree_.power) {
      steps_ = {{Kind::kFoldSend}, {Kind::kUnfoldReceive}};
      return;
    }
    const bool folds = tree_.foldPartner(rank_) >= 0;
    if (folds) steps_.push_back({Kind::kFoldReceive});
    for (int k = 0; k < tree_.levels; ++k) {
      steps_.push_back({Kind::kHalve, k});
      for (int s = 0; s <= k; ++s) steps_.push_back({Kind::kSumDots, k, s});
    }
    for (int k = tree_.levels - 1; k >= 0; --k) steps_.push_back({Kind::kGather, k});
    if (folds) steps_.push_back({Kind::kUnfoldSend});
  }

  uint8_t* at(size_t element) const { return buf_ + element * elementSize_; }
  size_t bytes(size_t elements) const { return elements * elementSize_; }
  Dots* mine() { return dots_.get(); }
  Dots* theirs() { return dots_.get() + tensors_; }
  bool isLeft(int level) const { return ((rank_ >> level) & 1) == 0; }

  Status postStep(const Step& step) {
    P2pTransport& t = transport();
    const int partner = tree_.foldPartner(rank_);
    const size_t whole = bytes(count_);
    switch (step.kind) {
      case Kind::kFoldSend:
        return t.postSend(partner, buf_, whole);
      case Kind::kFoldReceive:
        return t.postRecv(partner, scratch_.bytes.get(), whole);
      case Kind::kHalve: {
        // Keep one half of the range both partners hold; send the other, receive theirs of ours.
        const int peer = rank_ ^ (1 << step.level);
        const Range before = adasum::keptRange(count_, rank_, step.level);
        const Range kept = adasum::keptRange(count_, rank_, step.level + 1);
        const Range given = isLeft(step.level) ? Range{kept.end(), before.count - kept.count}
                                               : Range{before.begin, before.count - kept.count};
        HCOLL_RETURN_IF_ERROR(t.postRecv(peer, scratch_.bytes.get(), bytes(kept.count)));
        return t.postSend(peer, at(given.begin), bytes(given.count));
      }
      case Kind::kSumDots: {
        const int peer = rank_ ^ (1 << step.bit);
        const size_t dotBytes = tensors_ * sizeof(Dots);
        HCOLL_RETURN_IF_ERROR(t.postRecv(peer, theirs(), dotBytes));
        return t.postSend(peer, mine(), dotBytes);
      }
      case Kind::kGather: {
        const int peer = rank_ ^ (1 << step.level);
        const Range own = adasum::keptRange(count_, rank_, step.level + 1);
        const Range other = adasum::keptRange(count_, peer, step.level + 1);
        HCOLL_RETURN_IF_ERROR(t.postRecv(peer, at(other.begin), bytes(other.count)));
        return t.postSend(peer, at(own.begin), bytes(own.count));
      }
      case Kind::kUnfoldSend:
        return t.postSend(partner, buf_, whole);
      case Kind::kUnfoldReceive:
        return t.postRecv(partner, buf_, whole);
    }
    return Status::ok();
  }

  // The local computation once a step's messages completed.
  void finishStep(const Step& step) {
    switch (step.kind) {
      case Kind::kFoldReceive: {  // own vector is the left operand, the folded rank's the right
        const Range whole{0, count_};
        const uint8_t* theirVector = scratch_.bytes.get();
        adasum::rangeDots(dtype_, buf_, theirVector, whole, offsets_, mine());
        adasum::rangeCombine(dtype_, buf_, buf_, theirVector, whole, offsets_, mine());
        return;
      }
      case Kind::kHalve: {
        const Range kept = adasum::keptRange(count_, rank_, step.level + 1);
        adasum::rangeDots(dtype_, left(step.level, kept), right(step.level, kept), kept, offsets_,
                          mine());
        return;
      }
      case Kind::kSumDots: {
        const bool lower = ((rank_ >> step.bit) & 1) == 0;
        for (size_t t = 0; t < tensors_; ++t) {
          mine()[t] =
              lower ? adasum::add(mine()[t], theirs()[t]) : adasum::add(theirs()[t], mine()[t]);
        }
        if (step.bit == step.level) {  // the sums over the whole vector: combine the kept range
          const Range kept = adasum::keptRange(count_, rank_, step.level + 1);
          adasum::rangeCombine(dtype_, at(kept.begin), left(step.level, kept),
                               right(step.level, kept), kept, offsets_, mine());
        }
        return;
      }
      default:
        return;
    }
  }

  // The left (lower ranks') and right operands over `kept` at a level: this rank's own values
  // and its partner's received into scratch.
  const uint8_t* left(int level, const Range& kept) const {
    return isLeft(level) ? at(kept.begin) : scratch_.bytes.get();
  }
  const uint8_t* right(int level, const Range& kept) const {
    return isLeft(level) ? scratch_.bytes.get() : at(kept.begin);
  }

  bool advance(Status* status) override {
    for (;;) {
      if (next_ < steps_.size()) finishStep(steps_[next_]);
      ++next_;
      if (next_ >= steps_.size()) break;
      if (Status posted = postStep(steps_[next_]); !posted.isOk()) {
        transport().abandon();
        *status = std::move(posted);
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

  const int rank_;
  const adasum::Tree tree_;
  uint8_t* buf_;
  const size_t count_;
  const DataType dtype_;
  const size_t elementSize_;
  const std::vector<size_t> offsets_;
  const size_t tensors_;
  std::shared_ptr<ScratchPool> pool_;
  ScratchPool::Buffer scratch_;
  std::unique_ptr<Dots[]> dots_;
  std::vector<Step> steps_;
  size_t next_ = 0;  // the step whose messages are in flight
  bool done_ = false;
};

}  // namespace

PendingPtr pointToPointAdasum(const ScheduleContext& context, void* buf, size_t count,
                              DataType dtype, const std::vector<size_t>& tensorCounts) {
  if (!adasum::supports(dtype)) {
    return finished(
        Status(Code::kInvalidArgument,
               std::string("Adasum needs a floating dtype, not ") + dataTypeName(dtype)));
  }
  auto p = std::make_unique<AdasumPending>(context, buf, count, dtype, tensorCounts);
  if (Status s = p->start(); !s.isOk()) return p2p::failedToStart(*p, std::move(s));
  return p;
}

PendingPtr MpiChannel::adasum(void* buf, size_t count, DataType dtype,
                              const std::vector<size_t>& tensorCounts) {
  return pointToPointAdasum(scheduleContext(), buf, count, dtype, tensorCounts);
}

}  // namespace hcoll::backends::mpi
