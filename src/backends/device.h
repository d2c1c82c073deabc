#pragma once
// What the runtime needs from a device (CUDA) backend, without naming CUDA or NCCL: memory
// operations on a device, a marker of a caller's stream taken at submission, and a device data
// plane per (communicator, device) created lazily on the negotiation thread. The host path
// implements MemoryOps too, so the executor runs one code path for both kinds of memory.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "backends/backend.h"
#include "common/status.h"
#include "common/types.h"

namespace hcoll::backends {

// Copy/scale/zero on one kind of memory. Host memory: done when the call returns. Device memory:
// enqueued in order with the device data plane's collectives (on its internal stream).
class MemoryOps {
 public:
  virtual ~MemoryOps() = default;
  virtual Status copy(void* dst, const void* src, size_t bytes) = 0;
  // dst[i] = src[i] * factor (see fusion::scaleCopy for the rounding rules); dst may equal src.
  virtual Status scaleCopy(void* dst, const void* src, size_t count, DataType dtype,
                           double factor) = 0;
  virtual Status zero(void* dst, size_t bytes) = 0;
  // Rewrites bool elements as 0/1.
  virtual Status normalizeBool(void* data, size_t count) = 0;
};

// The host implementation (memcpy, fusion::scaleCopy).
MemoryOps& hostMemoryOps();

// A point in a caller's stream, captured on the caller's thread when an operation is submitted,
// so that the collective reads the data the caller had enqueued by then and nothing later.
class StreamMarker {
 public:
  virtual ~StreamMarker() = default;
};
using StreamMarkerPtr = std::unique_ptr<StreamMarker>;

// The device data plane of one communicator on one device. Used by the negotiation thread only.
// Collectives and memory operations are enqueued in order on an internal stream; the Pendings
// the collectives return finish once the work is enqueued (or failed to be). fence() finishes
// when everything enqueued so far has completed on the device.
class DeviceCollectives : public Collectives {
 public:
  virtual int32_t device() const = 0;
  // The stream fusion buffers of this plane are used on (the allocator's key).
  virtual void* stream() const = 0;
  virtual MemoryOps& memory() = 0;
  // Orders the work enqueued next after `marker` (null: nothing to wait for).
  virtual Status waitFor(StreamMarker* marker) = 0;
  // Makes the caller's `stream` wait for everything enqueued so far.
  virtual Status signal(void* stream) = 0;
  // Completes when the device finished all enqueued work; asynchronous backend errors (a peer
  // failed, a communicator aborted) finish it with kBackend instead of hanging.
  virtual PendingPtr fence() = 0;
  // Aborts the backend communicator now: every later call fails with kBackend (`why`), and
  // destruction waits neither for the device nor for the peers. For an aborted hcoll
  // communicator, and after a local failure that may have put this rank out of step.
  virtual void abort(const Status& why) = 0;
};

// A device backend of this build.
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  // Whether a device is usable in this process (false without a GPU; never crashes).
  virtual bool available() = 0;
  // On the submitting thread: marks `stream` of `device` (kUnsupported/kBackend on failure).
  virtual Status mark(int32_t device, void* stream, StreamMarkerPtr* out) = 0;
  // On the submitting thread: kUnsupported when this backend cannot reduce `dtype` (checked at
  // submission, so that the call fails at once rather than its request later).
  virtual Status checkReduction(DataType dtype) const = 0;
  // On the submitting thread: kInvalidArgument when `data` (non-null) is not memory a collective
  // on `device` can use (ordinary host memory, another device's): given to NCCL it would be an
  // illegal address, a sticky error that ends every later CUDA call of the process.
  virtual Status checkMemory(int32_t device, const void* data) const {
    (void)device;
    (void)data;
    return Status::ok();
  }
  // Collective over `control`: every member calls it at the same point of the same response.
  virtual Status create(Channel& control, int32_t device,
                        std::unique_ptr<DeviceCollectives>* out) = 0;
  // Device memory for runtime-owned outputs (null when it cannot be allocated).
  virtual void* allocate(int32_t device, size_t bytes) = 0;
  virtual void release(int32_t device, void* ptr) = 0;
};

// The device backend this library was built with; null when none was built.
DeviceBackend* deviceBackend();
// Unit tests only (the executor's device paths without a GPU): makes deviceBackend() answer
// `backend` (null: the built one again); returns the previous replacement.
DeviceBackend* setDeviceBackendForTesting(DeviceBackend* backend);

}  // namespace hcoll::backends
