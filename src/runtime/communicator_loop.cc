// The communicator's thread: wait for work, negotiate a round, execute what it decided, until
// the communicator closes or fails. Each step is one function below, in the order they run.
#include <algorithm>
#include <charconv>
#include <exception>
#include <limits>
#include <new>
#include <string>
#include <thread>

#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "common/coarse_clock.h"
#include "common/op_traits.h"
#include "runtime/communicator.h"
#include "runtime/executor.h"
#include "runtime/negotiator.h"

namespace hcoll::runtime {

extern std::atomic<bool> gTroubledCommunicators;  // communicator.cc
extern std::atomic<bool> gPartedCommunicators;    // communicator.cc

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
  // A driving caller ran the last round: the thread does not poll for the next submission (its
  // caller will drive that too), it sleeps.
  bool lastRoundByCaller = false;
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
  bool ended = false;  // a round said stop (the thread's or a caller's): the thread stops
  // The last round had every rank closing: all of them are shutting down together.
  bool closedTogether = false;
};

struct Communicator::Engine {
  explicit Engine(Communicator& c)
      : negotiator(*c.channel_, c.config_, c.liveness_, c.abort_, c.log_, c.recorder_.get()),
        executor(*c.channel_, c.config_, c.liveness_, c.closeRequested_, c.abort_, c.stats_,
                 [&c](std::unique_ptr<LocalOp> op, const Status& s) {
                   c.finish(std::move(op), s);
                 }) {
    negotiator.watchCloseRequests(c.closeRequested_);
    executor.setTimeline(c.timeline_, c.timelineTrack_);
  }
  PendingOps pending;
  Negotiator negotiator;
  Executor executor;
  LoopState state;
  std::vector<ResponsePtr> spareResponses;  // a round's response list, kept for its capacity
};

struct Communicator::Wake {
  Status peerFailure;          // a peer gave up on the communicator
  bool joinFinalRound = false;  // a closing peer asks this idle rank to join its final round
};

void Communicator::run() {
#ifdef __linux__
  // The end of a claim window (100 us) is a timed wait: the default 50 us timer slack would add
  // half of it again.
  prctl(PR_SET_TIMERSLACK, 10000UL, 0, 0, 0);
#endif
  std::unique_lock<std::mutex> seat(seat_->mutex);
  Engine engine(*this);
  engine_ = &engine;
  seat_->comm = this;
  bool closing = false;
  while (!engine.state.ended) {
    const bool hadPending = !engine.pending.empty() || engine.negotiator.roundInFlight();
    const bool productive = engine.state.productive && !engine.state.lastRoundByCaller;
    seat.unlock();
    const Wake wake = waitForWork(hadPending, productive);
    seat.lock();
    if (engine.state.ended || !collectWork(engine, wake, &closing) ||
        closeBoundPassed(closing, engine.state)) {
      break;
    }
    // A driving caller may have run everything meanwhile: a round with nothing to offer would
    // wait for peers that have nothing to negotiate either.
    const bool inFlight = engine.negotiator.roundInFlight();
    if (engine.pending.empty() && !closing && !wake.joinFinalRound && !inFlight) continue;
    // A round a caller handed over goes on as it began (not closing: callers never drive then).
    const bool roundClosing = inFlight ? engine.negotiator.inFlightClosing() : closing;
    engine.state.lastRoundByCaller = false;
    if (runRound(engine, roundClosing) != RoundOutcome::kContinue) break;
  }
  stop(engine.pending, engine.state);
  seat_->comm = nullptr;
  engine_ = nullptr;
}

Communicator::Wake Communicator::waitForWork(bool hadPending, bool productive) {
  Wake wake;
  // Unmatched work (some rank has not submitted it yet) is re-offered after this, or sooner when
  // this rank submits more.
  const auto window = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double, std::milli>(config_.cycleTimeMs));
  const auto unmatchedPause =
      std::max<std::chrono::steady_clock::duration>(window, std::chrono::milliseconds(1));
  std::unique_lock<SpinLock> lock(mutex_);
  auto stopping = [this] { return closing_ || abort_.load() || progressMode_.handedOver(); };
  auto woken = [&] { return !incoming_.empty() || stopping(); };
  if (hadPending) {
    // Unmatched work: give other ranks (and this rank's callers) a cycle before re-asking.
    if (!productive) wake_.wait_for(lock, unmatchedPause, woken);
    return wake;
  }
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
  // Idle: sleep until work arrives, looking for the peers' notices now and then: a peer that
  // closes waits in its final round for this rank to join it, and a peer that gave up must fail
  // this rank's communicator too. (Not while a caller drives: its round looks.)
  using Clock = std::chrono::steady_clock;
  auto nextNoticeCheck = Clock::now() + Liveness::kIdlePollInterval;
  while (!stopping()) {
    progressMode_.absorbSeatWanted(seat_->wanted);
    const auto now = Clock::now();
    const auto at = progressMode_.takeAt(incoming_, now);
    if (progressMode_.takesWorkNow(now, at)) break;
    if (now >= nextNoticeCheck) {
      nextNoticeCheck = now + Liveness::kIdlePollInterval;
      lock.unlock();
      {
        std::unique_lock<std::mutex> seat(seat_->mutex, std::try_to_lock);
        if (seat.owns_lock() && engine_ != nullptr) {
          wake.peerFailure = liveness_.poll();
          wake.joinFinalRound = liveness_.takeJoinRequest();
        }
      }
      lock.lock();
      if (!wake.peerFailure.isOk() || wake.joinFinalRound) break;
      continue;
    }
    auto until = nextNoticeCheck;
    progressMode_.beforeSleep(now, at, &until);
    wake_.wait_until(lock, until);
  }
  return wake;
}

bool Communicator::collectWork(Engine& engine, const Wake& wake, bool* closing) {
  LoopState& state = engine.state;
  const auto window = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double, std::milli>(config_.cycleTimeMs));
  std::unique_lock<SpinLock> lock(mutex_);
  if (abort_.load()) {
    state.tellPeers = true;
    return false;
  }
  if (!wake.peerFailure.isOk()) {
    state.endStatus = wake.peerFailure;
    state.broken = true;
    return false;
  }
  if (window.count() > 0 && !incoming_.empty() && !wake.joinFinalRound) {
    // The batching window: operations submitted within it of the first one negotiate (and fuse)
    // together. 0 (the default) negotiates at once; ops that arrive during a round go in the next.
    const auto windowEnd = incoming_.front()->submittedAt + window;
    wake_.wait_until(lock, windowEnd, [this] { return closing_ || abort_.load(); });
    if (abort_.load()) {
      state.tellPeers = true;
      return false;
    }
  }
  for (auto& op : incoming_) engine.pending.add(std::move(op));
  incoming_.clear();
  hasIncoming_.store(false, std::memory_order_relaxed);
  progressMode_.threadCollected();
  *closing = closing_;
  return true;
}

void Communicator::Seat::drive(const Request& request,
                               std::chrono::steady_clock::time_point giveUpAt) {
  std::unique_lock<std::mutex> seat(mutex, std::try_to_lock);
  if (!seat.owns_lock()) {
    wanted.store(true, std::memory_order_relaxed);
  } else if (comm != nullptr) {
    comm->drive(request, giveUpAt);
  }
}

bool Communicator::claimForCaller(Engine& engine) {
  std::lock_guard<SpinLock> lock(mutex_);
  if (closing_ || stopped_ || abort_.load() || engine.state.ended) return false;
  size_t bytes = 0;
  auto drivable = [&bytes](const std::unique_ptr<LocalOp>& op) {
    if (op->spec.device == kHostDevice) bytes += op->payloadBytes;  // host temporaries only
    return op->callerDrivable;
  };
  if (!std::all_of(incoming_.begin(), incoming_.end(), drivable) ||
      !std::all_of(engine.pending.all().begin(), engine.pending.all().end(), drivable) ||
      bytes > kCallerMaxBytes) {
    return false;
  }
  progressMode_.callerClaimed(!incoming_.empty());
  for (auto& op : incoming_) engine.pending.add(std::move(op));
  incoming_.clear();
  hasIncoming_.store(false, std::memory_order_relaxed);
  return true;
}

void Communicator::drive(const Request& request, std::chrono::steady_clock::time_point giveUpAt) {
  Engine& engine = *engine_;
  bool claimed = claimForCaller(engine);
  while (claimed && request.test() == Code::kInProgress &&
         (!engine.pending.empty() || engine.negotiator.roundInFlight())) {
    engine.state.lastRoundByCaller = true;
    const RoundOutcome outcome = runRound(engine, /*closing=*/false, giveUpAt);
    if (outcome == RoundOutcome::kStop) engine.state.ended = true;
    // Unmatched (some rank has not submitted it yet): the thread re-offers it at its pace.
    if (outcome != RoundOutcome::kContinue || !engine.state.productive) break;
    // Done: what other threads submitted meanwhile stays for their own waits (claiming it here
    // and leaving would hand it to the thread, a wake).
    if (request.test() != Code::kInProgress) break;
    claimed = claimForCaller(engine);
  }
  // The engine is the seat's; only the queue needs the mutex, and nothing to hand over (the
  // usual end of a small operation's wait) changes nothing there: a submission that lands just
  // after this look is its own caller's to drive, as one landing just after the lock would be.
  const bool engineLeft = engine.state.ended || !engine.pending.empty() ||
                          engine.negotiator.roundInFlight();
  if (!engineLeft && !hasIncoming_.load(std::memory_order_acquire)) return;
  bool leftWork;
  {
    std::lock_guard<SpinLock> lock(mutex_);
    leftWork = engineLeft || !incoming_.empty();
    progressMode_.callerLeft(leftWork);
  }
  if (leftWork) wake_.notify_one();
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

Communicator::RoundOutcome Communicator::runRound(
    Engine& engine, bool closing, std::chrono::steady_clock::time_point giveUpAt) noexcept {
  Status failed;
  try {
    return runRoundUnguarded(engine, closing, giveUpAt);
  } catch (const std::bad_alloc&) {
    failed = Status(Code::kNoMemory, "out of memory in a negotiation round");
  } catch (const std::exception& e) {
    failed = internalError(std::string("unexpected exception in a negotiation round: ") +
                           e.what());
  } catch (...) {
    failed = internalError("unexpected exception in a negotiation round");
  }
  LoopState& state = engine.state;
  log_->error("communicator stops: {}", failed.message());
  state.tellPeers = true;
  state.endStatus = failed;
  state.broken = !closing;
  return RoundOutcome::kStop;
}

Communicator::RoundOutcome Communicator::runRoundUnguarded(
    Engine& engine, bool closing, std::chrono::steady_clock::time_point giveUpAt) {
  Negotiator& negotiator = engine.negotiator;
  Executor& executor = engine.executor;
  PendingOps& pending = engine.pending;
  LoopState& state = engine.state;
  RoundResult round;
  // The response list keeps its capacity from round to round (no allocation per round), but not
  // its responses: they are released when the round ends, so that the next round's replay finds
  // an automatic slot's renamed copy held by no one and renames it in place (negotiator.h).
  struct KeepCapacity {
    std::vector<ResponsePtr>& list;
    std::vector<ResponsePtr>& spare;
    ~KeepCapacity() {
      list.clear();
      spare.swap(list);
    }
  } keepCapacity{round.responses, engine.spareResponses};
  round.responses.swap(engine.spareResponses);
  // The clock is read only where something uses it (a read costs ~25 ns on this VM, a good
  // part of a small operation's overhead): the timeline's round span, the flight recorder.
  const bool timed = timeline_ && timeline_->active();
  const auto roundStart = timed ? std::chrono::steady_clock::now()
                                : std::chrono::steady_clock::time_point{};
  Status s = negotiator.round(pending, closing, &round, giveUpAt);
  if (s.code() == Code::kInProgress) return RoundOutcome::kHandedOver;
  stats_.cycles.add(1);
  if (state.lastRoundByCaller) stats_.callerRounds.add(1);
  if (!s.isOk()) {
    if (!liveness_.peerGone()) {
      log_->error("negotiation failed, communicator stops: {}", s.message());
      state.tellPeers = true;
      // A close the peers did not answer within its bound: they may be stuck or gone.
      state.peerStuck = closing && s.code() == Code::kShutDown;
    }
    state.endStatus = s;
    state.broken = !closing;
    return RoundOutcome::kStop;
  }
  // (Only responses beyond the replayed ones can move the counters: none in a cache-only round.)
  if (round.fromCache < round.responses.size()) alignAutoNames(round.responses, round.fromCache);
  if (round.slowPath) stats_.slowPath.add(1);
  stats_.cacheHits.add(round.fromCache);
  if (timed) recordRound(roundStart, round, pending);
  if (round.folded != nullptr) {
    // No running step for the recorder: done in this same round, it has nothing left that
    // could hang.
    executor.executeFolded(*round.foldedResponse, *round.folded, pending);
  } else {
    // Negotiated and now running: one step for the recorder (it dates both alike).
    advanceRecorder(round.responses, pending, FlightState::kRunning, coarseNow());
    execute(executor, round.responses, pending);
  }
  if (!executor.failure().isOk()) {
    if (!liveness_.peerGone()) {
      log_->error("a collective was given up on, communicator stops: {}",
                  executor.failure().message());
      state.tellPeers = true;
    }
    state.endStatus = executor.failure();
    state.broken = !closing;
    state.peerStuck = !abort_.load();
    return RoundOutcome::kStop;
  }
  state.productive = !round.responses.empty() || round.folded != nullptr;
  if (round.allClosing) {
    state.closedTogether = true;
    return RoundOutcome::kStop;
  }
  if (round.anyClosing) {
    // Some rank closes the communicator: this was its last round on every rank.
    if (!closing) {
      (void)liveness_.poll();  // its closing notice names it (sent before its round)
      state.leaver = liveness_.closingRanksText();
      state.endStatus = shutDown(state.leaver +
                                 " left the communicator (hcoll_shutdown, hcoll_comm_destroy or "
                                 "process exit)");
      state.broken = true;
      // A peer's clean exit (nothing pending here) is the normal end of a job, not a warning;
      // operations it leaves behind are.
      if (pending.empty()) {
        log_->info("{}; nothing was pending here", state.endStatus.message());
      } else {
        log_->warn("{}: {} operation(s) pending here fail with SHUT_DOWN",
                   state.endStatus.message(), pending.size());
      }
    }
    return RoundOutcome::kStop;
  }
  return RoundOutcome::kContinue;
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
  if (!state.closedTogether) gPartedCommunicators.store(true);
  {
    std::lock_guard<SpinLock> lock(mutex_);
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
                                   const PendingOps& pending, FlightState to,
                                   std::chrono::steady_clock::time_point at) {
  for (const ResponsePtr& r : responses) {
    const LocalOp* op = pending.find(r->spec.name);
    // A folded operation has nothing left that could hang: its next state is done, in this same
    // round, and the recorder dates the running state passed over alike.
    if (op != nullptr && op->foldedResult == nullptr) recorder_->advance(op->flightSeq, to, at);
  }
}

void Communicator::alignAutoNames(const std::vector<ResponsePtr>& responses, size_t first) {
  // A replayed response is one of this rank's pending calls under its own name (the negotiator
  // renames an automatic slot's response to the call that marked it): already counted here.
  const auto begin = responses.begin() + static_cast<std::ptrdiff_t>(first);
  if (std::none_of(begin, responses.end(), [](const ResponsePtr& r) { return r->spec.autoNamed; }))
    return;
  std::lock_guard<SpinLock> lock(mutex_);
  for (auto it = begin; it != responses.end(); ++it) {
    const ResponsePtr& r = *it;
    // In flight here (pending or just submitted): this rank named it itself, so its counter is
    // already past it.
    if (!r->spec.autoNamed || inFlight_.contains(r->spec.name)) continue;
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
  const size_t count = round.folded != nullptr ? 1 : round.responses.size();
  timeline_->cycle(timelineTrack_, start, now, round.slowPath, count);
  for (size_t i = 0; i < count; ++i) {
    const Response& r = round.folded != nullptr ? *round.foldedResponse : *round.responses[i];
    if (const LocalOp* op = pending.find(r.spec.name)) {
      std::string args = std::string(R"({"kind":")") + opKindName(r.spec.kind) + R"(","cached":)" +
                         (i < round.fromCache ? "true" : "false") + "}";
      timeline_->tensorSpan(timelineTrack_, r.spec.name, "NEGOTIATE", op->submittedAt, now, args);
    }
  }
}

}  // namespace hcoll::runtime
