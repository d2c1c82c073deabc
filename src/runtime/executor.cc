#include "runtime/executor.h"

#include "common/op_traits.h"
#include <algorithm>
#include <cstring>
#include <mutex>
#include <new>

#include "fusion/fusion_allocator.h"
#include "fusion/pack.h"
#include "runtime/progress.h"

namespace hcoll::runtime {

struct Executor::Item {
  const Response* response = nullptr;
  size_t member = 0;
  LocalOp* op = nullptr;   // null on a joined rank that contributes zeros
  void* output = nullptr;  // allgather / reducescatter: where this rank's result goes

  const MemberSpec& spec() const { return response->spec.members[member]; }
  DataType dtype() const { return spec().dtype; }
  size_t elements() const { return static_cast<size_t>(numElements(spec().shape)); }
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

namespace {

// Whether two ready operations may share backend calls.
bool sameFusionKey(const OpSpec& a, const OpSpec& b) {
  // Responses carry rank 0's spec, so comparing devices gives the same runs on every rank.
  if (a.kind != b.kind || a.device != b.device) return false;
  if (traitsOf(a.kind).reduces) {
    return a.op == b.op && a.prescale == b.prescale && a.postscale == b.postscale;
  }
  if (a.kind == OpKind::kBroadcast) return a.root == b.root;
  return true;
}

}  // namespace

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

namespace {

// A device batch that failed on this rank may have skipped its collective, leaving this rank's
// device communicator out of step with its peers: its next call would pair with their current
// one (wrong data, or a hang). Aborting the plane makes this rank's later device collectives on
// it fail at once instead; the peers still wait for this batch until their stall shutdown.
void abortPlaneAfterFailure(backends::DeviceCollectives* device, const Status& s) {
  if (device != nullptr && !s.isOk()) device->abort(s);
}

// Memory for an output that could not be allocated, on the output's device (null on failure).
std::shared_ptr<void> fallbackMemory(int32_t device, size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (device == kHostDevice) {
    return std::shared_ptr<void>(new (std::nothrow) uint8_t[bytes],
                                 [](void* p) { delete[] static_cast<uint8_t*>(p); });
  }
  backends::DeviceBackend* backend = backends::deviceBackend();
  void* p = backend ? backend->allocate(device, bytes) : nullptr;
  return std::shared_ptr<void>(p, [backend, device](void* q) {
    if (q) backend->release(device, q);
  });
}

// Whether [a, a + aBytes) and [b, b + bBytes) share a byte (empty ranges never do).
bool overlaps(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  const auto x = reinterpret_cast<uintptr_t>(a);
  const auto y = reinterpret_cast<uintptr_t>(b);
  return aBytes != 0 && bBytes != 0 && x < y + bBytes && y < x + aBytes;
}

// Member m's caller-provided output (*_into) for a result of `shape`. The coordinator (or the
// response cache's match) already refused outputs of another size; this re-check only guards the
// caller's buffer against a bug: an output that does not fit is never written.
Status callerOutput(LocalOp& op, size_t m, const std::vector<int64_t>& shape, void** data) {
  const TensorDesc& out = op.outputs[m];
  const bool fits =
      op.spec.kind == OpKind::kAlltoall ? out.shape[0] >= shape[0] : out.shape[0] == shape[0];
  if (!fits) {
    return internalError("output " + std::to_string(m) + " of '" + op.spec.name + "' has dim0 " +
                         std::to_string(out.shape[0]) + ", the result " + std::to_string(shape[0]) +
                         " rows; not written");
  }
  *data = out.data;
  op.request->addCallerOutput(out.dtype, shape, out.device, out.stream, out.data);
  return Status::ok();
}

}  // namespace

Executor::Executor(backends::Channel& channel, const Config& config, Liveness& liveness,
                   const std::atomic<bool>& closeRequested, const std::atomic<bool>& abort,
                   CommStats& stats, Finish finish)
    : channel_(channel),
      config_(config),
      liveness_(liveness),
      closeRequested_(closeRequested),
      abort_(abort),
      stats_(stats),
      finish_(std::move(finish)),
      rank_(channel.rank()),
      size_(channel.size()) {}

Executor::~Executor() {
  if (!abort_.load()) return;
  for (auto& entry : devices_) entry.second->abort(shutDown("the communicator was aborted"));
}

void Executor::recordExecution(const std::vector<const LocalOp*>& ops, OpKind kind, size_t tensors,
                               std::chrono::steady_clock::time_point start) {
  const auto end = std::chrono::steady_clock::now();
  const std::string args = std::string(R"({"kind":")") + opKindName(kind) +
                           R"(","tensors_in_call":)" + std::to_string(tensors) + "}";
  const LocalOp* previous = nullptr;
  for (const LocalOp* op : ops) {
    if (op == nullptr || op == previous) continue;  // joined ranks have no op; members repeat
    timeline_->tensorSpan(timelineTrack_, op->spec.name, "EXECUTE", start, end, args);
    previous = op;
  }
}

Status Executor::submitAndWait(backends::PendingPtr pending, size_t bytes, size_t tensors) {
  stats_.backendCalls.fetch_add(1, std::memory_order_relaxed);
  stats_.bytes.fetch_add(bytes, std::memory_order_relaxed);
  if (tensors > 1) stats_.fusedTensors.fetch_add(tensors, std::memory_order_relaxed);
  return waitData(std::move(pending));
}

namespace {

// Data-plane steps given up on, kept until the process exits: MPI (or the device) may still
// complete them and use their buffers. Reachable, so not a leak to LeakSanitizer.
void keepForever(backends::PendingPtr pending) {
  static std::mutex* mutex = new std::mutex();
  static auto* kept = new std::vector<backends::PendingPtr>();
  std::lock_guard<std::mutex> lock(*mutex);
  kept->push_back(std::move(pending));
}

}  // namespace

Status Executor::waitData(backends::PendingPtr pending) {
  if (!failure_.isOk()) return failure_;
  bool gaveUp = false;
  double closingSince = -1;
  auto onSlow = [&](double waited) -> Status {
    Status verdict = liveness_.poll();
    if (verdict.isOk() && closingSince < 0 && closeRequested_.load()) closingSince = waited;
    const double stall = liveness_.stallShutdownSeconds();
    if (verdict.isOk() && stall > 0 && waited >= stall) {
      verdict = Status(Code::kTimeout,
                       "timed out after " + std::to_string(static_cast<int>(waited)) +
                           " s in the data phase of a collective on rank " +
                           std::to_string(rank_) +
                           ": a peer stopped taking part (it is stuck or has exited). The "
                           "communicator is unusable from now on");
    }
    if (verdict.isOk() && closingSince >= 0 &&
        waited - closingSince >= liveness_.closeTimeoutSeconds()) {
      verdict = shutDown("closing the communicator: a collective in its data phase did not "
                         "complete within " +
                         std::to_string(static_cast<int>(liveness_.closeTimeoutSeconds())) +
                         " s (a peer is stuck or has exited); closed locally on rank " +
                         std::to_string(rank_));
    }
    gaveUp = !verdict.isOk();
    return verdict;
  };
  Status s = waitFor(*pending, dataPlanePolicy(), abort_, onSlow);
  if (gaveUp || abort_.load()) {
    failure_ = s.isOk() ? shutDown("the communicator was aborted") : s;
    keepForever(std::move(pending));
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

void Executor::execute(const std::vector<ResponsePtr>& responses, PendingOps& pending) {
  size_t i = 0;
  while (i < responses.size()) {
    const Response& r = *responses[i];
    if (r.error != Code::kSuccess) {
      if (auto op = pending.take(r.spec.name))
        finish_(std::move(op), Status(r.error, r.errorMessage));
      ++i;
      continue;
    }
    if (traitsOf(r.spec.kind).fusible) {
      std::vector<const Response*> run{&r};
      while (++i < responses.size() && responses[i]->error == Code::kSuccess &&
             sameFusionKey(responses[i]->spec, r.spec)) {
        run.push_back(responses[i].get());
      }
      runFusible(run, pending);
      continue;
    }
    ++i;
    std::unique_ptr<LocalOp> op = pending.take(r.spec.name);
    const auto start = std::chrono::steady_clock::now();
    Status s;
    switch (r.spec.kind) {
      case OpKind::kAlltoall:
        s = op ? alltoall(r, *op) : internalError("alltoall without a local operation");
        break;
      case OpKind::kBarrier:
        s = submitAndWait(channel_.barrier(), 0, 1);
        break;
      case OpKind::kJoin:
        if (op) {
          void* data = nullptr;
          s = op->request->addOutput(DataType::kInt32, {}, kHostDevice, nullptr, &data);
          if (s.isOk()) *static_cast<int32_t*>(data) = r.lastJoinedRank;
        }
        break;
      default:
        s = commOp(r, op.get());
        break;
    }
    if (timeline_) recordExecution({op.get()}, r.spec.kind, 1, start);
    if (op) finish_(std::move(op), s);
  }
}

void Executor::runFusible(const std::vector<const Response*>& run, PendingOps& pending) {
  const OpKind kind = run[0]->spec.kind;
  std::vector<LocalOp*> ops;
  std::vector<Item> items;
  std::vector<std::shared_ptr<void>> fallbackOutputs;
  std::vector<Status> statuses(run.size());
  ops.reserve(run.size());
  size_t memberCount = 0;
  for (const Response* r : run) memberCount += r->spec.members.size();
  items.reserve(memberCount);
  for (size_t k = 0; k < run.size(); ++k) {
    LocalOp* op = pending.find(run[k]->spec.name);
    ops.push_back(op);
    for (size_t m = 0; m < run[k]->spec.members.size(); ++m) {
      Item item{run[k], m, op, nullptr};
      if (op && (kind == OpKind::kAllgather || kind == OpKind::kReducescatter)) {
        // Outputs are allocated in member order; the collective runs even if that failed,
        // into scratch memory, because the other ranks are already committed to it.
        std::vector<int64_t> shape = item.spec().shape;
        const size_t n = static_cast<size_t>(size_);
        if (kind == OpKind::kAllgather) {
          shape[0] = 0;
          for (size_t r = 0; r < n; ++r) shape[0] += run[k]->dim0PerRank[m * n + r];
        } else {
          shape[0] = scatterRows(shape[0], size_, rank_);
        }
        Status s;
        if (!op->outputs.empty()) {  // *_into: the caller's tensor, sized in negotiation
          s = callerOutput(*op, m, shape, &item.output);
        } else {
          s = op->request->addOutput(item.dtype(), shape, op->spec.device, op->inputs[m].stream,
                                     &item.output);
        }
        if (!s.isOk()) {
          if (statuses[k].isOk()) statuses[k] = s;
          size_t bytes = static_cast<size_t>(numElements(shape)) * dataTypeSize(item.dtype());
          fallbackOutputs.push_back(fallbackMemory(op->inputs[m].device, bytes));
          item.output = fallbackOutputs.back().get();
        }
      }
      items.push_back(item);
    }
  }
  auto byDtype = [](const Item& a, const Item& b) { return a.dtype() < b.dtype(); };
  // A fusion buffer holds one dtype: group members by dtype (usually they already are, and
  // stable_sort would allocate a temporary copy of every item even then).
  if (traitsOf(kind).reduces && !std::is_sorted(items.begin(), items.end(), byDtype)) {
    std::stable_sort(items.begin(), items.end(), byDtype);
  }

  auto itemBytes = [&](const Item& it) -> size_t {
    if (kind != OpKind::kAllgather) return it.elements() * dataTypeSize(it.dtype());
    size_t total = 0;
    for (int r = 0; r < size_; ++r) {
      total += static_cast<size_t>(it.response->dim0PerRank[it.member * size_ + r]) * it.rowBytes();
    }
    return total;
  };
  const size_t threshold = config_.fusionThresholdBytes;
  std::vector<Item> batch;
  size_t batchBytes = 0;
  auto flush = [&] {
    if (batch.empty()) return;
    const auto start = std::chrono::steady_clock::now();
    Status s = runBatch(kind, batch);
    if (timeline_) {
      std::vector<const LocalOp*> batchOps;
      for (const Item& it : batch) batchOps.push_back(it.op);
      recordExecution(batchOps, kind, batch.size(), start);
    }
    if (!s.isOk()) {
      for (const Item& it : batch) {
        auto k = std::find(run.begin(), run.end(), it.response) - run.begin();
        if (statuses[k].isOk()) statuses[k] = s;
      }
    }
    batch.clear();
    batchBytes = 0;
  };
  for (const Item& it : items) {
    size_t bytes = itemBytes(it);
    bool fits = batchBytes + bytes <= threshold &&
                (batch.empty() || !traitsOf(kind).reduces || batch[0].dtype() == it.dtype());
    if (!fits) flush();
    batch.push_back(it);
    batchBytes += bytes;
  }
  flush();

  for (size_t k = 0; k < run.size(); ++k) {
    if (ops[k] != nullptr) finish_(pending.take(run[k]->spec.name), statuses[k]);
  }
}

Status Executor::runBatch(OpKind kind, const std::vector<Item>& items) {
  Plane plane;
  HCOLL_RETURN_IF_ERROR(planeFor(items, &plane));
  Scratch scratch;  // outlives endPlane's fence (see Plane::scratch)
  plane.scratch = &scratch;
  Status s = beginPlane(plane, items);
  if (!s.isOk()) {
    abortPlaneAfterFailure(plane.device, s);
    return s;
  }
  switch (kind) {
    case OpKind::kAllreduce:
      s = allreduceBatch(plane, items);
      break;
    case OpKind::kAllgather:
      s = allgatherBatch(plane, items);
      break;
    case OpKind::kBroadcast:
      s = broadcastBatch(plane, items);
      break;
    case OpKind::kReducescatter:
      s = reducescatterBatch(plane, items);
      break;
    default:
      return internalError("not a fusible operation");
  }
  // Device work may still read scratch buffers of the batch: always wait for it to finish.
  Status ended = endPlane(plane, items);
  abortPlaneAfterFailure(plane.device, s.isOk() ? ended : s);
  if (!failure_.isOk()) scratch.abandon();  // a step given up on may still write it
  return s.isOk() ? ended : s;
}

Status Executor::allreduceBatch(const Plane& plane, const std::vector<Item>& items) {
  const OpSpec& spec = items[0].response->spec;
  const DataType dtype = items[0].dtype();
  const size_t elementSize = dataTypeSize(dtype);
  const double postscale = spec.postscale * (spec.op == ReduceOp::kAverage ? 1.0 / size_ : 1.0);
  size_t total = 0;
  for (const Item& it : items) total += it.elements();
  if (total == 0) return Status::ok();

  Scratch& scratch = *plane.scratch;
  uint8_t* buffer = nullptr;
  const void* send = nullptr;  // null: reduce in place in `buffer`
  const bool direct = items.size() == 1 && items[0].op != nullptr;
  if (direct) {  // reduce into the caller's output: no fusion copy
    const Item& it = items[0];
    buffer = static_cast<uint8_t*>(it.op->outputs[it.member].data);
    if (spec.prescale == 1.0 && it.input().data != buffer) {
      send = it.input().data;  // out of place: the backend reads the input (no copy pass)
    } else {
      HCOLL_RETURN_IF_ERROR(
          plane.memory->scaleCopy(buffer, it.input().data, total, dtype, spec.prescale));
    }
  } else {
    HCOLL_RETURN_IF_ERROR(
        scratch.allocate(plane.key, total * elementSize, config_.fusionThresholdBytes));
    buffer = scratch.data();
    size_t offset = 0;
    for (const Item& it : items) {
      uint8_t* at = buffer + offset * elementSize;
      if (it.op) {
        HCOLL_RETURN_IF_ERROR(
            plane.memory->scaleCopy(at, it.input().data, it.elements(), dtype, spec.prescale));
      } else {  // a joined rank contributes zeros
        HCOLL_RETURN_IF_ERROR(plane.memory->zero(at, it.elements() * elementSize));
      }
      offset += it.elements();
    }
  }
  HCOLL_RETURN_IF_ERROR(
      submitAndWait(plane.collectives->allreduce(send, buffer, total, dtype, spec.op),
                    total * elementSize, items.size()));
  size_t offset = 0;
  for (const Item& it : items) {
    if (it.op) {
      void* out = it.op->outputs[it.member].data;
      const uint8_t* result = buffer + offset * elementSize;
      // Skipped when the result already is the output, unscaled (no pass, no device launch).
      if (out != result || postscale != 1.0) {
        HCOLL_RETURN_IF_ERROR(
            plane.memory->scaleCopy(out, result, it.elements(), dtype, postscale));
      }
      if (dtype == DataType::kBool) {
        HCOLL_RETURN_IF_ERROR(plane.memory->normalizeBool(out, it.elements()));
      }
    }
    offset += it.elements();
  }
  return Status::ok();
}

Status Executor::allgatherBatch(const Plane& plane, const std::vector<Item>& items) {
  const size_t n = static_cast<size_t>(size_);
  auto rowsOf = [&](const Item& it, size_t r) {
    return static_cast<size_t>(it.response->dim0PerRank[it.member * n + r]);
  };
  std::vector<size_t> perRank(n, 0);
  for (const Item& it : items) {
    for (size_t r = 0; r < n; ++r) perRank[r] += rowsOf(it, r) * it.rowBytes();
  }
  size_t total = 0;
  for (size_t b : perRank) total += b;
  if (total == 0) return Status::ok();
  const size_t me = static_cast<size_t>(rank_);

  size_t myOffset = 0;
  for (size_t r = 0; r < me; ++r) myOffset += perRank[r];
  if (items.size() == 1) {  // straight from the input into the output
    const Item& it = items[0];
    const void* in = it.input().data;
    auto* out = static_cast<uint8_t*>(it.output);
    // A caller's output (*_into) may hold the input: at this rank's own block it is in place
    // (MPI_IN_PLACE); anywhere else it is staged through scratch below, as a fused batch is.
    if (in == out + myOffset) in = nullptr;
    if (in == nullptr || !overlaps(in, perRank[me], out, total)) {
      return submitAndWait(plane.collectives->allgatherv(in, perRank[me], out, perRank), total, 1);
    }
  }
  Scratch& scratch = *plane.scratch;
  HCOLL_RETURN_IF_ERROR(scratch.allocate(plane.key, total, config_.fusionThresholdBytes));
  uint8_t* buffer = scratch.data();
  for (const Item& it : items) {
    size_t bytes = rowsOf(it, me) * it.rowBytes();
    HCOLL_RETURN_IF_ERROR(plane.memory->copy(buffer + myOffset, it.input().data, bytes));
    myOffset += bytes;
  }
  HCOLL_RETURN_IF_ERROR(submitAndWait(
      plane.collectives->allgatherv(nullptr, perRank[me], buffer, perRank), total, items.size()));
  size_t offset = 0;
  std::vector<size_t> written(items.size(), 0);
  for (size_t r = 0; r < n; ++r) {
    for (size_t k = 0; k < items.size(); ++k) {
      size_t bytes = rowsOf(items[k], r) * items[k].rowBytes();
      HCOLL_RETURN_IF_ERROR(plane.memory->copy(static_cast<uint8_t*>(items[k].output) + written[k],
                                               buffer + offset, bytes));
      written[k] += bytes;
      offset += bytes;
    }
  }
  return Status::ok();
}

Status Executor::broadcastBatch(const Plane& plane, const std::vector<Item>& items) {
  const int root = items[0].response->spec.root;
  size_t total = 0;
  for (const Item& it : items) total += it.elements() * dataTypeSize(it.dtype());
  if (total == 0) return Status::ok();
  if (items.size() == 1) {
    return submitAndWait(plane.collectives->broadcast(items[0].input().data, total, root), total,
                         1);
  }
  Scratch& scratch = *plane.scratch;
  HCOLL_RETURN_IF_ERROR(scratch.allocate(plane.key, total, config_.fusionThresholdBytes));
  uint8_t* buffer = scratch.data();
  size_t offset = 0;
  if (rank_ == root) {
    for (const Item& it : items) {
      size_t bytes = it.elements() * dataTypeSize(it.dtype());
      HCOLL_RETURN_IF_ERROR(plane.memory->copy(buffer + offset, it.input().data, bytes));
      offset += bytes;
    }
  }
  HCOLL_RETURN_IF_ERROR(
      submitAndWait(plane.collectives->broadcast(buffer, total, root), total, items.size()));
  if (rank_ != root) {
    for (const Item& it : items) {
      size_t bytes = it.elements() * dataTypeSize(it.dtype());
      HCOLL_RETURN_IF_ERROR(plane.memory->copy(it.input().data, buffer + offset, bytes));
      offset += bytes;
    }
  }
  return Status::ok();
}

Status Executor::reducescatterBatch(const Plane& plane, const std::vector<Item>& items) {
  const OpSpec& spec = items[0].response->spec;
  const DataType dtype = items[0].dtype();
  const size_t elementSize = dataTypeSize(dtype);
  const double postscale = spec.postscale * (spec.op == ReduceOp::kAverage ? 1.0 / size_ : 1.0);
  const size_t n = static_cast<size_t>(size_);
  // Rank-major layout: rank 0's rows of every item, then rank 1's, ...
  std::vector<size_t> counts(n, 0);
  for (const Item& it : items) {
    const int64_t d0 = it.spec().shape[0];
    const size_t row = static_cast<size_t>(rowElements(it.spec().shape));
    for (int r = 0; r < size_; ++r)
      counts[r] += static_cast<size_t>(scatterRows(d0, size_, r)) * row;
  }
  size_t total = 0;
  for (size_t c : counts) total += c;
  if (total == 0) return Status::ok();
  const size_t mine = counts[rank_];

  // A caller's output (*_into) that overlaps its input is staged through scratch like a batch.
  const bool direct =
      items.size() == 1 && spec.prescale == 1.0 &&
      !overlaps(items[0].input().data, total * elementSize, items[0].output, mine * elementSize);
  Scratch& scratch = *plane.scratch;
  uint8_t* recv = nullptr;
  const void* send = nullptr;
  if (direct) {
    send = items[0].input().data;
    recv = static_cast<uint8_t*>(items[0].output);
  } else {
    HCOLL_RETURN_IF_ERROR(
        scratch.allocate(plane.key, (total + mine) * elementSize, config_.fusionThresholdBytes));
    uint8_t* buffer = scratch.data();
    size_t offset = 0;
    for (int r = 0; r < size_; ++r) {
      for (const Item& it : items) {
        const int64_t d0 = it.spec().shape[0];
        const size_t row = static_cast<size_t>(rowElements(it.spec().shape));
        const size_t count = static_cast<size_t>(scatterRows(d0, size_, r)) * row;
        const auto* src = static_cast<const uint8_t*>(it.input().data) +
                          static_cast<size_t>(scatterOffset(d0, size_, r)) * row * elementSize;
        HCOLL_RETURN_IF_ERROR(plane.memory->scaleCopy(buffer + offset * elementSize, src, count,
                                                      dtype, spec.prescale));
        offset += count;
      }
    }
    send = buffer;
    recv = buffer + total * elementSize;
  }
  HCOLL_RETURN_IF_ERROR(
      submitAndWait(plane.collectives->reduceScatter(send, recv, counts, dtype, spec.op),
                    total * elementSize, items.size()));
  size_t offset = 0;
  for (const Item& it : items) {
    const size_t count = static_cast<size_t>(scatterRows(it.spec().shape[0], size_, rank_) *
                                             rowElements(it.spec().shape));
    HCOLL_RETURN_IF_ERROR(
        plane.memory->scaleCopy(it.output, recv + offset * elementSize, count, dtype, postscale));
    if (dtype == DataType::kBool)
      HCOLL_RETURN_IF_ERROR(plane.memory->normalizeBool(it.output, count));
    offset += count;
  }
  return Status::ok();
}

Status Executor::alltoall(const Response& r, LocalOp& op) {
  const size_t n = static_cast<size_t>(size_);
  const size_t me = static_cast<size_t>(rank_);
  const MemberSpec& local = op.spec.members[0];
  const size_t rowBytes = static_cast<size_t>(rowElements(local.shape)) * dataTypeSize(local.dtype);
  std::vector<size_t> sendBytes(n), recvBytes(n);
  std::vector<int64_t> received(n);
  int64_t rows = 0;
  for (size_t j = 0; j < n; ++j) {
    sendBytes[j] = static_cast<size_t>(r.splitMatrix[me * n + j]) * rowBytes;
    received[j] = r.splitMatrix[j * n + me];
    recvBytes[j] = static_cast<size_t>(received[j]) * rowBytes;
    rows += received[j];
  }
  std::vector<int64_t> shape = local.shape;
  shape[0] = rows;
  Plane plane;
  HCOLL_RETURN_IF_ERROR(planeFor(op.inputs[0].device, &plane));
  Scratch deviceFallback;  // outlives endPlane's fence (see Plane::scratch)
  plane.scratch = &deviceFallback;
  const std::vector<Item> items{Item{&r, 0, &op, nullptr}};
  Status begun = beginPlane(plane, items);
  abortPlaneAfterFailure(plane.device, begun);
  HCOLL_RETURN_IF_ERROR(begun);
  void* out = nullptr;
  Status allocated =
      op.outputs.empty()
          ? op.request->addOutput(local.dtype, shape, op.spec.device, op.inputs[0].stream, &out)
          : callerOutput(op, 0, shape, &out);  // *_into: never overlaps the input (C API)
  std::unique_ptr<uint8_t[]> fallback;
  if (!allocated.isOk()) {  // still take part: the other ranks are committed to the exchange
    if (plane.device) {
      Status s = deviceFallback.allocate(plane.key, rows * rowBytes + 1, 0);
      abortPlaneAfterFailure(plane.device, s);
      HCOLL_RETURN_IF_ERROR(s);
      out = deviceFallback.data();
    } else {
      fallback.reset(new (std::nothrow) uint8_t[rows * rowBytes + 1]);
      out = fallback.get();
    }
  }
  size_t total = 0;
  for (size_t b : sendBytes) total += b;
  // The whole matrix (the same on every rank) decides, so every rank takes the same path.
  const bool even = std::all_of(r.splitMatrix.begin(), r.splitMatrix.end(),
                                [&](int64_t v) { return v == r.splitMatrix[0]; });
  Status s = submitAndWait(
      even ? plane.collectives->alltoall(op.inputs[0].data, out, sendBytes[0], n)
           : plane.collectives->alltoallv(op.inputs[0].data, sendBytes, out, recvBytes),
      total, 1);
  Status ended = endPlane(plane, items);
  abortPlaneAfterFailure(plane.device, s.isOk() ? ended : s);
  if (!failure_.isOk()) {  // a step given up on may still write these
    deviceFallback.abandon();
    (void)fallback.release();
  }
  HCOLL_RETURN_IF_ERROR(s);
  HCOLL_RETURN_IF_ERROR(ended);
  op.request->setReceivedSplits({std::move(received)});
  return allocated;
}

Status Executor::commOp(const Response& r, LocalOp* op) {
  if (op == nullptr) return internalError("communicator operation without a local operation");
  std::unique_ptr<backends::Channel> channel;
  Status s = r.spec.kind == OpKind::kCommSplit
                 ? channel_.split(op->spec.color, op->spec.key, &channel)
                 : channel_.create(op->spec.ranks, &channel);
  if (s.isOk()) op->request->setNewChannel(std::move(channel));
  return s;
}

}  // namespace hcoll::runtime
