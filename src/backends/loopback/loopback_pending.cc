#include "backends/loopback/loopback_pending.h"

#include <algorithm>
#include <string>

#include "common/adasum.h"
#include "common/copy_bytes.h"
#include "common/reduce.h"

namespace hcoll::backends::loopback {
namespace {

// The protocol every loopback collective follows; subclasses say what to read and when.
class RoundPending : public Pending {
 public:
  // publishesBuffers: whether peers read this rank's own buffers (data plane) rather than copies
  // (control plane); then this rank finishes only once every rank has read.
  RoundPending(const Seat& seat, const RoundParams& params, Contribution mine,
               bool publishesBuffers = true)
      : publishesBuffers_(publishesBuffers),
        group_(seat.group),
        round_(seat.group->arrive(seat.plane, seat.seq, seat.rank, params, std::move(mine))),
        rank_(seat.rank),
        size_(seat.group->size()) {}

  // Destroyed unfinished (abandoned, or torn down in a test): peers must never read this rank's
  // buffers after it returns, since the caller may free them. Unless every rank has read them
  // already, the round is marked broken, so that nobody starts, and readers in progress (a
  // bounded memcpy or reduction, never a wait on anyone) are waited for.
  ~RoundPending() override {
    if (done_ || !publishesBuffers_) return;
    std::unique_lock<std::mutex> lock(group_->mutex());
    if (round_->read == size_) return;
    round_->broken = true;
    group_->changed().wait(lock, [&] { return round_->readers == 0; });
  }

  bool poll(Status* status) final {
    std::unique_lock<std::mutex> lock(group_->mutex());
    if (!round_->failure.isOk()) {  // set before anyone reads, so nobody reads in such a round
      *status = round_->failure;
      done_ = true;
      return true;
    }
    if (!readDone_) {
      if (round_->broken || !canRead(*round_)) return false;
      ++round_->readers;
      lock.unlock();
      read(*round_);
      lock.lock();
      --round_->readers;
      ++round_->read;
      readDone_ = true;
      group_->changed().notify_all();
    }
    // Peers may still read this rank's buffers until all have read.
    if (publishesBuffers_ && round_->read < size_) return false;
    lock.unlock();
    complete(*round_);
    done_ = true;
    *status = Status::ok();
    return true;
  }

 protected:
  // Under the group's mutex: whether this rank's inputs are all there.
  virtual bool canRead(const Round& round) const { return round.arrived == size_; }
  // Outside the mutex, once: reads the peers' contributions.
  virtual void read(Round& round) = 0;
  // Once nobody reads this rank's buffers any more: this rank's last step.
  virtual void complete(Round& /*round*/) {}

  std::vector<const void*> inputs(const Round& round) const {
    std::vector<const void*> in;
    in.reserve(round.slots.size());
    for (const Contribution& c : round.slots) in.push_back(c.in);
    return in;
  }

  const bool publishesBuffers_;
  std::shared_ptr<Group> group_;
  std::shared_ptr<Round> round_;
  const int rank_;
  const int size_;

 private:
  bool readDone_ = false;
  bool done_ = false;
};

// Rows [lo, hi) of n split into `size` near-equal shares: rank r's share of a reduction.
void share(size_t n, int size, int r, size_t* lo, size_t* hi) {
  const size_t base = n / static_cast<size_t>(size);
  const size_t extra = n % static_cast<size_t>(size);
  const auto rr = static_cast<size_t>(r);
  *lo = rr * base + std::min(rr, extra);
  *hi = *lo + base + (rr < extra ? 1 : 0);
}

RoundParams paramsOf(OpTag tag, size_t count = 0) {
  RoundParams p;
  p.tag = tag;
  p.count = count;
  return p;
}

// The readiness AND, with the fold when `fold` is given: the same round whether or not a rank
// folds (RoundParams carry no fold), like the MPI backend's control block (mpi_shm_control.h).
class BitsAnd final : public RoundPending {
 public:
  BitsAnd(const Seat& seat, uint64_t* words, size_t count, Contribution mine,
          const Channel::FoldedCollective* fold)
      : RoundPending(seat, paramsOf(OpTag::kBitsAnd, count), std::move(mine), false),
        words_(words),
        count_(count) {
    if (fold != nullptr) {
      fold_ = *fold;
      *fold_.agreed = false;
    }
  }

 private:
  void read(Round& round) override {
    for (size_t r = 0; r < round.slots.size(); ++r) {
      if (static_cast<int>(r) == rank_) continue;
      const std::vector<uint64_t>& theirs = round.slots[r].words;
      for (size_t i = 0; i < count_; ++i) words_[i] &= theirs[i];
    }
    if (fold_.agreed == nullptr) return;
    const Contribution& mine = round.slots[static_cast<size_t>(rank_)];
    for (const Contribution& theirs : round.slots) {
      if (theirs.foldTag != mine.foldTag || theirs.foldCount != mine.foldCount ||
          theirs.foldKind != mine.foldKind) {
        return;  // not every rank folded this operation alike: nobody uses a result
      }
    }
    // In rank order on every rank: the same bits everywhere.
    using Combine = Channel::FoldedCollective::Combine;
    const size_t bytes = fold_.count * dataTypeSize(fold_.dtype);
    auto* recv = static_cast<uint8_t*>(fold_.recv);
    if (bytes != 0) {
      switch (fold_.combine) {
        case Combine::kReduce:
          copyBytes(recv, round.slots[0].bytes.data(), bytes);
          for (size_t r = 1; r < round.slots.size(); ++r) {
            reduceInto(fold_.dtype, fold_.op, round.slots[r].bytes.data(), recv, fold_.count);
          }
          break;
        case Combine::kGather:
          for (size_t r = 0; r < round.slots.size(); ++r) {
            copyBytes(recv + r * bytes, round.slots[r].bytes.data(), bytes);
          }
          break;
        case Combine::kBroadcast:
          copyBytes(recv, round.slots[static_cast<size_t>(fold_.root)].bytes.data(), bytes);
          break;
      }
    }
    *fold_.agreed = true;
  }
  uint64_t* words_;
  size_t count_;
  Channel::FoldedCollective fold_;  // agreed == nullptr: this rank folds nothing
};

class GatherBytes final : public RoundPending {
 public:
  GatherBytes(const Seat& seat, Contribution mine, std::vector<std::vector<uint8_t>>* atRoot)
      : RoundPending(seat, paramsOf(OpTag::kGatherBytes), std::move(mine), false),
        atRoot_(atRoot) {}

 private:
  // The root waits for everyone; the others' bytes are handed over: they are done at once.
  bool canRead(const Round& round) const override { return rank_ != 0 || round.arrived == size_; }
  void read(Round& round) override {
    if (rank_ != 0) return;
    atRoot_->assign(round.slots.size(), {});
    for (size_t r = 0; r < round.slots.size(); ++r) (*atRoot_)[r] = std::move(round.slots[r].bytes);
  }
  std::vector<std::vector<uint8_t>>* atRoot_;
};

class BroadcastBytes final : public RoundPending {
 public:
  BroadcastBytes(const Seat& seat, Contribution mine, std::vector<uint8_t>* buf)
      : RoundPending(seat, paramsOf(OpTag::kBroadcastBytes), std::move(mine), false), buf_(buf) {}

 private:
  bool canRead(const Round& round) const override { return rank_ == 0 || round.present[0]; }
  void read(Round& round) override {
    if (rank_ != 0) *buf_ = round.slots[0].bytes;  // read-only: ranks copy it concurrently
  }
  std::vector<uint8_t>* buf_;
};

// Each rank reduces its share of the vector into the round's scratch; once all have, each
// copies the whole result into its own buffer. Nobody writes a buffer a peer reads (in place
// included), and every element is reduced by one rank in one pass (float16 rounds once).
class Allreduce final : public RoundPending {
 public:
  Allreduce(const Seat& seat, const RoundParams& params, Contribution mine, void* recv)
      : RoundPending(seat, params, std::move(mine)), recv_(recv) {}

 private:
  void read(Round& round) override {
    if (round.params.op == ReduceOp::kAdasum) {  // not element-wise: rank 0 runs the whole tree
      if (rank_ == 0) {
        adasum::reduceAll(round.params.dtype, inputs(round), round.params.count,
                          round.slots[0].recvBytes, round.scratch.bytes.get());
      }
      return;
    }
    const size_t es = dataTypeSize(round.params.dtype);
    size_t lo = 0, hi = 0;
    share(round.params.count, size_, rank_, &lo, &hi);
    reduceInputs(round.params.dtype, round.params.op, inputs(round), lo, hi - lo,
                 round.scratch.bytes.get() + lo * es);
  }
  void complete(Round& round) override {
    if (round.scratchBytes != 0) copyBytes(recv_, round.scratch.bytes.get(), round.scratchBytes);
  }
  void* recv_;
};

class Allgatherv final : public RoundPending {
 public:
  Allgatherv(const Seat& seat, Contribution mine, void* recv, bool inPlace)
      : RoundPending(seat, paramsOf(OpTag::kAllgatherv), std::move(mine)),
        recv_(static_cast<uint8_t*>(recv)),
        inPlace_(inPlace) {}

 private:
  // Peers read only this rank's own block, and this rank writes only the others' blocks.
  void read(Round& round) override {
    const std::vector<size_t>& blocks = round.slots[static_cast<size_t>(rank_)].recvBytes;
    size_t offset = 0;
    for (size_t p = 0; p < blocks.size(); ++p) {
      const bool own = static_cast<int>(p) == rank_;
      if (blocks[p] > 0 && !(own && inPlace_)) {
        copyBytes(recv_ + offset, round.slots[p].in, blocks[p]);
      }
      offset += blocks[p];
    }
  }
  uint8_t* recv_;
  bool inPlace_;
};

class Broadcast final : public RoundPending {
 public:
  Broadcast(const Seat& seat, const RoundParams& params, Contribution mine, void* buf)
      : RoundPending(seat, params, std::move(mine)), buf_(buf) {}

 private:
  void read(Round& round) override {
    const int root = round.params.root;
    if (rank_ != root && round.params.count > 0) {
      copyBytes(buf_, round.slots[static_cast<size_t>(root)].in, round.params.count);
    }
  }
  void* buf_;
};

class Alltoallv final : public RoundPending {
 public:
  Alltoallv(const Seat& seat, Contribution mine, void* recv)
      : RoundPending(seat, paramsOf(OpTag::kAlltoallv), std::move(mine)),
        recv_(static_cast<uint8_t*>(recv)) {}

 private:
  void read(Round& round) override {
    const auto me = static_cast<size_t>(rank_);
    const std::vector<size_t>& from = round.slots[me].recvBytes;
    size_t offset = 0;
    for (size_t p = 0; p < from.size(); ++p) {
      const Contribution& peer = round.slots[p];
      size_t at = 0;  // where peer's part for this rank starts in its send buffer
      for (size_t q = 0; q < me; ++q) at += peer.sendBytes[q];
      if (from[p] > 0)
        copyBytes(recv_ + offset, static_cast<const uint8_t*>(peer.in) + at, from[p]);
      offset += from[p];
    }
  }
  uint8_t* recv_;
};

// Each rank reduces its own block of every rank's send buffer. Straight into recv unless recv
// lies inside this rank's send buffer (which peers read): then into a private temporary that is
// copied once everyone has read.
class ReduceScatter final : public RoundPending {
 public:
  ReduceScatter(const Seat& seat, const RoundParams& params, Contribution mine, const void* send,
                void* recv)
      : RoundPending(seat, params, std::move(mine)), send_(send), recv_(recv) {}

 private:
  void read(Round& round) override {
    const std::vector<size_t>& counts = round.slots[static_cast<size_t>(rank_)].recvBytes;
    const size_t es = dataTypeSize(round.params.dtype);
    size_t begin = 0, total = 0;
    for (size_t r = 0; r < counts.size(); ++r) {
      if (static_cast<int>(r) < rank_) begin += counts[r];
      total += counts[r];
    }
    mine_ = counts[static_cast<size_t>(rank_)] * es;
    if (mine_ == 0) return;
    const auto* s = static_cast<const uint8_t*>(send_);
    const auto* d = static_cast<const uint8_t*>(recv_);
    void* into = recv_;
    if (d < s + total * es && s < d + mine_) {
      temp_.resize(mine_);
      into = temp_.data();
    }
    reduceInputs(round.params.dtype, round.params.op, inputs(round), begin, mine_ / es, into);
  }
  void complete(Round&) override {
    if (!temp_.empty()) copyBytes(recv_, temp_.data(), mine_);
  }
  const void* send_;
  void* recv_;
  size_t mine_ = 0;
  std::vector<uint8_t> temp_;
};

class Barrier final : public RoundPending {
 public:
  explicit Barrier(const Seat& seat) : RoundPending(seat, paramsOf(OpTag::kBarrier), {}) {}

 private:
  void read(Round&) override {}
};

}  // namespace

PendingPtr startBitsAnd(const Seat& seat, uint64_t* words, size_t count,
                        const Channel::FoldedCollective* fold) {
  Contribution mine;
  mine.words.assign(words, words + count);
  if (fold != nullptr && fold->tag != 0) {
    mine.foldTag = fold->tag;
    mine.foldCount = fold->count;
    mine.foldKind = fold->kindWord();
    const auto* in = static_cast<const uint8_t*>(fold->send);
    mine.bytes.assign(in, in + fold->count * dataTypeSize(fold->dtype));
  } else {
    fold = nullptr;
  }
  return std::make_unique<BitsAnd>(seat, words, count, std::move(mine), fold);
}

PendingPtr startGatherBytes(const Seat& seat, std::vector<uint8_t> mine,
                            std::vector<std::vector<uint8_t>>* atRoot) {
  Contribution c;
  c.bytes = std::move(mine);
  return std::make_unique<GatherBytes>(seat, std::move(c), atRoot);
}

PendingPtr startBroadcastBytes(const Seat& seat, std::vector<uint8_t>* buf) {
  Contribution c;
  if (seat.rank == 0) c.bytes = *buf;
  return std::make_unique<BroadcastBytes>(seat, std::move(c), buf);
}

PendingPtr startAllreduce(const Seat& seat, const void* send, void* recv, size_t count,
                          DataType dtype, ReduceOp op) {
  RoundParams p = paramsOf(OpTag::kAllreduce, count);
  p.dtype = dtype;
  // AVERAGE is a SUM at this level (the runtime scales by 1/N); both names match each other.
  p.op = op == ReduceOp::kAverage ? ReduceOp::kSum : op;
  Contribution c;
  c.in = send != nullptr ? send : recv;
  return std::make_unique<Allreduce>(seat, p, std::move(c), recv);
}

PendingPtr startAdasum(const Seat& seat, void* buf, size_t count, DataType dtype,
                       const std::vector<size_t>& tensorCounts) {
  RoundParams p = paramsOf(OpTag::kAllreduce, count);
  p.dtype = dtype;
  p.op = ReduceOp::kAdasum;
  Contribution c;
  c.in = buf;
  c.recvBytes = tensorCounts;  // elements per tensor (negotiated: the same on every rank)
  return std::make_unique<Allreduce>(seat, p, std::move(c), buf);
}

PendingPtr startAllgatherv(const Seat& seat, const void* send, size_t sendBytes, void* recv,
                           const std::vector<size_t>& recvBytes) {
  Contribution c;
  c.sendBytes = {sendBytes};
  c.recvBytes = recvBytes;
  if (send != nullptr) {
    c.in = send;
  } else {  // in place: this rank's block already sits at its offset in recv
    size_t offset = 0;
    for (int r = 0; r < seat.rank && static_cast<size_t>(r) < recvBytes.size(); ++r) {
      offset += recvBytes[static_cast<size_t>(r)];
    }
    c.in = static_cast<const uint8_t*>(recv) + offset;
  }
  return std::make_unique<Allgatherv>(seat, std::move(c), recv, send == nullptr);
}

PendingPtr startBroadcast(const Seat& seat, void* buf, size_t bytes, int root) {
  // A root out of range still joins the round (so that the ranks stay in step); it fails there.
  RoundParams p = paramsOf(OpTag::kBroadcast, bytes);
  p.root = root;
  Contribution c;
  c.in = buf;
  return std::make_unique<Broadcast>(seat, p, std::move(c), buf);
}

PendingPtr startAlltoallv(const Seat& seat, const void* send, const std::vector<size_t>& sendBytes,
                          void* recv, const std::vector<size_t>& recvBytes) {
  Contribution c;
  c.in = send;
  c.sendBytes = sendBytes;
  c.recvBytes = recvBytes;
  return std::make_unique<Alltoallv>(seat, std::move(c), recv);
}

PendingPtr startReduceScatter(const Seat& seat, const void* send, void* recv,
                              const std::vector<size_t>& recvCounts, DataType dtype, ReduceOp op) {
  RoundParams p = paramsOf(OpTag::kReduceScatter);
  p.dtype = dtype;
  p.op = op == ReduceOp::kAverage ? ReduceOp::kSum : op;
  Contribution c;
  c.in = send;
  c.recvBytes = recvCounts;
  return std::make_unique<ReduceScatter>(seat, p, std::move(c), send, recv);
}

PendingPtr startBarrier(const Seat& seat) {
  return std::make_unique<Barrier>(seat);
}

}  // namespace hcoll::backends::loopback
