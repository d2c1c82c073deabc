// Where a batch runs and how long its steps may take (executor_internal.h): the host plane on the
// communicator's thread, device planes on their streams, each data phase under the stall bound.
#include "runtime/bounded_wait.h"
#include "runtime/executor_internal.h"

namespace hcoll::runtime {

using executor_detail::abortPlaneAfterFailure;

namespace {

// What a data-plane wait says when it gives up: a peer stopped in the middle of an operation
// every rank agreed to run.
class DataReport final : public BoundedWait::Report {
 public:
  DataReport(int rank, const Liveness& liveness) : rank_(rank), liveness_(liveness) {}
  Status stalled(double waited) override {
    return Status(Code::kTimeout, "timed out after " + std::to_string(static_cast<int>(waited)) +
                                      " s in the data phase of a collective on rank " +
                                      std::to_string(rank_) +
                                      ": a peer stopped taking part (it is stuck or has exited). "
                                      "The communicator is unusable from now on");
  }
  Status closeBoundPassed(double) override {
    return shutDown("closing the communicator: a collective in its data phase did not "
                    "complete within " +
                    std::to_string(static_cast<int>(liveness_.closeTimeoutSeconds())) +
                    " s (a peer is stuck or has exited); closed locally on rank " +
                    std::to_string(rank_));
  }

 private:
  int rank_;
  const Liveness& liveness_;
};

}  // namespace

Status Executor::waitData(backends::PendingPtr pending) {
  if (!failure_.isOk()) return failure_;
  DataReport report(rank_, liveness_);
  // Given up on (or failed), the step is kept by the wait: MPI or the device may still complete
  // it. Its buffers are the batch's, kept by the caller (a fusion lease is abandoned).
  Status s = wait_.wait(pending, report, BoundedWait::Options{});
  if (wait_.gaveUp() || abort_.load()) {
    failure_ = s.isOk() ? shutDown("the communicator was aborted") : s;
    return failure_;
  }
  return s;
}

Status Executor::planeFor(const std::vector<Item>& items, Plane* out) {
  for (const Item& it : items) {
    if (it.op) return planeFor(it.op->inputs[it.member].device, out);
  }
  // A joined rank has no tensor: it contributes on a device plane it already has, else on the
  // ordinal rank 0 announced.
  const int32_t announced = items[0].response->spec.device;
  if (announced == kHostDevice || devices_.empty()) return planeFor(announced, out);
  return planeFor(devices_.begin()->first, out);
}

Status Executor::planeFor(int32_t device, Plane* out) {
  if (device == kHostDevice) {
    *out = Plane{&channel_, &backends::hostMemoryOps(), nullptr, fusion::BufferKey{}};
    return Status::ok();
  }
  auto it = devices_.find(device);
  if (it == devices_.end()) {
    backends::DeviceBackend* backend = backends::deviceBackend();
    if (backend == nullptr) {
      return Status(Code::kUnsupported,
                    "CUDA tensors need the NCCL backend, which this build lacks");
    }
    std::unique_ptr<backends::DeviceCollectives> created;
    HCOLL_RETURN_IF_ERROR(backend->create(channel_, device, &created));
    it = devices_.emplace(device, std::move(created)).first;
  }
  backends::DeviceCollectives* d = it->second.get();
  *out = Plane{d, &d->memory(), d, fusion::BufferKey{device, d->stream()}};
  return Status::ok();
}

Status Executor::beginPlane(const Plane& plane, const std::vector<Item>& items) {
  if (plane.device == nullptr) return Status::ok();
  for (const Item& it : items) {
    if (it.op && it.member < it.op->markers.size()) {
      HCOLL_RETURN_IF_ERROR(plane.device->waitFor(it.op->markers[it.member].get()));
    }
  }
  return Status::ok();
}

Status Executor::endPlane(const Plane& plane, const std::vector<Item>& items) {
  if (plane.device == nullptr) return Status::ok();
  Status signalled;
  void* last = nullptr;
  bool any = false;
  for (const Item& it : items) {
    if (!it.op) continue;
    void* stream = it.op->inputs[it.member].stream;
    if (any && stream == last) continue;
    if (signalled.isOk()) signalled = plane.device->signal(stream);
    last = stream;
    any = true;
  }
  // The request completes when the device finished: hcoll_test/wait report device completion.
  // Fenced even after a failed signal: the device may still use the batch's buffers.
  Status fenced = waitData(plane.device->fence());
  if (!fenced.isOk() && plane.scratch != nullptr) plane.scratch->abandon();
  return signalled.isOk() ? fenced : signalled;
}

}  // namespace hcoll::runtime
