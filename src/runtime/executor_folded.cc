// The small-message fold's results. The negotiator folds a lone cached host operation into its
// round's readiness exchange (negotiator.cc; LocalOp::foldedResult): when the fold stands, the
// round holds that one operation and its whole result is already here. What is left is local:
// unpack it into the outputs. Straight from the loop (RoundResult::folded), without execute()'s
// dispatch or the batching machinery of runFusible (a third of an 8-byte allreduce's own work
// went there), and with nothing collective left, a failure here (an output the user's allocator
// refused) is this rank's alone.
//
// Everything here is host memory (only host operations fold): results are copied and scaled
// with fusion's host routines directly, not through backends::MemoryOps (a virtual call and a
// Status per copy, ~60 instructions of an 8-byte allreduce's ~5000).

#include "common/copy_bytes.h"
#include "fusion/pack.h"
#include "runtime/executor_internal.h"

namespace hcoll::runtime {

using executor_detail::averagedPostscale;
using executor_detail::memberOutput;

void Executor::executeFolded(const Response& r, LocalOp& op, PendingOps& pending) {
  const bool timed = timeline_ && timeline_->active();
  const auto start = timed ? std::chrono::steady_clock::now()
                           : std::chrono::steady_clock::time_point{};
  Status s;
  switch (r.spec.kind) {
    case OpKind::kAllreduce:
      s = takeFoldedAllreduce(r, op);
      break;
    case OpKind::kAllgather:
      s = takeFoldedAllgather(r, op);
      break;
    case OpKind::kBroadcast:
      s = takeFoldedBroadcast(r, op);
      break;
    case OpKind::kReducescatter:
      s = takeFoldedReducescatter(r, op);
      break;
    case OpKind::kAlltoall:
      s = alltoall(r, op);  // its output and received splits are alltoall()'s either way
      break;
    default:
      s = internalError(std::string("a folded ") + opKindName(r.spec.kind));
      break;
  }
  if (timed) recordExecution({&op}, r.spec.kind, 1, start);
  if (s.isOk()) stats_.foldedOps.add(1);
  finish_(pending.take(op), s);
}

// The reduction into the caller's output, with the postscale.
Status Executor::takeFoldedAllreduce(const Response& r, const LocalOp& op) {
  if (op.outputs.size() != 1) return internalError("a folded allreduce without one output");
  const MemberSpec& member = r.spec.members[0];
  const size_t count = static_cast<size_t>(numElements(member.shape));
  void* out = op.outputs[0].data;
  fusion::scaleCopy(out, op.foldedResult, count, member.dtype, averagedPostscale(r.spec, size_));
  if (member.dtype == DataType::kBool) fusion::normalizeBool(out, count);
  return Status::ok();
}

// Every rank's members one after another, rank after rank (the ranks' headers agreed, so every
// rank's part has this rank's size, as the negotiated rows say): each member's output gets every
// rank's rows of it.
Status Executor::takeFoldedAllgather(const Response& r, LocalOp& op) {
  const size_t n = static_cast<size_t>(size_);
  const size_t members = r.spec.members.size();
  const auto rowsOf = [&](size_t m, size_t rank) {
    return static_cast<size_t>(r.dim0PerRank[m * n + rank]);
  };
  if (members == 1) {
    // One tensor (nearly every allgather): the gathered bytes, rank after rank, are its output
    // as they are. Without the per-member bookkeeping below (~250 instructions of a small
    // allgather_into's ~5500, callgrind).
    const MemberSpec& spec = r.spec.members[0];
    const size_t rowBytes = static_cast<size_t>(rowElements(spec.shape)) * dataTypeSize(spec.dtype);
    Shape shape = spec.shape;
    shape[0] = 0;
    for (size_t rank = 0; rank < n; ++rank) shape[0] += r.dim0PerRank[rank];
    if (static_cast<size_t>(shape[0]) != rowsOf(0, static_cast<size_t>(rank_)) * n) {
      return internalError("a folded allgather of unequal parts");
    }
    void* out = nullptr;
    HCOLL_RETURN_IF_ERROR(memberOutput(op, 0, shape, &out));
    const size_t bytes = static_cast<size_t>(shape[0]) * rowBytes;
    copyBytes(out, op.foldedResult, bytes);
    return Status::ok();
  }
  // Per member: the bytes of one row, then (below) the output.
  std::vector<size_t>& rowBytes = reused_.rowBytes;
  rowBytes.resize(members);
  size_t mine = 0, total = 0;
  for (size_t m = 0; m < members; ++m) {
    const MemberSpec& spec = r.spec.members[m];
    rowBytes[m] = static_cast<size_t>(rowElements(spec.shape)) * dataTypeSize(spec.dtype);
    for (size_t rank = 0; rank < n; ++rank) total += rowsOf(m, rank) * rowBytes[m];
    mine += rowsOf(m, static_cast<size_t>(rank_)) * rowBytes[m];
  }
  if (total != mine * n) return internalError("a folded allgather of unequal parts");
  std::vector<void*>& outputs = reused_.outputs;
  outputs.assign(members, nullptr);
  op.request->reserveOutputs(members);
  for (size_t m = 0; m < members; ++m) {
    Shape shape = r.spec.members[m].shape;
    shape[0] = 0;
    for (size_t rank = 0; rank < n; ++rank) shape[0] += r.dim0PerRank[m * n + rank];
    HCOLL_RETURN_IF_ERROR(memberOutput(op, m, shape, &outputs[m]));
  }
  const auto* gathered = static_cast<const uint8_t*>(op.foldedResult);
  std::vector<size_t>& written = reused_.written;  // per member, bytes written so far
  written.assign(members, 0);
  for (size_t rank = 0; rank < n; ++rank) {
    for (size_t m = 0; m < members; ++m) {
      const size_t bytes = rowsOf(m, rank) * rowBytes[m];
      copyBytes(static_cast<uint8_t*>(outputs[m]) + written[m], gathered, bytes);
      written[m] += bytes;
      gathered += bytes;
    }
  }
  return Status::ok();
}

// The root's buffer, into this rank's (the root's own is unchanged).
Status Executor::takeFoldedBroadcast(const Response& r, const LocalOp& op) {
  if (op.inputs.size() != 1) return internalError("a folded broadcast of a group");
  const MemberSpec& member = r.spec.members[0];
  const size_t bytes = static_cast<size_t>(numElements(member.shape)) * dataTypeSize(member.dtype);
  if (rank_ != r.spec.root) copyBytes(op.inputs[0].data, op.foldedResult, bytes);
  return Status::ok();
}

// The whole reduction (prescale 1): this rank's rows of it, with the postscale.
Status Executor::takeFoldedReducescatter(const Response& r, LocalOp& op) {
  if (op.inputs.size() != 1) return internalError("a folded reducescatter of a group");
  const MemberSpec& member = r.spec.members[0];
  const size_t elementSize = dataTypeSize(member.dtype);
  const int64_t d0 = member.shape[0];
  const size_t row = static_cast<size_t>(rowElements(member.shape));
  const size_t before = static_cast<size_t>(scatterOffset(d0, size_, rank_)) * row;
  const size_t count = static_cast<size_t>(scatterRows(d0, size_, rank_)) * row;
  Shape shape = member.shape;
  shape[0] = scatterRows(d0, size_, rank_);
  void* out = nullptr;
  HCOLL_RETURN_IF_ERROR(memberOutput(op, 0, shape, &out));
  const auto* part = static_cast<const uint8_t*>(op.foldedResult) + before * elementSize;
  fusion::scaleCopy(out, part, count, member.dtype, averagedPostscale(r.spec, size_));
  if (member.dtype == DataType::kBool) fusion::normalizeBool(out, count);
  return Status::ok();
}

// Every rank's whole input, rank after rank (the ranks' headers agreed, so every input has this
// rank's size): rank j's rows for this rank follow the rows it sends to the ranks before this one.
Status Executor::takeFoldedAlltoall(const Response& r, const LocalOp& op,
                                    const std::vector<size_t>& recvBytes, void* out) {
  const size_t n = static_cast<size_t>(size_);
  const size_t me = static_cast<size_t>(rank_);
  const MemberSpec& local = op.spec.members[0];
  const size_t elementSize = dataTypeSize(local.dtype);
  const size_t rowBytes = static_cast<size_t>(rowElements(local.shape)) * elementSize;
  const size_t inputBytes = static_cast<size_t>(numElements(local.shape)) * elementSize;
  const auto* folded = static_cast<const uint8_t*>(op.foldedResult);
  auto* to = static_cast<uint8_t*>(out);
  for (size_t j = 0; j < n; ++j) {
    size_t skipped = 0;
    for (size_t k = 0; k < me; ++k) skipped += static_cast<size_t>(r.splitMatrix[j * n + k]);
    if (skipped * rowBytes + recvBytes[j] > inputBytes) {
      return internalError("a folded alltoall whose splits exceed rank " + std::to_string(j) +
                           "'s input");
    }
    copyBytes(to, folded + j * inputBytes + skipped * rowBytes, recvBytes[j]);
    to += recvBytes[j];
  }
  return Status::ok();
}

}  // namespace hcoll::runtime
