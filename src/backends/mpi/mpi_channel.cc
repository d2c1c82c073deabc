#include "backends/mpi/mpi_channel.h"

#include <algorithm>
#include <climits>
#include <limits>
#include <numeric>
#include <random>

#include "backends/mpi/mpi_p2p.h"
#include "backends/mpi/mpi_pending.h"
#include "backends/mpi/mpi_types.h"
#include "backends/mpi/mpi_widen.h"

namespace hcoll::backends::mpi {
namespace {

size_t sum(const std::vector<size_t>& v) { return std::accumulate(v.begin(), v.end(), size_t{0}); }

constexpr int kGatherTag = 1;
constexpr int kBroadcastTag = 2;
// Tags 3 (notices) and 7 (stall notes) on the control communicator: mpi_peer_signals.cc.
constexpr int kReadinessTag = 8;    // the readiness AND by recursive doubling

// Receives one message of unknown size from `source` once it arrived (MPI_Improbe + MPI_Mrecv).
bool tryReceive(MPI_Comm comm, int source, int tag, std::vector<uint8_t>* out, Status* status) {
  int flag = 0;
  MPI_Message message;
  MPI_Status probe;
  if (int rc = MPI_Improbe(source, tag, comm, &flag, &message, &probe); rc != MPI_SUCCESS) {
    *status = mpiError("MPI_Improbe", rc);
    return true;
  }
  if (!flag) return false;
  int count = 0;
  MPI_Get_count(&probe, MPI_BYTE, &count);
  out->resize(static_cast<size_t>(count));
  if (int rc = MPI_Mrecv(out->data(), count, MPI_BYTE, &message, MPI_STATUS_IGNORE);
      rc != MPI_SUCCESS) {
    *status = mpiError("MPI_Mrecv", rc);
    return true;
  }
  *status = Status::ok();
  return true;
}

// Rank 0 collects one message from every other rank; the others send theirs.
class GatherPending final : public Pending {
 public:
  GatherPending(MPI_Comm comm, int rank, int size, std::vector<uint8_t> mine,
                std::vector<std::vector<uint8_t>>* atRoot)
      : comm_(comm), rank_(rank), mine_(std::move(mine)), atRoot_(atRoot) {
    if (rank_ == 0) {
      atRoot_->assign(static_cast<size_t>(size), {});
      (*atRoot_)[0] = std::move(mine_);
      for (int r = 1; r < size; ++r) missing_.push_back(r);
    } else {
      startRc_ = MPI_Isend(mine_.data(), static_cast<int>(mine_.size()), MPI_BYTE, 0, kGatherTag,
                           comm_, &send_);
    }
  }
  bool poll(Status* status) override {
    if (startRc_ != MPI_SUCCESS) {
      *status = mpiError("MPI_Isend", startRc_);
      return true;
    }
    if (rank_ != 0) return testSend(status);
    for (size_t i = 0; i < missing_.size();) {
      Status s;
      if (tryReceive(comm_, missing_[i], kGatherTag, &(*atRoot_)[missing_[i]], &s)) {
        if (!s.isOk()) {
          *status = s;
          return true;
        }
        missing_[i] = missing_.back();
        missing_.pop_back();
      } else {
        ++i;
      }
    }
    if (!missing_.empty()) return false;
    *status = Status::ok();
    return true;
  }

 private:
  bool testSend(Status* status) {
    int done = 0;
    if (int rc = MPI_Test(&send_, &done, MPI_STATUS_IGNORE); rc != MPI_SUCCESS) {
      *status = mpiError("MPI_Test", rc);
      return true;
    }
    if (done) *status = Status::ok();
    return done != 0;
  }

  MPI_Comm comm_;
  int rank_;
  std::vector<uint8_t> mine_;
  std::vector<std::vector<uint8_t>>* atRoot_;
  std::vector<int> missing_;
  MPI_Request send_ = MPI_REQUEST_NULL;
  int startRc_ = MPI_SUCCESS;
};

// Rank 0 sends its bytes to every other rank; the others receive them.
class BroadcastBytesPending final : public Pending {
 public:
  BroadcastBytesPending(MPI_Comm comm, int rank, int size, std::vector<uint8_t>* buf)
      : comm_(comm), rank_(rank), buf_(buf) {
    if (rank_ != 0) return;
    sends_.resize(static_cast<size_t>(size - 1), MPI_REQUEST_NULL);
    for (int r = 1; r < size && startRc_ == MPI_SUCCESS; ++r) {
      startRc_ = MPI_Isend(buf_->data(), static_cast<int>(buf_->size()), MPI_BYTE, r, kBroadcastTag,
                           comm_, &sends_[r - 1]);
    }
  }
  bool poll(Status* status) override {
    if (startRc_ != MPI_SUCCESS) {
      *status = mpiError("MPI_Isend", startRc_);
      return true;
    }
    if (rank_ != 0) return tryReceive(comm_, 0, kBroadcastTag, buf_, status);
    int done = 0;
    if (int rc =
            MPI_Testall(static_cast<int>(sends_.size()), sends_.data(), &done, MPI_STATUSES_IGNORE);
        rc != MPI_SUCCESS) {
      *status = mpiError("MPI_Testall", rc);
      return true;
    }
    if (done) *status = Status::ok();
    return done != 0;
  }

 private:
  MPI_Comm comm_;
  int rank_;
  std::vector<uint8_t>* buf_;
  std::vector<MPI_Request> sends_;
  int startRc_ = MPI_SUCCESS;
};

// The readiness AND (allreduceBitsAnd) on a power-of-two communicator by recursive doubling over
// point-to-point messages: log2(N) exchanges of the words with rank ^ 1, rank ^ 2, ... Every rank
// sends its partner exactly one message per exchange, in the same order every round, so the
// k-th message between two ranks on this tag is always the k-th round's. Measured at 2 ranks on
// shared memory: ~1.1-1.5 us per round against ~3.3 us for MPI_Iallreduce (MPICH's schedule),
// which every operation pays once. Never destroyed while a request is active: a round given up
// on is kept by the runtime's bounded wait (its buffers with it).
class AndExchangePending final : public Pending {
 public:
  AndExchangePending(MPI_Comm comm, int rank, int size, uint64_t* words, size_t count)
      : comm_(comm), rank_(rank), size_(size), words_(words), count_(count), buffer_(2 * count) {
    startRc_ = startExchange();
  }
  bool poll(Status* status) override {
    while (true) {
      if (startRc_ != MPI_SUCCESS) {
        *status = mpiError("MPI_Isend/MPI_Irecv", startRc_);
        return true;
      }
      int done = 0;
      if (int rc = MPI_Testall(2, requests_, &done, MPI_STATUSES_IGNORE); rc != MPI_SUCCESS) {
        *status = mpiError("MPI_Testall", rc);
        return true;
      }
      if (!done) return false;
      const uint64_t* received = buffer_.data() + count_;
      for (size_t i = 0; i < count_; ++i) words_[i] &= received[i];
      mask_ <<= 1;
      if (mask_ >= size_) {
        *status = Status::ok();
        return true;
      }
      startRc_ = startExchange();
    }
  }

 private:
  int startExchange() {
    const int partner = rank_ ^ mask_;
    uint64_t* sent = buffer_.data();
    std::copy(words_, words_ + count_, sent);
    const int n = static_cast<int>(count_);
    if (int rc =
            MPI_Irecv(sent + count_, n, MPI_UINT64_T, partner, kReadinessTag, comm_, &requests_[0]);
        rc != MPI_SUCCESS) {
      return rc;
    }
    return MPI_Isend(sent, n, MPI_UINT64_T, partner, kReadinessTag, comm_, &requests_[1]);
  }

  MPI_Comm comm_;
  int rank_, size_;
  uint64_t* words_;
  size_t count_;
  std::vector<uint64_t> buffer_;  // what this exchange sends, then what it receives: one
                                  // allocation per round (every operation pays one round)
  MPI_Request requests_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  int mask_ = 1;
  int startRc_ = MPI_SUCCESS;
};

// `p` with one more MPI request, started by `start` (which may keep its count arrays in p), or
// an immediate failure naming `call` if starting failed.
template <class Start>
PendingPtr post(std::unique_ptr<RequestsPending> p, const char* call, Start start) {
  p->requests().push_back(MPI_REQUEST_NULL);
  if (int rc = start(p.get(), &p->requests().back()); rc != MPI_SUCCESS) {
    return finished(mpiError(call, rc));
  }
  return p;
}

// A single MPI request started by `start`, or an immediate failure if starting failed.
template <class Start>
PendingPtr startRequest(const char* call, Start start) {
  return post(std::make_unique<RequestsPending>(), call, start);
}

bool toIntCounts(const std::vector<size_t>& bytes, std::vector<int>* counts,
                 std::vector<int>* displs) {
  size_t offset = 0;
  counts->resize(bytes.size());
  displs->resize(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] > INT_MAX || offset > INT_MAX) return false;
    (*counts)[i] = static_cast<int>(bytes[i]);
    (*displs)[i] = static_cast<int>(offset);
    offset += bytes[i];
  }
  return true;
}

// MPI-4's large-count calls (MPI_Iallgatherv_c, ...) take MPI_Count counts and MPI_Aint
// displacements: MPICH 4 has them, Open MPI 4.1 (MPI 3.1) does not. Without them the int-count
// calls limit one rank's part to INT_MAX, which the runtime enforces at submission
// (maxVectorCount); with them the int-count calls still serve everything that fits.
#if MPI_VERSION >= 4
constexpr bool kLargeCounts = true;

void toLargeCounts(const std::vector<size_t>& n, std::vector<MPI_Count>* counts,
                   std::vector<MPI_Aint>* displs) {
  counts->resize(n.size());
  displs->resize(n.size());
  MPI_Aint offset = 0;
  for (size_t i = 0; i < n.size(); ++i) {
    (*counts)[i] = static_cast<MPI_Count>(n[i]);
    (*displs)[i] = offset;
    offset += static_cast<MPI_Aint>(n[i]);
  }
}
#else
constexpr bool kLargeCounts = false;
#endif

[[maybe_unused]] Status tooLarge(const char* what) {
  return Status(
      Code::kUnsupported,
      std::string(what) + ": more than 2 GiB per rank is not supported by the MPI backend");
}

constexpr size_t kMaxChunkElements = INT_MAX / 8;

}  // namespace

CommHandle& CommHandle::operator=(CommHandle&& o) noexcept {
  if (this != &o) {
    reset();
    comm_ = o.release();
  }
  return *this;
}

void CommHandle::reset() {
  if (comm_ == MPI_COMM_NULL) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
  comm_ = MPI_COMM_NULL;
}

Status MpiChannel::make(CommHandle base, std::unique_ptr<Channel>* out) {
  std::unique_ptr<MpiChannel> ch(new MpiChannel());
  MPI_Comm_set_errhandler(base.get(), MPI_ERRORS_RETURN);
  MPI_Comm data;
  if (int rc = MPI_Comm_dup(base.get(), &data); rc != MPI_SUCCESS) {
    return mpiError("MPI_Comm_dup", rc);
  }
  ch->data_ = CommHandle(data);
  MPI_Comm_set_errhandler(data, MPI_ERRORS_RETURN);
  MPI_Comm_rank(base.get(), &ch->rank_);
  MPI_Comm_size(base.get(), &ch->size_);
  MPI_Comm local;
  if (int rc =
          MPI_Comm_split_type(base.get(), MPI_COMM_TYPE_SHARED, ch->rank_, MPI_INFO_NULL, &local);
      rc != MPI_SUCCESS) {
    return mpiError("MPI_Comm_split_type", rc);
  }
  CommHandle localHandle(local);
  MPI_Comm_rank(local, &ch->localRank_);
  MPI_Comm_size(local, &ch->localSize_);
  if (ch->rank_ == 0) {
    std::random_device entropy;
    ch->noticeId_ = (static_cast<uint64_t>(entropy()) << 32) ^ entropy();
  }
  if (int rc = MPI_Bcast(&ch->noticeId_, 1, MPI_UINT64_T, 0, base.get()); rc != MPI_SUCCESS) {
    return mpiError("MPI_Bcast", rc);
  }
  // Collective too (every rank of `base` makes the channel): all ranks get lanes or none.
  ch->transports_ = CommTransports(
      data, ShmLanes::make(data, ch->rank_, ch->size_, ch->localSize_, ch->noticeId_));
  ch->small_ = ShmControl::make(data, ch->rank_, ch->size_, ch->localSize_, ch->noticeId_);
  ch->control_ = std::move(base);
  ch->signals_ = std::make_unique<MpiPeerSignals>(ch->control_.get(), ch->rank_, ch->size_,
                                                  ch->noticeId_);
  *out = std::move(ch);
  return Status::ok();
}

MpiChannel::~MpiChannel() = default;

size_t MpiChannel::maxVectorCount() const {
  return kLargeCounts ? SIZE_MAX : static_cast<size_t>(INT_MAX);
}

std::string MpiChannel::maxVectorCountReason() const {
  return "this build's MPI has no MPI-4 large-count calls (build hcoll against an MPI-4 "
         "library such as MPICH 4, which has no such limit)";
}

PendingPtr MpiChannel::allreduceBitsAnd(uint64_t* words, size_t count) {
  if (small_) {
    if (PendingPtr p = small_->andBits(words, count)) return p;
  }
  MPI_Comm c = control_.get();
  const bool powerOfTwo = size_ > 1 && (size_ & (size_ - 1)) == 0;
  if (powerOfTwo && count <= static_cast<size_t>(std::numeric_limits<int>::max())) {
    return std::make_unique<AndExchangePending>(c, rank_, size_, words, count);
  }
  return startRequest("MPI_Iallreduce", [&](RequestsPending*, MPI_Request* r) {
    return MPI_Iallreduce(MPI_IN_PLACE, words, static_cast<int>(count), MPI_UINT64_T, MPI_BAND, c,
                          r);
  });
}

// The fold needs the shared-memory control block (on every rank alike, agreed at creation).
size_t MpiChannel::foldableBytes(size_t words) const {
  return small_ ? small_->foldableBytes(words) : 0;
}

PendingPtr MpiChannel::allreduceBitsAndFolded(uint64_t* words, size_t count,
                                              const FoldedCollective& fold) {
  *fold.agreed = false;
  // Element-wise reductions in the tensor's own type only (float16/bfloat16 reduce widened to
  // float32 here, Adasum is not element-wise): otherwise this rank takes part without folding.
  // Gathering and broadcasting move bytes of any type.
  const bool foldable =
      small_ && (fold.combine != FoldedCollective::Combine::kReduce ||
                 (fold.op != ReduceOp::kAdasum && !reducesInFloat32(fold.dtype, fold.op)));
  if (small_) {
    if (PendingPtr p = small_->andBits(words, count, foldable ? &fold : nullptr)) return p;
  }
  return allreduceBitsAnd(words, count);
}

PendingPtr MpiChannel::gatherBytes(std::vector<uint8_t> mine,
                                   std::vector<std::vector<uint8_t>>* atRoot) {
  return std::make_unique<GatherPending>(control_.get(), rank_, size_, std::move(mine), atRoot);
}

PendingPtr MpiChannel::broadcastBytes(std::vector<uint8_t>* buf) {
  return std::make_unique<BroadcastBytesPending>(control_.get(), rank_, size_, buf);
}

PendingPtr MpiChannel::allreduce(const void* send, void* recv, size_t count, DataType dtype,
                                 ReduceOp op) {
  if (reducesInFloat32(dtype, op)) {
    auto wide = std::make_unique<WideBuffer>(*widePool_, count);
    wide->widen(send != nullptr ? send : recv, 0, count, dtype);
    PendingPtr inner = allreduce(nullptr, wide->data(), count, DataType::kFloat32, op);
    return narrowWhenDone(std::move(inner), std::move(wide), 0, count, dtype, recv, widePool_);
  }
  if (small_) {
    if (PendingPtr p = small_->allreduce(send, recv, count, reductionFor(dtype, op))) return p;
  }
  // Small communicators: point-to-point messages and local reductions (mpi_p2p.h), also free of
  // MPICH's temporary buffer per call (whose first touches made a 32 MiB MPI_Allreduce take
  // ~90 ms instead of ~7 on the test VM).
  if (pointToPoint(OpKind::kAllreduce, count * dataTypeSize(dtype))) {
    return pointToPointAllreduce(scheduleContext(reductionFor(dtype, op)), send, recv, count);
  }
  MPI_Comm c = data_.get();
  MPI_Datatype type = toMpiType(dtype);
  MPI_Op mpiOp = toMpiOp(op, dtype);
  // A null send chunk means in place.
  auto startChunk = [=](const void* from, void* to, size_t n) {
    return startRequest("MPI_Iallreduce", [&](RequestsPending*, MPI_Request* r) {
      return MPI_Iallreduce(from == nullptr ? MPI_IN_PLACE : from, to, static_cast<int>(n), type,
                            mpiOp, c, r);
    });
  };
  if (count <= kMaxChunkElements) return startChunk(send, recv, count);
  std::vector<std::function<PendingPtr()>> steps;
  size_t elementSize = dataTypeSize(dtype);
  for (size_t offset = 0; offset < count; offset += kMaxChunkElements) {
    const void* from =
        send == nullptr ? nullptr : static_cast<const uint8_t*>(send) + offset * elementSize;
    void* to = static_cast<uint8_t*>(recv) + offset * elementSize;
    size_t n = std::min(kMaxChunkElements, count - offset);
    steps.push_back([=] { return startChunk(from, to, n); });
  }
  return std::make_unique<SequencePending>(std::move(steps));
}

PendingPtr MpiChannel::allgatherv(const void* send, size_t sendBytes, void* recv,
                                  const std::vector<size_t>& recvBytes) {
  if (small_) {
    if (PendingPtr p = small_->allgatherv(send, sendBytes, recv, recvBytes)) return p;
  }
  if (pointToPoint(OpKind::kAllgather, sum(recvBytes))) {
    return pointToPointAllgatherv(scheduleContext(), send, sendBytes, recv, recvBytes);
  }
  // Equal blocks (recvBytes is the same on every rank, so all ranks choose alike): MPICH's
  // MPI_Iallgather beats MPI_Iallgatherv (e.g. ~13 vs ~20 us at 128 KiB, 2 ranks).
  if (!recvBytes.empty() && recvBytes[0] <= INT_MAX &&
      std::all_of(recvBytes.begin(), recvBytes.end(),
                  [&](size_t b) { return b == recvBytes[0]; })) {
    MPI_Comm c = data_.get();
    const int count = static_cast<int>(recvBytes[0]);
    return startRequest("MPI_Iallgather", [&](RequestsPending*, MPI_Request* r) {
      return MPI_Iallgather(send == nullptr ? MPI_IN_PLACE : send, count, MPI_BYTE, recv, count,
                            MPI_BYTE, c, r);
    });
  }
  auto p = std::make_unique<RequestsPending>();
  p->intArrays.resize(2);
  MPI_Comm c = data_.get();
  const void* from = send == nullptr ? MPI_IN_PLACE : send;  // in place: already at its offset
  if (sendBytes <= INT_MAX && toIntCounts(recvBytes, &p->intArrays[0], &p->intArrays[1])) {
    return post(std::move(p), "MPI_Iallgatherv", [&](RequestsPending* q, MPI_Request* r) {
      return MPI_Iallgatherv(from, static_cast<int>(sendBytes), MPI_BYTE, recv,
                             q->intArrays[0].data(), q->intArrays[1].data(), MPI_BYTE, c, r);
    });
  }
#if MPI_VERSION >= 4
  p->countArrays.resize(1);
  p->displArrays.resize(1);
  toLargeCounts(recvBytes, &p->countArrays[0], &p->displArrays[0]);
  return post(std::move(p), "MPI_Iallgatherv_c", [&](RequestsPending* q, MPI_Request* r) {
    return MPI_Iallgatherv_c(from, static_cast<MPI_Count>(sendBytes), MPI_BYTE, recv,
                             q->countArrays[0].data(), q->displArrays[0].data(), MPI_BYTE, c, r);
  });
#else
  return finished(tooLarge("allgather"));
#endif
}

PendingPtr MpiChannel::broadcast(void* buf, size_t bytes, int root) {
  if (small_) {
    if (PendingPtr p = small_->broadcast(buf, bytes, root)) return p;
  }
  MPI_Comm c = data_.get();
  if (pointToPoint(OpKind::kBroadcast, bytes)) {
    return binomialBroadcast(scheduleContext(), buf, bytes, root);
  }
  auto startChunk = [=](void* p, size_t n) {
    return startRequest("MPI_Ibcast", [&](RequestsPending*, MPI_Request* r) {
      return MPI_Ibcast(p, static_cast<int>(n), MPI_BYTE, root, c, r);
    });
  };
  if (bytes <= kMaxChunkElements) return startChunk(buf, bytes);
  std::vector<std::function<PendingPtr()>> steps;
  for (size_t offset = 0; offset < bytes; offset += kMaxChunkElements) {
    void* p = static_cast<uint8_t*>(buf) + offset;
    size_t n = std::min(kMaxChunkElements, bytes - offset);
    steps.push_back([=] { return startChunk(p, n); });
  }
  return std::make_unique<SequencePending>(std::move(steps));
}

PendingPtr MpiChannel::alltoallv(const void* send, const std::vector<size_t>& sendBytes, void* recv,
                                 const std::vector<size_t>& recvBytes) {
  if (pointToPoint(OpKind::kAlltoall, sum(sendBytes))) {
    return pointToPointAlltoallv(scheduleContext(), send, sendBytes, recv, recvBytes);
  }
  auto p = std::make_unique<RequestsPending>();
  p->intArrays.resize(4);
  auto& a = p->intArrays;
  MPI_Comm c = data_.get();
  if (toIntCounts(sendBytes, &a[0], &a[1]) && toIntCounts(recvBytes, &a[2], &a[3])) {
    return post(std::move(p), "MPI_Ialltoallv", [&](RequestsPending* q, MPI_Request* r) {
      auto& i = q->intArrays;
      return MPI_Ialltoallv(send, i[0].data(), i[1].data(), MPI_BYTE, recv, i[2].data(),
                            i[3].data(), MPI_BYTE, c, r);
    });
  }
#if MPI_VERSION >= 4
  p->countArrays.resize(2);
  p->displArrays.resize(2);
  toLargeCounts(sendBytes, &p->countArrays[0], &p->displArrays[0]);
  toLargeCounts(recvBytes, &p->countArrays[1], &p->displArrays[1]);
  return post(std::move(p), "MPI_Ialltoallv_c", [&](RequestsPending* q, MPI_Request* r) {
    auto &n = q->countArrays, &d = q->displArrays;
    return MPI_Ialltoallv_c(send, n[0].data(), d[0].data(), MPI_BYTE, recv, n[1].data(),
                            d[1].data(), MPI_BYTE, c, r);
  });
#else
  return finished(tooLarge("alltoall"));
#endif
}

PendingPtr MpiChannel::alltoall(const void* send, void* recv, size_t bytesPerRank, size_t ranks) {
  // Small communicators: point-to-point messages (mpi_p2p.h), even split or not. Larger ones:
  // MPICH's MPI_Ialltoall beats MPI_Ialltoallv on even splits (e.g. ~26 vs ~43 us at 512 KiB and
  // ~130 vs ~210 us at 2 MiB, 2 ranks). Beyond an int count, alltoallv's handling of large
  // counts applies (the same on every rank).
  if (small_ && ranks == static_cast<size_t>(size_)) {
    if (PendingPtr p = small_->alltoall(send, recv, bytesPerRank)) return p;
  }
  if (pointToPoint(OpKind::kAlltoall, bytesPerRank * ranks))
    return pointToPointAlltoall(scheduleContext(), send, recv, bytesPerRank);
  if (bytesPerRank > INT_MAX) return Channel::alltoall(send, recv, bytesPerRank, ranks);
  MPI_Comm c = data_.get();
  return startRequest("MPI_Ialltoall", [&](RequestsPending*, MPI_Request* r) {
    return MPI_Ialltoall(send, static_cast<int>(bytesPerRank), MPI_BYTE, recv,
                         static_cast<int>(bytesPerRank), MPI_BYTE, c, r);
  });
}

PendingPtr MpiChannel::reduceScatter(const void* send, void* recv,
                                     const std::vector<size_t>& recvCounts, DataType dtype,
                                     ReduceOp op) {
  if (reducesInFloat32(dtype, op)) {
    // One buffer: the whole widened input, then this rank's widened block.
    size_t total = 0;
    for (size_t c : recvCounts) total += c;
    const size_t mine = recvCounts[static_cast<size_t>(rank_)];
    auto wide = std::make_unique<WideBuffer>(*widePool_, total + mine);
    wide->widen(send, 0, total, dtype);
    PendingPtr inner =
        reduceScatter(wide->data(), wide->data() + total, recvCounts, DataType::kFloat32, op);
    return narrowWhenDone(std::move(inner), std::move(wide), total, mine, dtype, recv, widePool_);
  }
  if (small_) {
    if (PendingPtr p = small_->reduceScatter(send, recv, recvCounts, reductionFor(dtype, op))) {
      return p;
    }
  }
  // Small communicators: point-to-point messages and a local reduction (mpi_p2p.h), ~5-10 %
  // faster than MPI_Reduce_scatter_block from 32 KiB to 2 MiB on 2 ranks (raw MPI, interleaved).
  if (pointToPoint(OpKind::kReducescatter, sum(recvCounts) * dataTypeSize(dtype))) {
    return pointToPointReduceScatter(scheduleContext(reductionFor(dtype, op)), send, recv,
                                     recvCounts);
  }
  auto p = std::make_unique<RequestsPending>();
  p->intArrays.resize(2);
  MPI_Comm c = data_.get();
  const MPI_Datatype type = toMpiType(dtype);
  const MPI_Op mpiOp = toMpiOp(op, dtype);
  if (toIntCounts(recvCounts, &p->intArrays[0], &p->intArrays[1])) {
    return post(std::move(p), "MPI_Ireduce_scatter", [&](RequestsPending* q, MPI_Request* r) {
      return MPI_Ireduce_scatter(send, recv, q->intArrays[0].data(), type, mpiOp, c, r);
    });
  }
#if MPI_VERSION >= 4
  p->countArrays.resize(1);
  p->countArrays[0].assign(recvCounts.begin(), recvCounts.end());
  return post(std::move(p), "MPI_Ireduce_scatter_c", [&](RequestsPending* q, MPI_Request* r) {
    return MPI_Ireduce_scatter_c(send, recv, q->countArrays[0].data(), type, mpiOp, c, r);
  });
#else
  return finished(tooLarge("reducescatter"));
#endif
}

PendingPtr MpiChannel::barrier() {
  if (small_) return small_->barrier();
  MPI_Comm c = data_.get();
  return startRequest("MPI_Ibarrier",
                      [&](RequestsPending*, MPI_Request* r) { return MPI_Ibarrier(c, r); });
}

Status MpiChannel::split(int color, int key, std::unique_ptr<Channel>* out) {
  out->reset();
  MPI_Comm comm;
  if (int rc = MPI_Comm_split(control_.get(), color < 0 ? MPI_UNDEFINED : color, key, &comm);
      rc != MPI_SUCCESS) {
    return mpiError("MPI_Comm_split", rc);
  }
  if (comm == MPI_COMM_NULL) return Status::ok();
  return make(CommHandle(comm), out);
}

Status MpiChannel::create(const std::vector<int32_t>& ranks, std::unique_ptr<Channel>* out) {
  int index = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] == rank_) index = static_cast<int>(i);
  }
  return split(index >= 0 ? 0 : -1, index, out);
}

}  // namespace hcoll::backends::mpi
