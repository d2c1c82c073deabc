#include "runtime/executor.h"

#include <algorithm>

#include "common/op_traits.h"
#include "runtime/batch_plan.h"
#include "runtime/executor_internal.h"

namespace hcoll::runtime {

using executor_detail::memberOutput;
using executor_detail::fallbackMemory;

Executor::Executor(backends::Channel& channel, const Config& config, Liveness& liveness,
                   const std::atomic<bool>& closeRequested, const std::atomic<bool>& abort,
                   CommStats& stats, Finish finish)
    : channel_(channel),
      config_(config),
      liveness_(liveness),
      abort_(abort),
      wait_(liveness, abort, dataPlanePolicy()),
      stats_(stats),
      finish_(std::move(finish)),
      rank_(channel.rank()),
      size_(channel.size()) {
  wait_.watchCloseRequests(closeRequested);
}

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
  stats_.backendCalls.add(1);
  stats_.bytes.add(bytes);
  if (tensors > 1) stats_.fusedTensors.add(tensors);
  return waitData(std::move(pending));
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
      std::vector<const Response*>& run = reused_.run;
      run.assign(1, &r);
      while (++i < responses.size() && responses[i]->error == Code::kSuccess &&
             sameFusionKey(responses[i]->spec, r.spec)) {
        run.push_back(responses[i].get());
      }
      runFusible(run, pending);
      continue;
    }
    ++i;
    std::unique_ptr<LocalOp> op = pending.take(r.spec.name);
    const bool timed = timeline_ && timeline_->active();
    const auto start = timed ? std::chrono::steady_clock::now()
                             : std::chrono::steady_clock::time_point{};
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
      default:  // communicator creation runs in the communicator (Communicator::execute)
        s = internalError(std::string("the executor cannot run ") + opKindName(r.spec.kind));
        break;
    }
    if (timed) recordExecution({op.get()}, r.spec.kind, 1, start);
    if (op) finish_(std::move(op), s);
  }
}

void Executor::runFusible(const std::vector<const Response*>& run, PendingOps& pending) {
  const OpKind kind = run[0]->spec.kind;
  std::vector<LocalOp*>& ops = reused_.ops;
  std::vector<Item>& items = reused_.items;
  std::vector<Status>& statuses = reused_.statuses;
  ops.clear();
  items.clear();
  statuses.assign(run.size(), Status::ok());
  std::vector<std::shared_ptr<void>> fallbackOutputs;
  ops.reserve(run.size());
  size_t memberCount = 0;
  for (const Response* r : run) memberCount += r->spec.members.size();
  items.reserve(memberCount);
  const bool outputsPerMember = kind == OpKind::kAllgather || kind == OpKind::kReducescatter;
  for (size_t k = 0; k < run.size(); ++k) {
    LocalOp* op = pending.find(run[k]->spec.name);
    ops.push_back(op);
    if (op && outputsPerMember) op->request->reserveOutputs(run[k]->spec.members.size());
    for (size_t m = 0; m < run[k]->spec.members.size(); ++m) {
      Item item(run[k], m, op);
      if (op && outputsPerMember) {
        // Outputs are allocated in member order; the collective runs even if that failed,
        // into scratch memory, because the other ranks are already committed to it.
        Shape shape = item.spec().shape;
        const size_t n = static_cast<size_t>(size_);
        if (kind == OpKind::kAllgather) {
          shape[0] = 0;
          for (size_t r = 0; r < n; ++r) shape[0] += run[k]->dim0PerRank[m * n + r];
        } else {
          shape[0] = scatterRows(shape[0], size_, rank_);
        }
        // (*_into: the caller's tensor, sized in negotiation.)
        Status s = memberOutput(*op, m, shape, &item.output);
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

  // The batches: every rank cuts the same ones, from the negotiated sizes.
  auto bytesOf = [&](size_t i) {
    const Item& it = items[i];
    if (kind != OpKind::kAllgather) return it.elements() * dataTypeSize(it.dtype());
    size_t bytes = 0;  // the assembled output, every rank's rows
    for (int r = 0; r < size_; ++r) {
      bytes += static_cast<size_t>(it.response->dim0PerRank[it.member * size_ + r]) *
               it.rowBytes();
    }
    return bytes;
  };
  auto dtypeOf = [&](size_t i) { return items[i].dtype(); };
  std::vector<Item>& batch = reused_.batch;
  planBatches(items.size(), bytesOf, dtypeOf, traitsOf(kind).reduces,
              config_.fusionThresholdBytes, &reused_.batches);
  for (auto [begin, end] : reused_.batches) {
    batch.assign(items.begin() + begin, items.begin() + end);
    const bool timed = timeline_ && timeline_->active();
    const auto start = timed ? std::chrono::steady_clock::now()
                             : std::chrono::steady_clock::time_point{};
    Status s = runBatch(kind, batch);
    if (timed) {
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
  }

  for (size_t k = 0; k < run.size(); ++k) {
    if (ops[k] != nullptr) finish_(pending.take(run[k]->spec.name), statuses[k]);
  }
}

Status Executor::runBatch(OpKind kind, const std::vector<Item>& items) {
  for (const Item& it : items) {  // (execute() takes those: never here)
    if (it.op != nullptr && it.op->foldedResult != nullptr) {
      return internalError("a folded operation in a batch");
    }
  }
  Plane plane;
  HCOLL_RETURN_IF_ERROR(planeFor(items, &plane));
  Scratch scratch;  // outlives endPlane's fence (see Plane::scratch)
  plane.scratch = &scratch;
  return runOnPlane(plane, items, [&] {
    switch (kind) {
      case OpKind::kAllreduce:
        return allreduceBatch(plane, items);
      case OpKind::kAllgather:
        return allgatherBatch(plane, items);
      case OpKind::kBroadcast:
        return broadcastBatch(plane, items);
      case OpKind::kReducescatter:
        return reducescatterBatch(plane, items);
      default:
        return internalError("not a fusible operation");
    }
  });
}

}  // namespace hcoll::runtime
