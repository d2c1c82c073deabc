#include "backends/nccl/nccl_channel.h"

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "backends/nccl/cuda_util.h"
#include "backends/nccl/nccl_bootstrap.h"
#include "backends/nccl/nccl_types.h"
#include "fusion/fusion_allocator.h"
#include "common/logging.h"

namespace hcoll::backends::nccl {

namespace {

// How long destroying a plane waits for its stream to drain. Every batch already waited for its
// fence, so a healthy plane drains at once; a stream still busy after this is waiting for peers
// that are gone, and waiting longer would only turn a failure into a hang.
constexpr auto kDrainTimeout = std::chrono::seconds(10);

}  // namespace

void CommDeleter::operator()(ncclComm_t comm) const {
  // A communicator with a pending error cannot be destroyed cleanly: abort it. A failed destroy
  // is only reported: the communicator may already be freed, aborting it then is a use after free.
  ncclResult_t async = ncclSuccess;
  if (ncclCommGetAsyncError(comm, &async) != ncclSuccess ||
      (async != ncclSuccess && async != ncclInProgress)) {
    ncclCommAbort(comm);
    return;
  }
  ncclResult_t r = ncclCommDestroy(comm);
  if (r != ncclSuccess) {
    logging::get("nccl")->warn("ncclCommDestroy: {}", ncclGetErrorString(r));
  }
}

CudaMarker::~CudaMarker() {
  DeviceGuard guard(device_);
  cudaEventDestroy(event_);
}

Status NcclChannel::create(Channel& control, int device, std::unique_ptr<DeviceCollectives>* out) {
  // Everything that can fail on one rank alone happens before any rank enters
  // ncclCommInitRank, and the ranks agree on the outcome first: ncclCommInitRank is a collective
  // without a timeout, so a rank that failed alone would leave the others blocked in it.
  DeviceGuard guard(device);
  Status local = guard.status();
  StreamPtr stream;
  if (local.isOk()) {
    cudaStream_t raw = nullptr;
    local = cudaStatus(cudaStreamCreateWithFlags(&raw, cudaStreamNonBlocking),
                       "cudaStreamCreateWithFlags");
    stream.reset(raw);
  }
  if (local.isOk()) {
    // Compiling and loading the scale kernels now turns a missing NVRTC or an unsupported
    // architecture into a failure every rank agrees on, instead of one in the middle of a
    // collective the other ranks are already committed to.
    DeviceKernels* kernels = nullptr;
    local = kernelsFor(device, &kernels);
  }
  std::vector<uint8_t> id;
  HCOLL_RETURN_IF_ERROR(prepareBootstrap(
      control, sizeof(ncclUniqueId), local,
      [](std::vector<uint8_t>* bytes) {
        ncclUniqueId uid;
        HCOLL_NCCL(ncclGetUniqueId(&uid));
        const auto* p = reinterpret_cast<uint8_t*>(&uid);
        bytes->assign(p, p + sizeof uid);
        return Status::ok();
      },
      &id));
  ncclUniqueId uid;
  std::memcpy(&uid, id.data(), sizeof uid);
  ncclComm_t rawComm = nullptr;
  HCOLL_NCCL(ncclCommInitRank(&rawComm, control.size(), uid, control.rank()));
  CommPtr comm(rawComm);
  logging::get("nccl")->debug("NCCL communicator of {} ranks on device {} (rank {})",
                              control.size(), device, control.rank());
  out->reset(
      new NcclChannel(device, control.rank(), control.size(), std::move(comm), std::move(stream)));
  return Status::ok();
}

NcclChannel::NcclChannel(int device, int rank, int size, CommPtr comm, StreamPtr stream)
    : device_(device),
      rank_(rank),
      size_(size),
      comm_(std::move(comm)),
      stream_(std::move(stream)),
      memory_(device, stream_.get()) {
  // Fences poll the asynchronous error from Pending::poll, outside any entry point's guard.
  order_ = std::make_unique<StreamOrder>(cudaEventApi(), stream_.get(), [this] {
    DeviceGuard guard(device_);
    return asyncError();
  });
}

NcclChannel::~NcclChannel() {
  DeviceGuard guard(device_);
  // Not waiting on a stream that does not drain: kernels blocked on absent peers end only when
  // the communicator is aborted.
  if (broken_.isOk() && !drain()) abort(backendError("its stream did not drain"));
  order_.reset();  // its events, before the stream and the communicator
  comm_.reset();
  // Fusion buffers of this plane's stream are idle now and their key is never used again.
  fusion::FusionAllocator::instance().trim(fusion::BufferKey{device_, stream_.get()});
  stream_.reset();
}

void NcclChannel::abort(const Status& why) {
  if (!broken_.isOk()) return;  // already aborted
  DeviceGuard guard(device_);
  logging::get("nccl")->warn("aborting the NCCL communicator of device {}: {}", device_,
                             why.message());
  broken_ = backendError("the NCCL communicator of device " + std::to_string(device_) +
                         " was aborted: " + why.message());
  ncclCommAbort(comm_.release());
}

bool NcclChannel::drain() {
  const auto deadline = std::chrono::steady_clock::now() + kDrainTimeout;
  auto sleep = std::chrono::microseconds(10);
  while (true) {
    const cudaError_t e = cudaStreamQuery(stream_.get());
    if (e == cudaSuccess) return true;
    if (e != cudaErrorNotReady) {
      logging::get("nccl")->warn("device {}: {}", device_, cudaGetErrorString(e));
      return false;
    }
    if (!asyncError().isOk()) return false;  // already aborted by asyncError()
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(sleep);
    if (sleep < std::chrono::milliseconds(10)) sleep *= 2;
  }
}

Status NcclChannel::asyncError() {
  if (!broken_.isOk()) return broken_;
  ncclResult_t async = ncclSuccess;
  ncclResult_t r = ncclCommGetAsyncError(comm_.get(), &async);
  if (r == ncclSuccess && (async == ncclSuccess || async == ncclInProgress)) return Status::ok();
  broken_ =
      backendError(std::string("NCCL asynchronous error on device ") + std::to_string(device_) +
                   ": " + ncclGetErrorString(r != ncclSuccess ? r : async) + " (" +
                   ncclGetLastError(comm_.get()) + ")");
  ncclCommAbort(comm_.release());  // unblocks kernels waiting for peers that are gone
  return broken_;
}

Status NcclChannel::ready(const DeviceGuard& guard) {
  HCOLL_RETURN_IF_ERROR(guard.status());
  return asyncError();
}

PendingPtr NcclChannel::enqueued(Status s) {
  // An enqueue failure is a communicator failure too: later calls must not wait for peers.
  if (!s.isOk() && broken_.isOk() && s.code() == Code::kBackend) {
    Status async = asyncError();
    if (!async.isOk()) return finished(async);
  }
  return finished(std::move(s));
}

Status NcclChannel::waitFor(StreamMarker* marker) {
  DeviceGuard guard(device_);
  HCOLL_RETURN_IF_ERROR(ready(guard));
  auto* m = static_cast<CudaMarker*>(marker);
  return order_->waitFor(m ? m->event() : nullptr);
}

Status NcclChannel::signal(void* stream) {
  DeviceGuard guard(device_);  // the event is created and recorded on this device
  HCOLL_RETURN_IF_ERROR(ready(guard));
  return order_->signal(stream);
}

PendingPtr NcclChannel::fence() {
  DeviceGuard guard(device_);
  Status s = ready(guard);
  if (!s.isOk()) return finished(s);
  return order_->fence();
}

PendingPtr NcclChannel::allreduce(const void* send, void* recv, size_t count, DataType dtype,
                                  ReduceOp op) {
  DeviceGuard guard(device_);
  Status s = ready(guard);
  if (!s.isOk() || count == 0) return finished(s);
  ncclDataType_t type;
  ncclRedOp_t redOp;
  s = toNccl(dtype, op, &type, &redOp);
  if (!s.isOk()) return finished(s);
  return enqueued(ncclStatus(ncclAllReduce(send == nullptr ? recv : send, recv, count, type, redOp,
                                           comm_.get(), stream_.get()),
                             "ncclAllReduce"));
}

PendingPtr NcclChannel::allgatherv(const void* send, size_t sendBytes, void* recv,
                                   const std::vector<size_t>& recvBytes) {
  DeviceGuard guard(device_);
  Status s = ready(guard);
  if (!s.isOk()) return finished(s);
  (void)sendBytes;
  auto* out = static_cast<uint8_t*>(recv);
  // Variable dim 0: one broadcast per rank, grouped so NCCL runs them as one operation.
  s = ncclStatus(ncclGroupStart(), "ncclGroupStart");
  size_t offset = 0;
  for (int r = 0; r < size_ && s.isOk(); ++r) {
    const size_t bytes = recvBytes[r];
    if (bytes != 0) {
      const void* from = r == rank_ && send != nullptr ? send : out + offset;
      s = ncclStatus(
          ncclBroadcast(from, out + offset, bytes, ncclUint8, r, comm_.get(), stream_.get()),
          "ncclBroadcast");
    }
    offset += bytes;
  }
  Status ended = ncclStatus(ncclGroupEnd(), "ncclGroupEnd");
  return enqueued(s.isOk() ? ended : s);
}

PendingPtr NcclChannel::broadcast(void* buf, size_t bytes, int root) {
  DeviceGuard guard(device_);
  Status s = ready(guard);
  if (!s.isOk() || bytes == 0) return finished(s);
  return enqueued(
      ncclStatus(ncclBroadcast(buf, buf, bytes, ncclUint8, root, comm_.get(), stream_.get()),
                 "ncclBroadcast"));
}

PendingPtr NcclChannel::alltoallv(const void* send, const std::vector<size_t>& sendBytes,
                                  void* recv, const std::vector<size_t>& recvBytes) {
  DeviceGuard guard(device_);
  Status s = ready(guard);
  if (!s.isOk()) return finished(s);
  const auto* in = static_cast<const uint8_t*>(send);
  auto* out = static_cast<uint8_t*>(recv);
  s = ncclStatus(ncclGroupStart(), "ncclGroupStart");
  size_t sendOffset = 0, recvOffset = 0;
  for (int r = 0; r < size_ && s.isOk(); ++r) {
    if (sendBytes[r] != 0) {
      s = ncclStatus(
          ncclSend(in + sendOffset, sendBytes[r], ncclUint8, r, comm_.get(), stream_.get()),
          "ncclSend");
    }
    if (s.isOk() && recvBytes[r] != 0) {
      s = ncclStatus(
          ncclRecv(out + recvOffset, recvBytes[r], ncclUint8, r, comm_.get(), stream_.get()),
          "ncclRecv");
    }
    sendOffset += sendBytes[r];
    recvOffset += recvBytes[r];
  }
  Status ended = ncclStatus(ncclGroupEnd(), "ncclGroupEnd");
  return enqueued(s.isOk() ? ended : s);
}

PendingPtr NcclChannel::reduceScatter(const void* send, void* recv,
                                      const std::vector<size_t>& recvCounts, DataType dtype,
                                      ReduceOp op) {
  DeviceGuard guard(device_);
  Status s = ready(guard);
  if (!s.isOk()) return finished(s);
  ncclDataType_t type;
  ncclRedOp_t redOp;
  s = toNccl(dtype, op, &type, &redOp);
  if (!s.isOk()) return finished(s);
  bool even = true;
  size_t total = 0;
  for (size_t c : recvCounts) {
    even = even && c == recvCounts[0];
    total += c;
  }
  if (total == 0) return finished();
  if (even) {
    return enqueued(ncclStatus(
        ncclReduceScatter(send, recv, recvCounts[0], type, redOp, comm_.get(), stream_.get()),
        "ncclReduceScatter"));
  }
  // Uneven blocks: one reduce per destination rank, grouped.
  const size_t elementSize = dataTypeSize(dtype);
  const auto* in = static_cast<const uint8_t*>(send);
  s = ncclStatus(ncclGroupStart(), "ncclGroupStart");
  size_t offset = 0;
  for (int r = 0; r < size_ && s.isOk(); ++r) {
    if (recvCounts[r] != 0) {
      void* to =
          r == rank_ ? recv : const_cast<uint8_t*>(in + offset * elementSize);  // unused off root
      s = ncclStatus(ncclReduce(in + offset * elementSize, to, recvCounts[r], type, redOp, r,
                                comm_.get(), stream_.get()),
                     "ncclReduce");
    }
    offset += recvCounts[r];
  }
  Status ended = ncclStatus(ncclGroupEnd(), "ncclGroupEnd");
  return enqueued(s.isOk() ? ended : s);
}

PendingPtr NcclChannel::barrier() {
  // Barriers are a host operation: the runtime runs them on the communicator's channel.
  return finished(Status(Code::kUnsupported, "barrier on the device plane"));
}

}  // namespace hcoll::backends::nccl
