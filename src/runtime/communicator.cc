#include "runtime/communicator.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>

#include "backends/device.h"
#include "runtime/executor.h"
#include "runtime/negotiator.h"

namespace hcoll::runtime {
namespace {

std::atomic<bool> gTroubled{false};

// CUDA tensors: captures each caller stream as it is at submission, so that the collective sees
// what the caller enqueued on it before the call.
Status markCallerStreams(LocalOp& op) {
  if (op.spec.device == kHostDevice) return Status::ok();
  backends::DeviceBackend* backend = backends::deviceBackend();
  if (backend == nullptr) return Status(Code::kUnsupported, "no device backend in this build");
  op.markers.reserve(op.inputs.size());
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    backends::StreamMarkerPtr marker;
    Status s = backend->mark(op.inputs[i].device, op.inputs[i].stream, &marker);
    if (!s.isOk()) {
      const std::string member = op.inputs.size() > 1 ? "ins[" + std::to_string(i) + "]" : "in";
      return Status(s.code(), member + ": " + s.message());
    }
    op.markers.push_back(std::move(marker));
  }
  return Status::ok();
}

// Host operations whose per-rank part exceeds what the backend's v-collectives take (an MPI
// without MPI-4 large counts: INT_MAX bytes or elements) are refused here, synchronously, rather
// than failing later on every rank. Checked on what this rank knows: its own parts (a fused
// batch of several members is bounded by the sum, so that sum is checked).
Status checkBackendLimits(const LocalOp& op, const backends::Channel& channel) {
  const size_t limit = channel.maxVectorCount();
  if (op.spec.device != kHostDevice || limit == SIZE_MAX) return Status::ok();
  const size_t n = static_cast<size_t>(channel.size());
  size_t part = 0;  // the largest count of this rank's part: bytes, or reducescatter elements
  const char* unit = "bytes";
  const auto bytes = [](const MemberSpec& m) {
    return static_cast<size_t>(numElements(m.shape)) * dataTypeSize(m.dtype);
  };
  switch (op.spec.kind) {
    case OpKind::kAllgather:
      for (const MemberSpec& m : op.spec.members) part += bytes(m);
      break;
    case OpKind::kAlltoall:
      part = bytes(op.spec.members[0]);  // also bounds every split and displacement
      break;
    case OpKind::kReducescatter:
      unit = "elements";
      for (const MemberSpec& m : op.spec.members) {
        const size_t rows = static_cast<size_t>(m.shape.empty() ? 0 : m.shape[0]);
        part += (rows + n - 1) / n * static_cast<size_t>(rowElements(m.shape)) * n;
      }
      break;
    default:
      return Status::ok();
  }
  if (part <= limit) return Status::ok();
  return Status(Code::kUnsupported,
                std::string(opKindName(op.spec.kind)) + " of " + std::to_string(part) + " " + unit +
                    " on this rank: this build's MPI has no MPI-4 large-count calls, so "
                    "one rank's part is limited to " +
                    std::to_string(limit) + " " + unit +
                    " (split the tensor, or build hcoll against an MPI-4 library such as "
                    "MPICH 4)");
}

}  // namespace

Communicator::Communicator(std::unique_ptr<backends::Channel> channel, const Config& config,
                           Timeline* timeline, int timelineTrack)
    : channel_(std::move(channel)),
      config_(config),
      liveness_(*channel_, config.stallShutdownSeconds),
      log_(logging::get("runtime")),
      timeline_(timeline),
      timelineTrack_(timelineTrack),
      recorder_(std::make_shared<FlightRecorder>(channel_->rank(), channel_->size())) {
  FlightRecorder::track(recorder_);
  thread_ = std::thread([this] { run(); });
}

Communicator::~Communicator() {
  if (thread_.joinable()) abort();
}

Status Communicator::submit(std::unique_ptr<LocalOp> op) {
  HCOLL_RETURN_IF_ERROR(checkBackendLimits(*op, *channel_));
  HCOLL_RETURN_IF_ERROR(markCallerStreams(*op));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!brokenReason_.empty()) {
      return shutDown("the communicator is unusable: " + brokenReason_);
    }
    if (closing_ || stopped_) {
      return shutDown("the communicator is being destroyed or hcoll is shutting down");
    }
    const bool autoNamed = op->spec.name.empty();
    auto& counter = autoNameCounters_[static_cast<size_t>(op->spec.kind)];
    if (autoNamed) {
      op->spec.name = std::string(opKindName(op->spec.kind)) + "." + std::to_string(counter);
    }
    if (!inFlight_.insert(op->spec.name).second) {
      return Status(Code::kDuplicateName,
                    "an operation named '" + op->spec.name + "' is already in flight");
    }
    if (autoNamed) ++counter;
    op->spec.autoNamed = autoNamed;
    op->submittedAt = std::chrono::steady_clock::now();
    op->flightSeq = recorder_->submitted(op->spec);
    incoming_.push_back(std::move(op));
    hasIncoming_.store(true, std::memory_order_release);
  }
  wake_.notify_one();
  return Status::ok();
}

void Communicator::finish(std::unique_ptr<LocalOp> op, const Status& status) {
  if (!op) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    inFlight_.erase(op->spec.name);
  }
  recorder_->advance(op->flightSeq, FlightState::kDone, status.code());
  op->request->complete(status);
}

void Communicator::failAll(PendingOps& pending, const Status& status) {
  while (!pending.empty()) {
    std::string name = pending.all().front()->spec.name;
    finish(pending.take(name), status);
  }
}

namespace {

// The message of an operation failed because a peer closed the communicator.
Status peerLeft(const std::string& who, const std::string& name) {
  return shutDown("operation '" + name + "' cannot complete: " + who +
                  " left the communicator (hcoll_shutdown, hcoll_comm_destroy or process exit) "
                  "before every rank had submitted it");
}

}  // namespace

void Communicator::run() {
  PendingOps pending;
  Negotiator negotiator(*channel_, config_, liveness_, abort_, log_, recorder_.get());
  negotiator.watchCloseRequests(closeRequested_);
  Executor executor(
      *channel_, config_, liveness_, closeRequested_, abort_, stats_,
      [this](std::unique_ptr<LocalOp> op, const Status& s) { finish(std::move(op), s); });
  executor.setTimeline(timeline_, timelineTrack_);
  // The batching window: operations submitted within it of the first one negotiate (and fuse)
  // together. 0 (the default) negotiates at once; ops that arrive during a round go in the next.
  const auto window = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double, std::milli>(config_.cycleTimeMs));
  // Unmatched work (some rank has not submitted it yet) is re-offered after this, or sooner when
  // this rank submits more.
  const auto unmatchedPause =
      std::max<std::chrono::steady_clock::duration>(window, std::chrono::milliseconds(1));
  bool productive = true;
  Status endStatus = shutDown("the communicator was destroyed before the operation ran");
  // Closing is bounded: peers that never close (exited, or busy with work this rank never
  // submits) cannot keep this rank's shutdown or destroy waiting forever.
  std::optional<std::chrono::steady_clock::time_point> closeStarted;
  bool broken = false;     // stopped on a failure: submit() reports it from now on
  bool tellPeers = false;  // the failure is this rank's own: the peers must learn it
  // A peer stopped mid-operation or never answered the close: it may never finalize MPI.
  bool peerStuck = false;
  std::string leaver;      // a peer closed the communicator: who (for per-operation messages)
  while (true) {
    bool closing;
    bool joinFinalRound = false;
    Status peerFailure;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      auto woken = [this] { return !incoming_.empty() || closing_ || abort_.load(); };
      if (pending.empty()) {
        if (productive && !woken()) {
          // A loop of collectives submits the next one within microseconds of the last one
          // finishing: poll briefly before paying for a futex sleep and wake-up.
          lock.unlock();
          const auto until = std::chrono::steady_clock::now() + kIdlePoll;
          while (!hasIncoming_.load(std::memory_order_acquire) &&
                 std::chrono::steady_clock::now() < until) {
            std::this_thread::yield();
          }
          lock.lock();
        }
        // Idle: sleep until work arrives, looking for the peers' notices now and then: a peer
        // that closes waits in its final round for this rank to join it, and a peer that gave
        // up must fail this rank's communicator too.
        while (!woken()) {
          if (wake_.wait_for(lock, Liveness::kIdlePollInterval, woken)) break;
          lock.unlock();
          peerFailure = liveness_.poll();
          joinFinalRound = liveness_.takeJoinRequest();
          lock.lock();
          if (!peerFailure.isOk() || joinFinalRound) break;
        }
      } else if (!productive) {
        // Unmatched work: give other ranks (and this rank's callers) a cycle before re-asking.
        wake_.wait_for(lock, unmatchedPause, woken);
      }
      if (abort_.load()) {
        tellPeers = true;
        break;
      }
      if (!peerFailure.isOk()) {
        endStatus = peerFailure;
        broken = true;
        break;
      }
      if (window.count() > 0 && !incoming_.empty() && !joinFinalRound) {
        // Gather what else is submitted within the window opened by the oldest new operation.
        const auto windowEnd = incoming_.front()->submittedAt + window;
        wake_.wait_until(lock, windowEnd, [this] { return closing_ || abort_.load(); });
        if (abort_.load()) {
          tellPeers = true;
          break;
        }
      }
      for (auto& op : incoming_) pending.add(std::move(op));
      incoming_.clear();
      hasIncoming_.store(false, std::memory_order_relaxed);
      closing = closing_;
    }
    if (closing && !closeStarted) {
      closeStarted = std::chrono::steady_clock::now();
      // Idle peers take part in no round: ask them to join this rank's final one.
      liveness_.announceClosing();
    }
    const auto closeTimeout = std::chrono::duration<double>(liveness_.closeTimeoutSeconds());
    if (closeStarted && std::chrono::steady_clock::now() - *closeStarted > closeTimeout) {
      log_->error(
          "closing: the other ranks did not close the communicator within {:.0f} s; "
          "closed locally",
          closeTimeout.count());
      endStatus = shutDown(
          "the communicator was closed locally: the other ranks did not close "
          "it in time");
      tellPeers = true;
      peerStuck = true;
      break;
    }
    RoundResult round;
    const auto roundStart = std::chrono::steady_clock::now();
    Status s = negotiator.round(pending, closing, &round);
    stats_.cycles.fetch_add(1, std::memory_order_relaxed);
    if (!s.isOk()) {
      if (!liveness_.peerGone()) {
        log_->error("negotiation failed, communicator stops: {}", s.message());
        tellPeers = true;
        // A close the peers did not answer within its bound: they may be stuck or gone.
        peerStuck = closing && s.code() == Code::kShutDown;
      }
      endStatus = s;
      broken = !closing;
      break;
    }
    for (const ResponsePtr& r : round.responses) {
      if (const LocalOp* op = pending.find(r->spec.name)) {
        recorder_->advance(op->flightSeq, FlightState::kNegotiated);
      }
    }
    alignAutoNames(round.responses);
    if (round.slowPath) stats_.slowPath.fetch_add(1, std::memory_order_relaxed);
    stats_.cacheHits.fetch_add(round.fromCache, std::memory_order_relaxed);
    if (timeline_) recordRound(roundStart, round, pending);
    for (const ResponsePtr& r : round.responses) {
      if (const LocalOp* op = pending.find(r->spec.name)) {
        recorder_->advance(op->flightSeq, FlightState::kRunning);
      }
    }
    executor.execute(round.responses, pending);
    if (!executor.failure().isOk()) {
      if (!liveness_.peerGone()) {
        log_->error("a collective was given up on, communicator stops: {}",
                    executor.failure().message());
        tellPeers = true;
      }
      endStatus = executor.failure();
      broken = !closing;
      peerStuck = !abort_.load();
      break;
    }
    productive = !round.responses.empty();
    if (round.allClosing) break;
    if (round.anyClosing) {
      // Some rank closes the communicator: this was its last round on every rank.
      if (!closing) {
        (void)liveness_.poll();  // its closing notice names it (sent before its round)
        leaver = liveness_.closingRanksText();
        endStatus = shutDown(leaver +
                             " left the communicator (hcoll_shutdown, hcoll_comm_destroy or "
                             "process exit)");
        broken = true;
        log_->warn("{}: operations pending here fail with SHUT_DOWN", endStatus.message());
      }
      break;
    }
  }
  peerStuck = peerStuck || liveness_.stuckPeerReported();
  if (tellPeers) liveness_.announceGone(endStatus, peerStuck);
  // Only evidence that a peer may never finalize keeps MPI_Finalize from running at exit: peers
  // that closed cleanly, or gave up on a stall (alive, just not submitting), finalize too.
  if (peerStuck) gTroubled.store(true);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = true;
    if (broken) brokenReason_ = endStatus.message();
    for (auto& op : incoming_) pending.add(std::move(op));
    incoming_.clear();
  }
  if (leaver.empty()) {
    failAll(pending, endStatus);
    return;
  }
  while (!pending.empty()) {
    std::string name = pending.all().front()->spec.name;
    finish(pending.take(name), peerLeft(leaver, name));
  }
}

void Communicator::alignAutoNames(const std::vector<ResponsePtr>& responses) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const ResponsePtr& r : responses) {
    // In flight here (pending or just submitted): this rank named it itself, so its counter is
    // already past it.
    if (!r->spec.autoNamed || inFlight_.count(r->spec.name)) continue;
    const std::string prefix = std::string(opKindName(r->spec.kind)) + ".";
    const std::string& name = r->spec.name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    uint64_t n = 0;
    const char* end = name.data() + name.size();
    auto [at, ec] = std::from_chars(name.data() + prefix.size(), end, n);
    if (ec != std::errc() || at != end || n == std::numeric_limits<uint64_t>::max()) continue;
    auto& counter = autoNameCounters_[static_cast<size_t>(r->spec.kind)];
    counter = std::max(counter, n + 1);
  }
}

void Communicator::recordRound(std::chrono::steady_clock::time_point start,
                               const RoundResult& round, const PendingOps& pending) {
  const auto now = std::chrono::steady_clock::now();
  timeline_->cycle(timelineTrack_, start, now, round.slowPath, round.responses.size());
  for (size_t i = 0; i < round.responses.size(); ++i) {
    const Response& r = *round.responses[i];
    if (const LocalOp* op = pending.find(r.spec.name)) {
      std::string args = std::string(R"({"kind":")") + opKindName(r.spec.kind) + R"(","cached":)" +
                         (i < round.fromCache ? "true" : "false") + "}";
      timeline_->tensorSpan(timelineTrack_, r.spec.name, "NEGOTIATE", op->submittedAt, now, args);
    }
  }
}

void Communicator::beginClose() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
    closeRequested_.store(true);
  }
  wake_.notify_one();
}

void Communicator::waitClosed() {
  if (thread_.joinable()) thread_.join();
}

void Communicator::close() {
  beginClose();
  waitClosed();
}

void Communicator::abort() {
  abort_.store(true);
  beginClose();
  waitClosed();
}

bool Communicator::anyTroubled() { return gTroubled.load(); }

void Communicator::announceAbort(const std::string& reason) {
  gTroubled.store(true);
  channel_->sendNotice(backends::Channel::NoticeKind::kGone, Code::kShutDown,
                       "rank " + std::to_string(rank()) + " called hcoll_abort: " + reason);
}

StatsSnapshot Communicator::stats() const {
  StatsSnapshot s;
  s.cycles = stats_.cycles.load();
  s.slowPath = stats_.slowPath.load();
  s.cacheHits = stats_.cacheHits.load();
  s.backendCalls = stats_.backendCalls.load();
  s.fusedTensors = stats_.fusedTensors.load();
  s.bytes = stats_.bytes.load();
  std::lock_guard<std::mutex> lock(mutex_);
  s.queueDepth = inFlight_.size();
  return s;
}

}  // namespace hcoll::runtime
