#pragma once
// Private to the executor's three files: executor.cc (which responses run together, in which
// batches), executor_planes.cc (where a batch runs and how long its steps may take) and
// executor_kernels.cc (pack, call the backend, unpack, per kind).

#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "fusion/fusion_allocator.h"
#include "runtime/executor.h"

namespace hcoll::runtime {

struct Executor::Item {
  Item(const Response* r, size_t m, LocalOp* o)
      : response(r),
        member(m),
        op(o),
        elementCount(static_cast<size_t>(numElements(r->spec.members[m].shape))) {}
  const Response* response;
  size_t member;
  LocalOp* op;             // null on a joined rank that contributes zeros
  void* output = nullptr;  // allgather / reducescatter: where this rank's result goes
  // Computed once: the batch plan and the kernels ask for it several times per member.
  size_t elementCount;

  const MemberSpec& spec() const { return response->spec.members[member]; }
  DataType dtype() const { return spec().dtype; }
  size_t elements() const { return elementCount; }
  size_t rowBytes() const {
    return static_cast<size_t>(rowElements(spec().shape)) * dataTypeSize(dtype());
  }
  const TensorDesc& input() const { return op->inputs[member]; }
};

struct Executor::Plane {
  backends::Collectives* collectives = nullptr;
  backends::MemoryOps* memory = nullptr;
  backends::DeviceCollectives* device = nullptr;  // null on the host
  fusion::BufferKey key;                          // of its fusion buffers
  // The batch's scratch buffer, owned by the caller of beginPlane and kept until after
  // endPlane's fence: device work may use it until then, and a lease given back earlier could
  // be leased to another communicator (or freed) while the device still writes it.
  Scratch* scratch = nullptr;
};

// A temporary buffer: a pooled fusion buffer when it fits the threshold, else plain memory.
// Device memory always comes from the allocator (it does not pool buffers above the threshold).
class Executor::Scratch {
 public:
  Status allocate(const fusion::BufferKey& key, size_t bytes, size_t threshold) {
    if (bytes <= threshold || key.device != kHostDevice) {
      return fusion::FusionAllocator::instance().acquire(key, bytes, &lease_);
    }
    plain_.reset(new (std::nothrow) uint8_t[bytes == 0 ? 1 : bytes]);
    if (!plain_)
      return Status(Code::kNoMemory, "could not allocate " + std::to_string(bytes) + " bytes");
    return Status::ok();
  }
  uint8_t* data() const { return plain_ ? plain_.get() : static_cast<uint8_t*>(lease_.data()); }
  // The device (or a backend operation given up on) may still use the buffer: never pool it
  // again, never free it.
  void abandon() {
    lease_.abandon();
    (void)plain_.release();
  }

 private:
  fusion::Lease lease_;
  std::unique_ptr<uint8_t[]> plain_;
};

namespace executor_detail {

// A device batch that failed on this rank may have skipped its collective, leaving this rank's
// device communicator out of step with its peers: its next call would pair with their current
// one (wrong data, or a hang). Aborting the plane makes this rank's later device collectives on
// it fail at once instead; the peers still wait for this batch until their stall shutdown.
inline void abortPlaneAfterFailure(backends::DeviceCollectives* device, const Status& s) {
  if (device != nullptr && !s.isOk()) device->abort(s);
}

// Memory for an output that could not be allocated, on the output's device (null on failure).
std::shared_ptr<void> fallbackMemory(int32_t device, size_t bytes);

// Whether [a, a + aBytes) and [b, b + bBytes) share a byte (empty ranges never do).
inline bool overlaps(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  const auto x = reinterpret_cast<uintptr_t>(a);
  const auto y = reinterpret_cast<uintptr_t>(b);
  return aBytes != 0 && bBytes != 0 && x < y + bBytes && y < x + aBytes;
}

// Member m's caller-provided output (*_into) for a result of `shape`; refuses (never writes) an
// output of another size.
Status callerOutput(LocalOp& op, size_t m, const Shape& shape, void** data);
// Member m's output for a result of `shape`: the caller's (*_into, callerOutput) or a new one of
// the request (runtime-owned: the output pool's, or the user allocator's).
Status memberOutput(LocalOp& op, size_t m, const Shape& shape, void** data);

// The postscale factor a reduction applies: Average divides it by the size, as Horovod does (not
// x 1/size: the factor must round the same way).
inline double averagedPostscale(const OpSpec& spec, int size) {
  return spec.op == ReduceOp::kAverage ? spec.postscale / size : spec.postscale;
}

// `body`'s status, or the exception it threw as one (NO_MEMORY for std::bad_alloc, INTERNAL
// otherwise), with *threw set: a backend's scratch allocation can throw in the middle of a batch,
// and unwinding past the executor would skip the batch's end (its buffers, its failure rule).
template <typename Body>
Status statusOrException(Body&& body, bool* threw) noexcept {
  *threw = true;
  try {
    Status s = body();
    *threw = false;
    return s;
  } catch (const std::bad_alloc&) {
    return Status(Code::kNoMemory, "out of memory in the middle of a collective");
  } catch (const std::exception& e) {
    return internalError(std::string("unexpected exception in a collective: ") + e.what());
  } catch (...) {
    return internalError("unexpected exception in a collective");
  }
}

}  // namespace executor_detail

// The begin/run/end frame of every batch on a plane: orders it after its callers' streams, runs
// `body`, waits for the device (it may still read the batch's buffers, even after a failure),
// aborts a device plane this rank may have fallen out of step on, stops the communicator after a
// host backend failure, and keeps a scratch buffer that a step given up on may still write.
template <typename Body>
Status Executor::runOnPlane(const Plane& plane, const std::vector<Item>& items, Body&& body) {
  Status s = beginPlane(plane, items);
  if (!s.isOk()) {
    executor_detail::abortPlaneAfterFailure(plane.device, s);
    return s;
  }
  bool threw = false;
  s = executor_detail::statusOrException(body, &threw);
  // The host backend failed in the middle of a data phase (an MPI call returned an error, or an
  // allocation threw): this rank may have sent part of the operation's messages and not received
  // the rest, and a later operation could match what is left; or it sent nothing while its peers
  // wait for it. The communicator stops, as when a phase is given up on, and tells its peers.
  // (A device plane is aborted below instead.)
  if (plane.device == nullptr && (s.code() == Code::kBackend || threw) && failure_.isOk()) {
    failure_ = s;
  }
  Status ended = endPlane(plane, items);
  executor_detail::abortPlaneAfterFailure(plane.device, s.isOk() ? ended : s);
  if (!failure_.isOk() && plane.scratch != nullptr) plane.scratch->abandon();
  return s.isOk() ? ended : s;
}

}  // namespace hcoll::runtime
