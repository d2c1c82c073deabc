// The executor's per-kind steps (executor_internal.h): pack the members, call the backend, unpack
// into the outputs (caller-provided or from the output pool), for every operation kind.
#include <algorithm>
#include <cstring>

#include "runtime/executor_internal.h"

namespace hcoll::runtime {

using executor_detail::averagedPostscale;
using executor_detail::callerOutput;
using executor_detail::memberOutput;
using executor_detail::overlaps;

namespace executor_detail {

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

// Member m's caller-provided output (*_into) for a result of `shape`. The coordinator (or the
// response cache's match) already refused outputs of another size; this re-check only guards the
// caller's buffer against a bug: an output that does not fit is never written.
Status callerOutput(LocalOp& op, size_t m, const Shape& shape, void** data) {
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

Status memberOutput(LocalOp& op, size_t m, const Shape& shape, void** data) {
  if (!op.outputs.empty()) return callerOutput(op, m, shape, data);
  return op.request->addOutput(op.spec.members[m].dtype, shape, op.spec.device,
                               op.inputs[m].stream, data);
}

}  // namespace executor_detail

Status Executor::allreduceBatch(const Plane& plane, const std::vector<Item>& items) {
  const OpSpec& spec = items[0].response->spec;
  const DataType dtype = items[0].dtype();
  const size_t elementSize = dataTypeSize(dtype);
  const double postscale = averagedPostscale(spec, size_);
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
    // (Adasum reduces in place only.)
    if (spec.prescale == 1.0 && it.input().data != buffer && spec.op != ReduceOp::kAdasum) {
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
  backends::PendingPtr reduction;
  if (spec.op == ReduceOp::kAdasum) {  // not element-wise: it needs the tensors' boundaries
    std::vector<size_t> tensorCounts;
    tensorCounts.reserve(items.size());
    for (const Item& it : items) tensorCounts.push_back(it.elements());
    reduction = plane.collectives->adasum(buffer, total, dtype, tensorCounts);
  } else {
    reduction = plane.collectives->allreduce(send, buffer, total, dtype, spec.op);
  }
  HCOLL_RETURN_IF_ERROR(submitAndWait(std::move(reduction), total * elementSize, items.size()));
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
  // What every rank gathered, rank after rank, each rank's members in order.
  const uint8_t* gathered = nullptr;
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
  {
    Scratch& scratch = *plane.scratch;
    HCOLL_RETURN_IF_ERROR(scratch.allocate(plane.key, total, config_.fusionThresholdBytes));
    uint8_t* buffer = scratch.data();
    for (const Item& it : items) {
      size_t bytes = rowsOf(it, me) * it.rowBytes();
      HCOLL_RETURN_IF_ERROR(plane.memory->copy(buffer + myOffset, it.input().data, bytes));
      myOffset += bytes;
    }
    HCOLL_RETURN_IF_ERROR(submitAndWait(
        plane.collectives->allgatherv(nullptr, perRank[me], buffer, perRank), total,
        items.size()));
    gathered = buffer;
  }
  size_t offset = 0;
  std::vector<size_t> written(items.size(), 0);
  for (size_t r = 0; r < n; ++r) {
    for (size_t k = 0; k < items.size(); ++k) {
      size_t bytes = rowsOf(items[k], r) * items[k].rowBytes();
      HCOLL_RETURN_IF_ERROR(plane.memory->copy(static_cast<uint8_t*>(items[k].output) + written[k],
                                               gathered + offset, bytes));
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
  const double postscale = averagedPostscale(spec, size_);
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
  std::vector<size_t>& sendBytes = reused_.sendBytes;
  std::vector<size_t>& recvBytes = reused_.recvBytes;
  sendBytes.assign(n, 0);
  recvBytes.assign(n, 0);
  Request::Splits received(n);
  int64_t rows = 0;
  for (size_t j = 0; j < n; ++j) {
    sendBytes[j] = static_cast<size_t>(r.splitMatrix[me * n + j]) * rowBytes;
    received[j] = r.splitMatrix[j * n + me];
    recvBytes[j] = static_cast<size_t>(received[j]) * rowBytes;
    rows += received[j];
  }
  Shape shape = local.shape;
  shape[0] = rows;
  if (op.foldedResult != nullptr) {  // the whole exchange rode in the round (executor_folded.cc)
    void* out = nullptr;
    HCOLL_RETURN_IF_ERROR(memberOutput(op, 0, shape, &out));
    HCOLL_RETURN_IF_ERROR(takeFoldedAlltoall(r, op, recvBytes, out));
    op.request->setReceivedSplits(std::move(received));
    return Status::ok();
  }
  Plane plane;
  HCOLL_RETURN_IF_ERROR(planeFor(op.inputs[0].device, &plane));
  Scratch deviceFallback;  // outlives endPlane's fence (see Plane::scratch)
  plane.scratch = &deviceFallback;
  const std::vector<Item> items{Item(&r, 0, &op)};
  Status allocated;
  std::unique_ptr<uint8_t[]> fallback;
  Status s = runOnPlane(plane, items, [&]() -> Status {
    void* out = nullptr;
    allocated = memberOutput(op, 0, shape, &out);  // *_into: never overlaps the input (C API)
    if (!allocated.isOk()) {  // still take part: the other ranks are committed to the exchange
      if (plane.device) {
        HCOLL_RETURN_IF_ERROR(deviceFallback.allocate(plane.key, rows * rowBytes + 1, 0));
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
    return submitAndWait(
        even ? plane.collectives->alltoall(op.inputs[0].data, out, sendBytes[0], n)
             : plane.collectives->alltoallv(op.inputs[0].data, sendBytes, out, recvBytes),
        total, 1);
  });
  if (!failure_.isOk()) (void)fallback.release();  // a step given up on may still write it
  HCOLL_RETURN_IF_ERROR(s);
  op.request->setReceivedSplits(std::move(received));
  return allocated;
}

}  // namespace hcoll::runtime
