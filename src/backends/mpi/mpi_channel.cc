#include "backends/mpi/mpi_channel.h"

#include <algorithm>
#include <climits>

#include "backends/mpi/mpi_pending.h"
#include "backends/mpi/mpi_types.h"

namespace hcoll::backends::mpi {
namespace {

constexpr int kGatherTag = 1;
constexpr int kBroadcastTag = 2;

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
      startRc_ = MPI_Isend(buf_->data(), static_cast<int>(buf_->size()), MPI_BYTE, r,
                           kBroadcastTag, comm_, &sends_[r - 1]);
    }
  }
  bool poll(Status* status) override {
    if (startRc_ != MPI_SUCCESS) {
      *status = mpiError("MPI_Isend", startRc_);
      return true;
    }
    if (rank_ != 0) return tryReceive(comm_, 0, kBroadcastTag, buf_, status);
    int done = 0;
    if (int rc = MPI_Testall(static_cast<int>(sends_.size()), sends_.data(), &done,
                             MPI_STATUSES_IGNORE);
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

// A single MPI request started by `start`, or an immediate failure if starting failed.
template <class Start>
PendingPtr startRequest(const char* call, Start start) {
  auto p = std::make_unique<RequestsPending>();
  p->requests().push_back(MPI_REQUEST_NULL);
  if (int rc = start(p.get(), &p->requests().back()); rc != MPI_SUCCESS) {
    return finished(mpiError(call, rc));
  }
  return p;
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

Status tooLarge(const char* what) {
  return Status(Code::kUnsupported,
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
  if (int rc = MPI_Comm_split_type(base.get(), MPI_COMM_TYPE_SHARED, ch->rank_, MPI_INFO_NULL,
                                   &local);
      rc != MPI_SUCCESS) {
    return mpiError("MPI_Comm_split_type", rc);
  }
  CommHandle localHandle(local);
  MPI_Comm_rank(local, &ch->localRank_);
  MPI_Comm_size(local, &ch->localSize_);
  ch->control_ = std::move(base);
  *out = std::move(ch);
  return Status::ok();
}

PendingPtr MpiChannel::allreduceBitsAnd(uint64_t* words, size_t count) {
  MPI_Comm c = control_.get();
  return startRequest("MPI_Iallreduce", [&](RequestsPending*, MPI_Request* r) {
    return MPI_Iallreduce(MPI_IN_PLACE, words, static_cast<int>(count), MPI_UINT64_T, MPI_BAND,
                          c, r);
  });
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
  if (sendBytes > INT_MAX || !toIntCounts(recvBytes, &p->intArrays[0], &p->intArrays[1])) {
    return finished(tooLarge("allgather"));
  }
  p->requests().push_back(MPI_REQUEST_NULL);
  // A null send means in place: this rank's block already sits at its offset in recv.
  int rc = MPI_Iallgatherv(send == nullptr ? MPI_IN_PLACE : send,
                           static_cast<int>(sendBytes), MPI_BYTE, recv,
                           p->intArrays[0].data(), p->intArrays[1].data(), MPI_BYTE, data_.get(),
                           &p->requests().back());
  if (rc != MPI_SUCCESS) return finished(mpiError("MPI_Iallgatherv", rc));
  return p;
}

PendingPtr MpiChannel::broadcast(void* buf, size_t bytes, int root) {
  MPI_Comm c = data_.get();
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

PendingPtr MpiChannel::alltoallv(const void* send, const std::vector<size_t>& sendBytes,
                                 void* recv, const std::vector<size_t>& recvBytes) {
  auto p = std::make_unique<RequestsPending>();
  p->intArrays.resize(4);
  auto& a = p->intArrays;
  if (!toIntCounts(sendBytes, &a[0], &a[1]) || !toIntCounts(recvBytes, &a[2], &a[3])) {
    return finished(tooLarge("alltoall"));
  }
  p->requests().push_back(MPI_REQUEST_NULL);
  int rc = MPI_Ialltoallv(send, a[0].data(), a[1].data(), MPI_BYTE, recv, a[2].data(),
                          a[3].data(), MPI_BYTE, data_.get(), &p->requests().back());
  if (rc != MPI_SUCCESS) return finished(mpiError("MPI_Ialltoallv", rc));
  return p;
}

PendingPtr MpiChannel::alltoall(const void* send, void* recv, size_t bytesPerRank, size_t ranks) {
  // MPICH's MPI_Ialltoall beats MPI_Ialltoallv on even splits (e.g. ~26 vs ~43 us at 512 KiB and
  // ~130 vs ~210 us at 2 MiB, 2 ranks). Beyond an int count, alltoallv's handling of large
  // counts applies (the same on every rank).
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
  auto p = std::make_unique<RequestsPending>();
  p->intArrays.resize(2);
  if (!toIntCounts(recvCounts, &p->intArrays[0], &p->intArrays[1])) {
    return finished(tooLarge("reducescatter"));
  }
  p->requests().push_back(MPI_REQUEST_NULL);
  int rc = MPI_Ireduce_scatter(send, recv, p->intArrays[0].data(), toMpiType(dtype),
                               toMpiOp(op, dtype), data_.get(), &p->requests().back());
  if (rc != MPI_SUCCESS) return finished(mpiError("MPI_Ireduce_scatter", rc));
  return p;
}

PendingPtr MpiChannel::barrier() {
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
