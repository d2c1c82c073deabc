#include "backends/mpi/mpi_shm_control.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backends/mpi/mpi_shm_segment.h"
#include "common/copy_bytes.h"
#include "common/thread_cache.h"
#include "common/logging.h"

namespace hcoll::backends::mpi {
namespace {

using shm_control_detail::carriedWatermark;
using shm_control_detail::kSeqMask;
using shm_control_detail::publishedWord;

// A slot of one rank: its `acked` counter on a cache line of its own, then its `published`
// counter with the payload right behind it. A peer polls `published` and then reads the payload:
// in the same line, the read that sees the counter brings the start of the payload with it (a
// readiness AND with its folded 8 bytes fits whole). On separate lines they were two transfers,
// and an 8-byte allreduce took ~10 % longer (bench (d), 2 ranks, same runs).
constexpr size_t kLine = 64;
constexpr size_t kPublishedAt = kLine;
constexpr size_t kSlotHeader = kPublishedAt + sizeof(uint64_t);

// Slots start on a line of their own.
size_t slotStride(size_t slotBytes) {
  return (kSlotHeader + slotBytes + kLine - 1) / kLine * kLine;
}
size_t slotsBytes(int size, size_t slotBytes) {
  return static_cast<size_t>(size) * ShmControl::kSlots * slotStride(slotBytes);
}
size_t planeBytes(int size, size_t slotBytes) {
  return slotsBytes(size, slotBytes) + static_cast<size_t>(size) * kLine;  // + the watermarks
}

uint64_t loadAcquire(const uint64_t* at) {
  return __atomic_load_n(at, __ATOMIC_ACQUIRE);
}
void storeRelease(uint64_t* at, uint64_t v) {
  __atomic_store_n(at, v, __ATOMIC_RELEASE);
}

bool settingOn(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr || *v == '\0' || std::strcmp(v, "1") == 0;
}

// One operation through a plane's slot (see the top of mpi_shm_control.h): publish this rank's
// contribution, wait for the ranks it needs, compute the result from their payloads, ack.
class SlotPending : public Pending {
 public:
  SlotPending(const ShmControl& block, ShmControl::Plane* plane)
      : rank_(block.rank()),
        size_(block.size()),
        plane_(plane),
        seq_(++plane->started),
        slot0_(plane->base + seq_ % ShmControl::kSlots * plane->slotStride),
        rankStep_(ShmControl::kSlots * plane->slotStride) {}

  // Finished, it answers its result again (start() hands out an operation that finished at
  // once instead of allocating a finished Pending for it).
  bool poll(Status* status) override {
    if (done_) {
      *status = result_;
      return true;
    }
    if (!published_ && !(published_ = tryPublish())) return false;
    for (; waitingFor_ < size_; ++waitingFor_) {
      if (!needs(waitingFor_)) continue;
      const uint64_t word = loadAcquire(publishedLine(waitingFor_));
      if ((word & kSeqMask) < seq_) return false;
      uint64_t& known = plane_->knownThrough[static_cast<size_t>(waitingFor_)];
      known = std::max(known, carriedWatermark(word));
    }
    result_ = consume();
    storeRelease(ackedLine(rank_), seq_);
    noteAcked();
    done_ = true;
    *status = result_;
    return true;
  }

 protected:
  // Copies this rank's contribution into its payload (at most the plane's slot bytes).
  virtual void fill(char* payload) = 0;
  // Whether this rank reads rank r's payload (default: every rank's).
  virtual bool needs(int r) const { return r != rank_; }
  // Computes this rank's result from the payloads of the ranks it needs.
  virtual Status consume() = 0;

  const char* payload(int r) const { return slot(r) + kSlotHeader; }
  int rank_;
  int size_;

 private:
  // Rank r's slot of this operation: ranks' slots are kSlots strides apart.
  char* slot(int r) const { return slot0_ + static_cast<size_t>(r) * rankStep_; }
  uint64_t* publishedLine(int r) const {
    return reinterpret_cast<uint64_t*>(slot(r) + kPublishedAt);
  }
  uint64_t* ackedLine(int r) const { return reinterpret_cast<uint64_t*>(slot(r)); }
  uint64_t* watermarkLine(int r) const {
    return reinterpret_cast<uint64_t*>(plane_->watermarks + static_cast<size_t>(r) * kLine);
  }

  // Whether every rank acked the operation that used this slot kSlots ago. Reading a line a peer
  // just wrote is a cache-line transfer, on this VM as long as a small operation's own work: the
  // rank's ack watermark says "every operation up to k". What this rank knows of it comes first
  // from the published words it waited on (publishedWord: in a steady stream that is always far
  // enough, and no line is read here), then from the watermark's own line, and only when that is
  // not far enough is the slot's own ack read (a rank may ack operations out of order: the
  // watermark then lags).
  bool slotFreeAt(int r) {
    uint64_t& known = plane_->knownThrough[static_cast<size_t>(r)];
    if (known + ShmControl::kSlots >= seq_) return true;
    known = std::max(known, loadAcquire(watermarkLine(r)));
    if (known + ShmControl::kSlots >= seq_) return true;
    return loadAcquire(ackedLine(r)) + ShmControl::kSlots >= seq_;
  }
  // After this rank's ack of seq_: moves its watermark past every operation now acked in a row.
  // (Acks more than 64 beyond the watermark are not remembered: it then stops short, which only
  // costs peers the slot's own look.)
  void noteAcked() {
    ShmControl::Plane& p = *plane_;
    if (seq_ <= p.ackedThrough) return;
    if (seq_ > p.ackedThrough + 1) {
      const uint64_t bit = seq_ - p.ackedThrough - 2;
      if (bit < 64) p.ackedAhead |= uint64_t{1} << bit;
      return;
    }
    uint64_t through = seq_;
    uint64_t ahead = p.ackedAhead;  // bit 0: operation through + 1
    while ((ahead & 1) != 0) {
      ahead >>= 1;
      ++through;
    }
    p.ackedAhead = ahead >> 1;
    p.ackedThrough = through;
    storeRelease(watermarkLine(rank_), through);
  }

  // The slot is free once every rank acked the operation that used it kSlots ago (its payload
  // may still be read until then).
  bool tryPublish() {
    for (int r = 0; r < size_; ++r) {
      if (!slotFreeAt(r)) return false;
    }
    fill(slot(rank_) + kSlotHeader);
    storeRelease(publishedLine(rank_), publishedWord(seq_, plane_->ackedThrough));
    return true;
  }

  // Into the block, which outlives every operation still polled (top of mpi_shm_control.h).
  ShmControl::Plane* plane_;
  uint64_t seq_;
  char* slot0_;      // rank 0's slot of this operation
  size_t rankStep_;  // from one rank's slot to the next's
  bool published_ = false;
  int waitingFor_ = 0;
  bool done_ = false;
  Status result_;
};

// Creates an operation and tries to publish at once (the peers may be waiting for it already);
// one that finished here answers its result to the caller's first poll.
template <class Op, class... Args>
PendingPtr start(Args&&... args) {
  auto op = std::make_unique<Op>(std::forward<Args>(args)...);
  Status ignored;
  (void)op->poll(&ignored);
  return op;
}

// The readiness AND, with the small-message fold (backend.h's FoldedCollective). Every rank's
// payload: a fold header (zero when the rank folds nothing), its leading words, its folded data,
// the rest of its words. Ranks that fold and ranks that do not run this same operation, so the
// plane's sequence stays in step whatever each rank folds.
//
// The words a rank folding alike with every other has in common (FoldedCollective::alikeFrom:
// the runtime's cache slot words, as many as the cache has slots) go after data that then fits
// the published line, and when every header agrees nobody reads them: so the published counter,
// the header, the leading words and up to 24 bytes of data share one cache line whatever the
// cache's size (after the bench's sweep, ~150 slots pushed an 8-byte allreduce's data into a
// second line).
//
// The header is one word: the tag (bits 0-23), the element count (24-39), then kindWord()'s dtype
// (40-47), op (48-52), combine (53-55) and root (56-58), then the leading word count (59-63;
// kAllWordsLead: every word before the data). A fold whose fields do not fit (never with
// kMaxFoldBytes, the cache's largest capacity and kMaxRanks) is not folded: this rank takes part
// without it, and the fold stands nowhere.
constexpr size_t kFoldHeaderBytes = sizeof(uint64_t);
constexpr uint64_t kAllWordsLead = 31;

uint64_t foldHeader(const Channel::FoldedCollective& fold, size_t words) {
  const uint64_t kind = fold.kindWord();
  const uint64_t dtype = kind & 0xff, op = (kind >> 8) & 0xff, combine = (kind >> 16) & 0xff;
  const uint64_t root = kind >> 32;
  if (fold.tag == 0 || fold.tag >= (uint64_t{1} << 24) || fold.count >= (uint64_t{1} << 16) ||
      op >= 32 || combine >= 8 || root >= 8) {
    return 0;
  }
  // Only data that then fits the published line whole goes before the alike words: a 32- or
  // 128-byte allreduce laid out so (its data from the published line into the next, the slot
  // words behind it) was 10-20 % slower per call than with its data behind every word (lathq,
  // 200 cached names), though it read fewer lines. Data across the same two lines with no slot
  // words behind it (no other names) is not slower: why is not known.
  const size_t bytes = fold.count * dataTypeSize(fold.dtype);
  const size_t before = (kSlotHeader - kPublishedAt) + kFoldHeaderBytes;  // counter, header
  const bool early = fold.alikeFrom < words && fold.alikeFrom < kAllWordsLead &&
                     before + fold.alikeFrom * sizeof(uint64_t) + bytes <= kLine;
  const uint64_t lead = early ? static_cast<uint64_t>(fold.alikeFrom) : kAllWordsLead;
  return fold.tag | fold.count << 24 | dtype << 40 | op << 48 | combine << 53 | root << 56 |
         lead << 59;
}

// What a rank's header says of its payload: the words before its data, and the data's bytes.
size_t leadWords(uint64_t header, size_t words) {
  const uint64_t lead = header >> 59;
  return header == 0 || lead == kAllWordsLead ? words : static_cast<size_t>(lead);
}
size_t foldedBytes(uint64_t header) {
  const uint64_t dtype = (header >> 40) & 0xff;
  if (header == 0 || dtype >= static_cast<uint64_t>(kNumDataTypes)) return 0;
  return static_cast<size_t>((header >> 24) & 0xffff) * dataTypeSize(static_cast<DataType>(dtype));
}

// words[i] &= the i-th of the `count` words at `from` (read unaligned: a rank's words after its
// data start wherever its data ends).
void andWords(const char* from, uint64_t* words, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    uint64_t theirs;
    std::memcpy(&theirs, from + i * sizeof(uint64_t), sizeof(theirs));
    words[i] &= theirs;
  }
}

// Every negotiation round allocates one AndBitsOp and drops it a moment later, often on the
// same thread: a few freed blocks are kept per thread for the next (malloc and free were ~2 % of
// a small operation's own work).
void disposeBlock(void* block) { ::operator delete(block); }
struct AndBitsBlocksTag {};
using AndBitsBlocks = ThreadCache<void, 4, AndBitsBlocksTag, disposeBlock>;

class AndBitsOp final : public SlotPending {
 public:
  static void* operator new(size_t bytes) {
    if (void* block = AndBitsBlocks::take()) return block;  // (every block is of this size)
    return ::operator new(bytes);
  }
  static void operator delete(void* block) {
    if (!AndBitsBlocks::keep(block)) ::operator delete(block);
  }
  AndBitsOp(const ShmControl& b, ShmControl::Plane* p, uint64_t* words, size_t count,
            const Channel::FoldedCollective* fold)
      : SlotPending(b, p), words_(words), count_(count) {
    if (fold != nullptr) {
      fold_ = *fold;
      elementSize_ = dataTypeSize(fold->dtype);
      if (fold->combine == Channel::FoldedCollective::Combine::kReduce) {
        reduction_ = reductionFor(fold->dtype, fold->op);
      }
      header_ = foldHeader(*fold, count);
      *fold_.agreed = false;
    }
  }

 private:
  void fill(char* payload) override {
    std::memcpy(payload, &header_, sizeof(header_));
    const size_t lead = leadWords(header_, count_);
    char* at = payload + kFoldHeaderBytes;
    copyBytes(at, words_, lead * sizeof(uint64_t));
    at += lead * sizeof(uint64_t);
    const size_t bytes = foldedBytes(header_);  // fold_.count elements (0: no fold)
    copyBytes(at, fold_.send, bytes);
    copyBytes(at + bytes, words_ + lead, (count_ - lead) * sizeof(uint64_t));
  }
  bool needs(int) const override { return true; }  // its own payload too (in rank order)
  Status consume() override {
    // Every rank folded the same operation alike, or the result is not used anywhere: each
    // rank checks every rank's header, so all reach the same verdict.
    bool alike = header_ != 0;
    for (int r = 0; r < size_ && alike; ++r) alike = headerOf(r) == header_;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      const uint64_t header = headerOf(r);
      const size_t lead = leadWords(header, count_);
      const char* words = payload(r) + kFoldHeaderBytes;
      andWords(words, words_, lead);
      // Alike, the rest are this rank's own (FoldedCollective::alikeFrom).
      if (!alike) {
        andWords(words + lead * sizeof(uint64_t) + foldedBytes(header), words_ + lead,
                 count_ - lead);
      }
    }
    if (!alike) return Status::ok();
    using Combine = Channel::FoldedCollective::Combine;
    const size_t bytes = fold_.count * elementSize_;
    auto* recv = static_cast<char*>(fold_.recv);
    switch (fold_.combine) {
      case Combine::kReduce:
        copyBytes(recv, data(0), bytes);
        for (int r = 1; r < size_; ++r) {
          reduceLocal(reduction_, data(r), recv, fold_.count);
        }
        break;
      case Combine::kGather:
        for (int r = 0; r < size_; ++r) {
          copyBytes(recv + static_cast<size_t>(r) * bytes, data(r), bytes);
        }
        break;
      case Combine::kBroadcast:
        copyBytes(recv, data(fold_.root), bytes);
        break;
    }
    *fold_.agreed = true;
    return Status::ok();
  }
  uint64_t headerOf(int r) const {
    uint64_t header;
    std::memcpy(&header, payload(r), sizeof(header));
    return header;
  }
  // Rank r's folded data, read only once every header agreed: laid out as this rank's.
  const char* data(int r) const {
    return payload(r) + kFoldHeaderBytes + leadWords(header_, count_) * sizeof(uint64_t);
  }

  uint64_t* words_;
  size_t count_;
  uint64_t header_ = 0;  // foldHeader(fold_); 0: no fold
  Channel::FoldedCollective fold_;
  size_t elementSize_ = 0;
  Reduction reduction_;  // kReduce only
};

class AllreduceOp final : public SlotPending {
 public:
  AllreduceOp(const ShmControl& b, ShmControl::Plane* p, const void* send, void* recv,
              size_t count, const Reduction& reduction)
      : SlotPending(b, p),
        send_(send != nullptr ? send : recv),
        recv_(recv),
        count_(count),
        reduction_(reduction) {}

 private:
  void fill(char* payload) override {
    copyBytes(payload, send_, count_ * reduction_.elementSize);
  }
  bool needs(int) const override { return true; }  // its own payload too (recv may be send)
  // In rank order on every rank, so that every rank gets the same bits.
  Status consume() override {
    copyBytes(recv_, payload(0), count_ * reduction_.elementSize);
    for (int r = 1; r < size_; ++r) {
      reduceLocal(reduction_, payload(r), recv_, count_);
    }
    return Status::ok();
  }
  const void* send_;
  void* recv_;
  size_t count_;
  Reduction reduction_;
};

class ReduceScatterOp final : public SlotPending {
 public:
  ReduceScatterOp(const ShmControl& b, ShmControl::Plane* p, const void* send, void* recv,
                  size_t totalBytes, size_t offsetBytes, size_t count, const Reduction& reduction)
      : SlotPending(b, p),
        send_(send),
        recv_(recv),
        totalBytes_(totalBytes),
        offsetBytes_(offsetBytes),
        count_(count),
        reduction_(reduction) {}

 private:
  void fill(char* payload) override { copyBytes(payload, send_, totalBytes_); }
  bool needs(int) const override { return true; }
  Status consume() override {
    copyBytes(recv_, payload(0) + offsetBytes_, count_ * reduction_.elementSize);
    for (int r = 1; r < size_; ++r) {
      reduceLocal(reduction_, payload(r) + offsetBytes_, recv_, count_);
    }
    return Status::ok();
  }
  const void* send_;
  void* recv_;
  size_t totalBytes_, offsetBytes_, count_;
  Reduction reduction_;
};

class BroadcastOp final : public SlotPending {
 public:
  BroadcastOp(const ShmControl& b, ShmControl::Plane* p, void* buf, size_t bytes,
              int root)
      : SlotPending(b, p), buf_(buf), bytes_(bytes), root_(root) {}

 private:
  void fill(char* payload) override {
    if (rank_ == root_) copyBytes(payload, buf_, bytes_);
  }
  bool needs(int r) const override { return r == root_ && r != rank_; }
  Status consume() override {
    if (rank_ != root_) copyBytes(buf_, payload(root_), bytes_);
    return Status::ok();
  }
  void* buf_;
  size_t bytes_;
  int root_;
};

class AllgathervOp final : public SlotPending {
 public:
  AllgathervOp(const ShmControl& b, ShmControl::Plane* p, const void* send, void* recv,
               const std::vector<size_t>& recvBytes)
      : SlotPending(b, p),
        send_(send),
        recv_(static_cast<char*>(recv)),
        recvBytes_(recvBytes) {}

 private:
  size_t offset(int r) const {
    size_t at = 0;
    for (int i = 0; i < r; ++i) at += recvBytes_[static_cast<size_t>(i)];
    return at;
  }
  void fill(char* payload) override {
    const size_t mine = recvBytes_[static_cast<size_t>(rank_)];
    copyBytes(payload, send_ != nullptr ? send_ : recv_ + offset(rank_), mine);
  }
  Status consume() override {
    size_t at = 0;
    for (int r = 0; r < size_; ++r) {
      const size_t n = recvBytes_[static_cast<size_t>(r)];
      if (r != rank_) {
        copyBytes(recv_ + at, payload(r), n);
      } else if (send_ != nullptr) {
        copyBytes(recv_ + at, send_, n);
      }
      at += n;
    }
    return Status::ok();
  }
  const void* send_;
  char* recv_;
  std::vector<size_t> recvBytes_;
};

class AlltoallOp final : public SlotPending {
 public:
  AlltoallOp(const ShmControl& b, ShmControl::Plane* p, const void* send, void* recv,
             size_t bytesPerRank)
      : SlotPending(b, p),
        send_(static_cast<const char*>(send != nullptr ? send : recv)),
        recv_(static_cast<char*>(recv)),
        block_(bytesPerRank) {}

 private:
  void fill(char* payload) override {
    copyBytes(payload, send_, block_ * static_cast<size_t>(size_));
  }
  Status consume() override {
    const size_t mine = static_cast<size_t>(rank_) * block_;
    for (int r = 0; r < size_; ++r) {
      const char* from = r == rank_ ? send_ + mine : payload(r) + mine;
      char* to = recv_ + static_cast<size_t>(r) * block_;
      if (from != to) copyBytes(to, from, block_);  // in place: this rank's block is there
    }
    return Status::ok();
  }
  const char* send_;
  char* recv_;
  size_t block_;
};

class BarrierOp final : public SlotPending {
 public:
  using SlotPending::SlotPending;

 private:
  void fill(char*) override {}
  Status consume() override { return Status::ok(); }
};

}  // namespace

std::string shmSmallSettingError() {
  const char* v = std::getenv("HCOLL_MPI_SHM_SMALL");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "0") == 0 || std::strcmp(v, "1") == 0) {
    return {};
  }
  return std::string("HCOLL_MPI_SHM_SMALL must be 0 or 1, not '") + v + "'";
}

std::shared_ptr<ShmControl> ShmControl::make(MPI_Comm comm, int rank, int size, int localSize,
                                             uint64_t uniqueId) {
  // Decided by facts every rank shares before any rank looks further, so the collective calls
  // below run on all ranks or none.
  if (size < 2 || size > kMaxRanks || localSize != size) return nullptr;
  const size_t bytes = planeBytes(size, kControlSlotBytes) + planeBytes(size, kDataSlotBytes);
  const bool wanted = settingOn("HCOLL_MPI_SHM") && settingOn("HCOLL_MPI_SHM_SMALL");
  const bool claimed = wanted && claimShmBudget(bytes);
  void* base = mapNodeSegment(comm, rank, bytes, uniqueId, "ctl", claimed);
  if (base == nullptr) {
    if (claimed) releaseShmBudget(bytes);
    logging::get("backend")->debug(
        "communicator of {} ranks on one node: no shared-memory control block ({}): small "
        "operations through MPI messages",
        size,
        !wanted    ? "HCOLL_MPI_SHM or HCOLL_MPI_SHM_SMALL is 0 here"
        : !claimed ? "this process's 32 MiB of shared memory are in use"
                   : "another rank declined, or /dev/shm failed");
    return nullptr;
  }
  logging::get("backend")->debug(
      "communicator of {} ranks on one node: shared-memory control block, {} KiB", size,
      bytes >> 10);
  return std::shared_ptr<ShmControl>(new ShmControl(base, bytes, rank, size));
}

ShmControl::ShmControl(void* base, size_t bytes, int rank, int size)
    : base_(base), bytes_(bytes), rank_(rank), size_(size) {
  control_.base = static_cast<char*>(base);
  control_.slotBytes = kControlSlotBytes;
  control_.slotStride = slotStride(kControlSlotBytes);
  control_.watermarks = control_.base + slotsBytes(size, kControlSlotBytes);
  data_.base = control_.base + planeBytes(size, kControlSlotBytes);
  data_.slotBytes = kDataSlotBytes;
  data_.slotStride = slotStride(kDataSlotBytes);
  data_.watermarks = data_.base + slotsBytes(size, kDataSlotBytes);
}

ShmControl::~ShmControl() {
  unmapNodeSegment(base_, bytes_);
}

PendingPtr ShmControl::andBits(uint64_t* words, size_t count,
                                const Channel::FoldedCollective* fold) {
  // Routed by the word count alone (the same on every rank), never by what a rank folds.
  if (kFoldHeaderBytes + count * sizeof(uint64_t) > control_.slotBytes) return nullptr;
  if (fold != nullptr &&
      (fold->count * dataTypeSize(fold->dtype) > foldableBytes(count) ||
       (fold->combine == Channel::FoldedCollective::Combine::kBroadcast &&
        (fold->root < 0 || fold->root >= size_)))) {
    fold = nullptr;  // too large to fold here (or no such root): this rank takes part without
  }
  return start<AndBitsOp>(*this, &control_, words, count, fold);
}

size_t ShmControl::foldableBytes(size_t words) const {
  const size_t used = kFoldHeaderBytes + words * sizeof(uint64_t);
  return used >= control_.slotBytes ? 0 : control_.slotBytes - used;
}

PendingPtr ShmControl::allreduce(const void* send, void* recv, size_t count,
                                 const Reduction& reduction) {
  if (count * reduction.elementSize > data_.slotBytes) return nullptr;
  return start<AllreduceOp>(*this, &data_, send, recv, count, reduction);
}

PendingPtr ShmControl::allgatherv(const void* send, size_t sendBytes, void* recv,
                                  const std::vector<size_t>& recvBytes) {
  (void)sendBytes;  // recvBytes[rank] (the same on every rank, unlike sendBytes alone)
  if (recvBytes.size() != static_cast<size_t>(size_)) return nullptr;
  for (size_t b : recvBytes) {
    if (b > data_.slotBytes) return nullptr;
  }
  return start<AllgathervOp>(*this, &data_, send, recv, recvBytes);
}

PendingPtr ShmControl::broadcast(void* buf, size_t bytes, int root) {
  if (bytes > data_.slotBytes || root < 0 || root >= size_) return nullptr;
  return start<BroadcastOp>(*this, &data_, buf, bytes, root);
}

PendingPtr ShmControl::alltoall(const void* send, void* recv, size_t bytesPerRank) {
  if (bytesPerRank > data_.slotBytes / static_cast<size_t>(size_)) return nullptr;
  return start<AlltoallOp>(*this, &data_, send, recv, bytesPerRank);
}

PendingPtr ShmControl::reduceScatter(const void* send, void* recv,
                                     const std::vector<size_t>& recvCounts,
                                     const Reduction& reduction) {
  if (recvCounts.size() != static_cast<size_t>(size_)) return nullptr;
  size_t total = 0, offset = 0;
  for (size_t r = 0; r < recvCounts.size(); ++r) {
    if (r == static_cast<size_t>(rank_)) offset = total;
    total += recvCounts[r];
  }
  if (total * reduction.elementSize > data_.slotBytes) return nullptr;
  const size_t es = reduction.elementSize;
  // A null send (MPI_IN_PLACE's meaning): the whole input is in recv.
  return start<ReduceScatterOp>(*this, &data_, send != nullptr ? send : recv, recv,
                                total * es, offset * es, recvCounts[static_cast<size_t>(rank_)],
                                reduction);
}

PendingPtr ShmControl::barrier() {
  return start<BarrierOp>(*this, &data_);
}

}  // namespace hcoll::backends::mpi
