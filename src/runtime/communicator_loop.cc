// The communicator's thread: wait for work, negotiate a round, execute what it decided, until
// the communicator closes or fails. Each step is one function below, in the order they run.
#include <algorithm>
#include <charconv>
#include <limits>
#include <thread>

#include "common/op_traits.h"
#include "runtime/communicator.h"
#include "runtime/executor.h"
#include "runtime/negotiator.h"

namespace hcoll::runtime {

extern std::atomic<bool> gTroubledCommunicators;  // communicator.cc

namespace {

// The message of an operation failed because a peer closed the communicator.
Status peerLeft(const std::string& who, const std::string& name) {
  return shutDown("operation '" + name + "' cannot complete: " + who +
                  " left the communicator (hcoll_shutdown, hcoll_comm_destroy or process exit) "
                  "before every rank had submitted it");
}

}  // namespace

// What the loop knows about how it will end.
struct Communicator::LoopState {
  // The last round ran something: poll briefly for the next submission before sleeping.
  bool productive = true;
  // What operations still pending when the loop stops fail with.
  Status endStatus = shutDown("the communicator was destroyed before the operation ran");
  // Closing is bounded: peers that never close (exited, or busy with work this rank never
  // submits) cannot keep this rank's shutdown or destroy waiting forever.
  std::optional<std::chrono::steady_clock::time_point> closeStarted;
  bool broken = false;     // stopped on a failure: submit() reports it from now on
  bool tellPeers = false;  // the failure is this rank's own: the peers must learn it
  // A peer stopped mid-operation or never answered the close: it may never finalize MPI.
  bool peerStuck = false;
  std::string leaver;  // a peer closed the communicator: who (for per-operation messages)
};

void Communicator::run() {
  PendingOps pending;
  Negotiator negotiator(*channel_, config_, liveness_, abort_, log_, recorder_.get());
  negotiator.watchCloseRequests(closeRequested_);
  Executor executor(
      *channel_, config_, liveness_, closeRequested_, abort_, stats_,
      [this](std::unique_ptr<LocalOp> op, const Status& s) { finish(std::move(op), s); });
  executor.setTimeline(timeline_, timelineTrack_);
  LoopState state;
  bool closing = false;
  while (collectWork(pending, state, &closing) && !closeBoundPassed(closing, state) &&
         runRound(negotiator, executor, pending, closing, state)) {
  }
  stop(pending, state);
}

bool Communicator::collectWork(PendingOps& pending, LoopState& state, bool* closing) {
  // The batching window: operations submitted within it of the first one negotiate (and fuse)
  // together. 0 (the default) negotiates at once; ops that arrive during a round go in the next.
  const auto window = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double, std::milli>(config_.cycleTimeMs));
  // Unmatched work (some rank has not submitted it yet) is re-offered after this, or sooner when
  // this rank submits more.
  const auto unmatchedPause =
      std::max<std::chrono::steady_clock::duration>(window, std::chrono::milliseconds(1));
  bool joinFinalRound = false;
  Status peerFailure;
  std::unique_lock<std::mutex> lock(mutex_);
  auto woken = [this] { return !incoming_.empty() || closing_ || abort_.load(); };
  if (pending.empty()) {
    if (state.productive && !woken()) {
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
    // Idle: sleep until work arrives, looking for the peers' notices now and then: a peer that
    // closes waits in its final round for this rank to join it, and a peer that gave up must
    // fail this rank's communicator too.
    while (!woken()) {
      if (wake_.wait_for(lock, Liveness::kIdlePollInterval, woken)) break;
      lock.unlock();
      peerFailure = liveness_.poll();
      joinFinalRound = liveness_.takeJoinRequest();
      lock.lock();
      if (!peerFailure.isOk() || joinFinalRound) break;
    }
  } else if (!state.productive) {
    // Unmatched work: give other ranks (and this rank's callers) a cycle before re-asking.
    wake_.wait_for(lock, unmatchedPause, woken);
  }
  if (abort_.load()) {
    state.tellPeers = true;
    return false;
  }
  if (!peerFailure.isOk()) {
    state.endStatus = peerFailure;
    state.broken = true;
    return false;
  }
  if (window.count() > 0 && !incoming_.empty() && !joinFinalRound) {
    // Gather what else is submitted within the window opened by the oldest new operation.
    const auto windowEnd = incoming_.front()->submittedAt + window;
    wake_.wait_until(lock, windowEnd, [this] { return closing_ || abort_.load(); });
    if (abort_.load()) {
      state.tellPeers = true;
      return false;
    }
  }
  for (auto& op : incoming_) pending.add(std::move(op));
  incoming_.clear();
  hasIncoming_.store(false, std::memory_order_relaxed);
  *closing = closing_;
  return true;
}

bool Communicator::closeBoundPassed(bool closing, LoopState& state) {
  if (!closing) return false;
  if (!state.closeStarted) {
    state.closeStarted = std::chrono::steady_clock::now();
    // Idle peers take part in no round: ask them to join this rank's final one.
    liveness_.announceClosing();
  }
  const auto closeTimeout = std::chrono::duration<double>(liveness_.closeTimeoutSeconds());
  if (std::chrono::steady_clock::now() - *state.closeStarted <= closeTimeout) return false;
  log_->error("closing: the other ranks did not close the communicator within {:.0f} s; "
              "closed locally",
              closeTimeout.count());
  state.endStatus = shutDown(
      "the communicator was closed locally: the other ranks did not close it in time");
  state.tellPeers = true;
  state.peerStuck = true;
  return true;
}

bool Communicator::runRound(Negotiator& negotiator, Executor& executor, PendingOps& pending,
                            bool closing, LoopState& state) {
  RoundResult round;
  const auto roundStart = std::chrono::steady_clock::now();
  Status s = negotiator.round(pending, closing, &round);
  stats_.cycles.fetch_add(1, std::memory_order_relaxed);
  if (!s.isOk()) {
    if (!liveness_.peerGone()) {
      log_->error("negotiation failed, communicator stops: {}", s.message());
      state.tellPeers = true;
      // A close the peers did not answer within its bound: they may be stuck or gone.
      state.peerStuck = closing && s.code() == Code::kShutDown;
    }
    state.endStatus = s;
    state.broken = !closing;
    return false;
  }
  advanceRecorder(round.responses, pending, FlightState::kNegotiated);
  alignAutoNames(round.responses);
  if (round.slowPath) stats_.slowPath.fetch_add(1, std::memory_order_relaxed);
  stats_.cacheHits.fetch_add(round.fromCache, std::memory_order_relaxed);
  if (timeline_) recordRound(roundStart, round, pending);
  advanceRecorder(round.responses, pending, FlightState::kRunning);
  execute(executor, round.responses, pending);
  if (!executor.failure().isOk()) {
    if (!liveness_.peerGone()) {
      log_->error("a collective was given up on, communicator stops: {}",
                  executor.failure().message());
      state.tellPeers = true;
    }
    state.endStatus = executor.failure();
    state.broken = !closing;
    state.peerStuck = !abort_.load();
    return false;
  }
  state.productive = !round.responses.empty();
  if (round.allClosing) return false;
  if (round.anyClosing) {
    // Some rank closes the communicator: this was its last round on every rank.
    if (!closing) {
      (void)liveness_.poll();  // its closing notice names it (sent before its round)
      state.leaver = liveness_.closingRanksText();
      state.endStatus = shutDown(state.leaver +
                                 " left the communicator (hcoll_shutdown, hcoll_comm_destroy or "
                                 "process exit)");
      state.broken = true;
      log_->warn("{}: operations pending here fail with SHUT_DOWN", state.endStatus.message());
    }
    return false;
  }
  return true;
}

void Communicator::execute(Executor& executor, const std::vector<ResponsePtr>& responses,
                           PendingOps& pending) {
  auto createsComm = [](const ResponsePtr& r) {
    return r->error == Code::kSuccess && traitsOf(r->spec.kind).createsComm;
  };
  if (std::none_of(responses.begin(), responses.end(), createsComm)) {
    executor.execute(responses, pending);
    return;
  }
  // Communicator creation is collective over this channel, in round order like the rest: run
  // the collectives before it, then it, then go on.
  std::vector<ResponsePtr> collectives;
  for (const ResponsePtr& r : responses) {
    if (!createsComm(r)) {
      collectives.push_back(r);
      continue;
    }
    executor.execute(collectives, pending);
    collectives.clear();
    if (!executor.failure().isOk()) return;
    std::unique_ptr<LocalOp> op = pending.take(r->spec.name);
    finish(std::move(op), createChannel(*r, op.get()));
  }
  executor.execute(collectives, pending);
}

Status Communicator::createChannel(const Response& r, LocalOp* op) {
  if (op == nullptr) return internalError("communicator operation without a local operation");
  std::unique_ptr<backends::Channel> channel;
  Status s = r.spec.kind == OpKind::kCommSplit
                 ? channel_->split(op->spec.color, op->spec.key, &channel)
                 : channel_->create(op->spec.ranks, &channel);
  if (s.isOk()) op->request->setNewChannel(std::move(channel));
  return s;
}

void Communicator::stop(PendingOps& pending, LoopState& state) {
  state.peerStuck = state.peerStuck || liveness_.stuckPeerReported();
  if (state.tellPeers) liveness_.announceGone(state.endStatus, state.peerStuck);
  // Only evidence that a peer may never finalize keeps MPI_Finalize from running at exit: peers
  // that closed cleanly, or gave up on a stall (alive, just not submitting), finalize too.
  if (state.peerStuck) gTroubledCommunicators.store(true);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = true;
    if (state.broken) brokenReason_ = state.endStatus.message();
    for (auto& op : incoming_) pending.add(std::move(op));
    incoming_.clear();
  }
  while (!pending.empty()) {
    std::string name = pending.all().front()->spec.name;
    std::unique_ptr<LocalOp> op = pending.take(name);
    finish(std::move(op), state.leaver.empty() ? state.endStatus : peerLeft(state.leaver, name));
  }
}

void Communicator::advanceRecorder(const std::vector<ResponsePtr>& responses,
                                   const PendingOps& pending, FlightState to) {
  for (const ResponsePtr& r : responses) {
    if (const LocalOp* op = pending.find(r->spec.name)) recorder_->advance(op->flightSeq, to);
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

}  // namespace hcoll::runtime
