#pragma once
// The device data plane of one hcoll communicator on one CUDA device: an NCCL communicator over
// the same ranks (RAII: destroyed after its stream drained, aborted after an asynchronous error,
// an abort of the hcoll communicator, or a stream that does not drain), an internal stream every
// collective and memory operation is enqueued on, and the event bookkeeping that orders it
// against the callers' streams. Every entry point makes its device current for its duration.

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>

#include "backends/device.h"
#include "backends/nccl/cuda_util.h"
#include "backends/nccl/nccl_kernels.h"
#include "backends/nccl/stream_order.h"

namespace hcoll::backends::nccl {

// Destroys a healthy communicator; aborts one with an asynchronous error (it cannot be
// destroyed cleanly). Communicators to abort unconditionally are released and aborted by hand.
struct CommDeleter {
  void operator()(ncclComm_t comm) const;
};
using CommPtr = std::unique_ptr<std::remove_pointer_t<ncclComm_t>, CommDeleter>;

struct StreamDeleter {
  void operator()(cudaStream_t s) const { cudaStreamDestroy(s); }
};
using StreamPtr = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDeleter>;

class NcclChannel final : public DeviceCollectives {
 public:
  // Collective over `control`: shares rank 0's unique id and initializes the NCCL rank.
  static Status create(Channel& control, int device, std::unique_ptr<DeviceCollectives>* out);
  ~NcclChannel() override;

  int32_t device() const override { return device_; }
  void* stream() const override { return stream_.get(); }
  MemoryOps& memory() override { return memory_; }
  Status waitFor(StreamMarker* marker) override;
  Status signal(void* stream) override;
  PendingPtr fence() override;
  void abort(const Status& why) override;

  PendingPtr allreduce(const void* send, void* recv, size_t count, DataType dtype,
                       ReduceOp op) override;
  PendingPtr allgatherv(const void* send, size_t sendBytes, void* recv,
                        const std::vector<size_t>& recvBytes) override;
  PendingPtr broadcast(void* buf, size_t bytes, int root) override;
  PendingPtr alltoallv(const void* send, const std::vector<size_t>& sendBytes, void* recv,
                       const std::vector<size_t>& recvBytes) override;
  PendingPtr reduceScatter(const void* send, void* recv, const std::vector<size_t>& recvCounts,
                           DataType dtype, ReduceOp op) override;
  PendingPtr barrier() override;

 private:
  NcclChannel(int device, int rank, int size, CommPtr comm, StreamPtr stream);
  // Whether the communicator is still usable on the device `guard` made current; after an
  // asynchronous error it is aborted and every later call fails with kBackend at once.
  Status ready(const DeviceGuard& guard);
  Status asyncError();
  // Waits, bounded, for the internal stream to finish; false if it did not (a kernel waiting for
  // a peer that is gone) or the communicator failed meanwhile.
  bool drain();
  PendingPtr enqueued(Status s);

  int device_;
  int rank_;
  int size_;
  CommPtr comm_;
  StreamPtr stream_;
  DeviceMemoryOps memory_;
  std::unique_ptr<StreamOrder> order_;
  Status broken_;  // set once the communicator is aborted (then comm_ is null)
};

// The marker of a caller's stream: an event recorded on it at submission.
class CudaMarker final : public StreamMarker {
 public:
  CudaMarker(int device, cudaEvent_t event) : device_(device), event_(event) {}
  ~CudaMarker() override;
  cudaEvent_t event() const { return event_; }
  int device() const { return device_; }

 private:
  int device_;
  cudaEvent_t event_;
};

}  // namespace hcoll::backends::nccl
