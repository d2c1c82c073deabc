#pragma once
// Executes a round's collectives on this rank: matches each response to the local operation of
// that name, fuses compatible consecutive ones into fusion buffers up to the threshold
// (batch_plan.h), drives the backend, attaches outputs and completes requests. In three files:
// executor.cc (dispatch, runs and batches), executor_planes.cc (host or device plane, bounded
// waits), executor_kernels.cc (per kind: pack, call the backend, unpack). Communicator creation
// is not execution: the communicator runs it (Communicator::execute).

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "backends/device.h"
#include "common/logging.h"
#include "runtime/config.h"
#include "runtime/bounded_wait.h"
#include "runtime/liveness.h"
#include "runtime/local_op.h"
#include "runtime/message.h"
#include "runtime/stats.h"
#include "runtime/timeline.h"

namespace hcoll::runtime {

class Executor {
 public:
  using Finish = std::function<void(std::unique_ptr<LocalOp>, const Status&)>;

  // Data-plane waits give up (`liveness`) when a peer gave up, after the stall shutdown time, or
  // after the close bound once `closeRequested` is set.
  Executor(backends::Channel& channel, const Config& config, Liveness& liveness,
           const std::atomic<bool>& closeRequested, const std::atomic<bool>& abort,
           CommStats& stats, Finish finish);
  // Aborts the device planes when the communicator was aborted (no wait for device or peers).
  ~Executor();

  // Runs `responses` in order. Every local op a response names is taken out of `pending` and
  // handed to `finish` with its final status.
  void execute(const std::vector<ResponsePtr>& responses, PendingOps& pending);
  // The round of a folded operation (RoundResult::folded: `r` is its response, its result rode
  // in the round's readiness exchange): unpacked into its outputs (executor_folded.cc), then the
  // operation is taken out of `pending` and finished.
  void executeFolded(const Response& r, LocalOp& op, PendingOps& pending);
  // Why a data-plane wait was given up on (ok if none was): the backend operation is still
  // active and this rank is out of step with its peers, so the communicator cannot go on.
  const Status& failure() const { return failure_; }
  // Records EXECUTE spans of every operation on `timeline` (may be null) track `track`.
  void setTimeline(Timeline* timeline, int track) {
    timeline_ = timeline;
    timelineTrack_ = track;
  }

 private:
  struct Item;    // one member tensor of one response
  struct Plane;   // where a batch runs: host (the channel) or a device backend
  class Scratch;  // a batch's temporary buffer
  void runFusible(const std::vector<const Response*>& run, PendingOps& pending);
  Status runBatch(OpKind kind, const std::vector<Item>& items);
  Status allreduceBatch(const Plane& plane, const std::vector<Item>& items);
  Status allgatherBatch(const Plane& plane, const std::vector<Item>& items);
  Status broadcastBatch(const Plane& plane, const std::vector<Item>& items);
  Status reducescatterBatch(const Plane& plane, const std::vector<Item>& items);
  Status alltoall(const Response& r, LocalOp& op);
  // The folded result into the outputs (LocalOp::foldedResult), per kind.
  Status takeFoldedAllreduce(const Response& r, const LocalOp& op);
  Status takeFoldedAllgather(const Response& r, LocalOp& op);
  Status takeFoldedBroadcast(const Response& r, const LocalOp& op);
  Status takeFoldedReducescatter(const Response& r, LocalOp& op);
  Status takeFoldedAlltoall(const Response& r, const LocalOp& op,
                            const std::vector<size_t>& recvBytes, void* out);
  Status submitAndWait(backends::PendingPtr pending, size_t bytes, size_t tensors);
  // Waits for a data-plane step within the communicator's bounds (wait_); one given up on is
  // kept until the process exits (its buffers are the batch's: a fusion lease is abandoned)
  // and sets failure_.
  Status waitData(backends::PendingPtr pending);
  void recordExecution(const std::vector<const LocalOp*>& ops, OpKind kind, size_t tensors,
                       std::chrono::steady_clock::time_point start);
  // The plane of a batch: host memory, or the (lazily created) device plane of its device.
  Status planeFor(const std::vector<Item>& items, Plane* out);
  Status planeFor(int32_t device, Plane* out);
  // Device planes: orders the batch after its callers' streams at submission / completes it.
  Status beginPlane(const Plane& plane, const std::vector<Item>& items);
  Status endPlane(const Plane& plane, const std::vector<Item>& items);
  // beginPlane, `body`, endPlane and what a failure on a plane needs (executor_internal.h).
  template <typename Body>
  Status runOnPlane(const Plane& plane, const std::vector<Item>& items, Body&& body);

  backends::Channel& channel_;
  const Config& config_;
  Liveness& liveness_;
  const std::atomic<bool>& abort_;
  BoundedWait wait_;  // every data-plane wait (waitData)
  Status failure_;
  CommStats& stats_;
  Finish finish_;
  int rank_;
  int size_;
  Timeline* timeline_ = nullptr;
  int timelineTrack_ = -1;
  // Device planes of this communicator by device ordinal, created at their first use and
  // destroyed with the executor (when the communicator's thread ends).
  std::map<int32_t, std::unique_ptr<backends::DeviceCollectives>> devices_;
  // Working vectors of runFusible and alltoall, cleared per run and kept: every operation would
  // otherwise allocate them (the executor runs one round at a time, on one thread at a time).
  struct Reused {
    std::vector<const Response*> run;
    std::vector<LocalOp*> ops;
    std::vector<Item> items;
    std::vector<Item> batch;
    std::vector<Status> statuses;
    std::vector<std::pair<size_t, size_t>> batches;
    std::vector<size_t> sendBytes, recvBytes;  // alltoall's per-rank byte counts
    std::vector<void*> outputs;                 // a folded allgather's, per member: outputs,
    std::vector<size_t> rowBytes, written;      // bytes of a row, bytes written so far
  } reused_;
};

}  // namespace hcoll::runtime
