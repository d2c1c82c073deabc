#pragma once
// A communicator: a backend channel, the queue of operations submitted by any user thread, and
// the negotiation thread that owns everything else (pending operations, response cache,
// coordinator state, execution). The thread sleeps while nothing is pending.
//
// Whoever holds the seat runs the loop's rounds: the thread, or a caller waiting on one of its
// host operations (Request -> CallerProgress -> drive()), which then negotiates and executes on
// its own thread while the communicator's thread sleeps: no hand-off to the thread and back, no
// fifth busy thread on a core the backend's polling needs. The thread leaves fresh submissions
// a short claim window for their caller's wait, and takes over whatever a caller leaves
// (an unmatched round, a round the peers had not all entered by the caller's deadline).

#include <array>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "common/logging.h"
#include "runtime/config.h"
#include "runtime/flight_recorder.h"
#include "runtime/in_flight_names.h"
#include "runtime/liveness.h"
#include "runtime/local_op.h"
#include "runtime/progress_mode.h"
#include "runtime/stats.h"
#include "runtime/timeline.h"

namespace hcoll::runtime {

struct RoundResult;
class Negotiator;
class Executor;

struct StatsSnapshot {
  uint64_t cycles, slowPath, cacheHits, backendCalls, fusedTensors, bytes, queueDepth, callerRounds,
      foldedOps;
};

class Communicator {
 public:
  // `timeline` (may be null) outlives the communicator; `timelineTrack` is its track there.
  // `outputs`: where the outputs of its requests come from (the runtime's allocator; null:
  // the output pool).
  Communicator(std::unique_ptr<backends::Channel> channel, const Config& config,
               Timeline* timeline = nullptr, int timelineTrack = -1,
               std::shared_ptr<const OutputAllocator> outputs = nullptr);
  ~Communicator();  // aborts if close() was not called
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // A request for an operation submitted here.
  std::shared_ptr<Request> newRequest() const { return makeRequest(outputs_); }

  int rank() const { return channel_->rank(); }
  int size() const { return channel_->size(); }
  int localRank() const { return channel_->localRank(); }
  int localSize() const { return channel_->localSize(); }

  // Enqueues `op` (naming it "<kind>.<n>" if its name is empty). DUPLICATE_NAME if an op of the
  // same name is in flight, SHUT_DOWN once the communicator is closing. Thread-safe.
  Status submit(std::unique_ptr<LocalOp> op);

  // Collective: drains operations every rank submitted, fails the rest with SHUT_DOWN, stops the
  // thread. Blocks.
  void close();
  // Local: fails everything pending with SHUT_DOWN and stops the thread without waiting for
  // peers (used when the peers are gone).
  void abort();
  // Signals close() without waiting for it (so that many communicators close concurrently).
  void beginClose();
  void waitClosed();

  StatsSnapshot stats() const;

  // hcoll_abort: tells the peers this rank is ending the job (best effort, bounded). Any thread.
  void announceAbort(const std::string& reason);
  // Whether a communicator of this process saw a peer stop in the middle of an operation or not
  // answer its close (or was told so by a peer), or this process aborted: MPI_Finalize, which
  // waits for every peer, could then wait forever.
  static bool anyTroubled();
  // Whether every communicator of this process that stopped did so in a round where every rank
  // was closing it: then all ranks are shutting down together, and a peer's MPI_Finalize that
  // has not come within the exit bound means that peer died after its close. Otherwise a peer may
  // still be busy with work of its own (it stopped talking to this rank but lives on), and
  // MPI_Finalize must wait for it as long as that takes.
  static bool allClosedTogether();

  // The communicator's stall shutdown time (0 = never): the initialize-time setting until
  // changed collectively (hcoll_comm_set_timeout).
  double stallShutdownSeconds() const { return liveness_.stallShutdownSeconds(); }
  void setStallShutdownSeconds(double s) { liveness_.setStallShutdownSeconds(s); }
  // Numbers the collective calls that change the timeout, so their names match across ranks.
  uint64_t nextTimeoutChange() { return timeoutChanges_.fetch_add(1); }

 private:
  // The seat (see the top of this file). Requests of drivable operations point at it without
  // owning it (a shared reference was two locked instructions, ~12 ns on this VM, per small
  // operation), so a seat is never freed: it outlives the communicator (`comm` is null once the
  // thread stopped) and goes back to a process-wide pool when the communicator is destroyed,
  // by then with every request of it completed. A wait that raced with that end may still drive
  // the seat, by then perhaps another communicator's: its request is complete, so that drive
  // runs no round (at most it claims that communicator's submissions, as their callers would).
  class Seat final : public CallerProgress {
   public:
    void drive(const Request& request, std::chrono::steady_clock::time_point giveUpAt) override;
    std::mutex mutex;  // held while running rounds (or touching the engine)
    Communicator* comm = nullptr;
    // A waiting caller found the thread running the rounds: callers wait at once, driven mode
    // would have let them drive (ProgressMode::idleLook consumes it).
    std::atomic<bool> wanted{false};
  };
  // This communicator's seat, from the pool and back to it on destruction (after ~Communicator
  // stopped the thread).
  class SeatLease {
   public:
    SeatLease();
    ~SeatLease();
    SeatLease(const SeatLease&) = delete;
    SeatLease& operator=(const SeatLease&) = delete;
    Seat* get() const { return seat_; }
    Seat* operator->() const { return seat_; }

   private:
    Seat* seat_;
  };

  // The thread's loop (communicator_loop.cc): waitForWork -> collectWork -> closeBoundPassed ->
  // runRound until one says stop, then stop().
  struct LoopState;
  struct Engine;  // what rounds use: pending operations, negotiator, executor, loop state
  struct Wake;    // why waitForWork returned
  enum class RoundOutcome { kContinue, kStop, kHandedOver };
  void run();
  // Sleeps (without the seat) until the thread has something to do; what the engine looked like
  // when the seat was released is passed in.
  Wake waitForWork(bool hadPending, bool productive);
  // Moves submissions into the engine's pending operations; false: stop.
  bool collectWork(Engine& engine, const Wake& wake, bool* closing);
  // Closing and the peers did not close within the bound: stop.
  bool closeBoundPassed(bool closing, LoopState& state);
  // One negotiation round and the execution of what it decided (a caller's: given up on at
  // `giveUpAt` while peers have not entered it, then kHandedOver).
  // An exception from inside (an allocation that failed, say) stops the communicator and tells
  // the peers: the round was left half done, and on the thread it would end the process.
  RoundOutcome runRound(Engine& engine, bool closing,
                        std::chrono::steady_clock::time_point giveUpAt =
                            std::chrono::steady_clock::time_point::max()) noexcept;
  RoundOutcome runRoundUnguarded(Engine& engine, bool closing,
                                 std::chrono::steady_clock::time_point giveUpAt);
  // A waiting caller's turn at the loop (seat held): see Seat.
  void drive(const Request& request, std::chrono::steady_clock::time_point giveUpAt);
  // Moves drivable submissions into the engine for a driving caller; false if anything there or
  // in the engine is not drivable or the communicator is closing (the thread's work then).
  bool claimForCaller(Engine& engine);
  // Runs a round's responses in order: collectives through the executor, communicator creation
  // here (createChannel).
  void execute(Executor& executor, const std::vector<ResponsePtr>& responses,
               PendingOps& pending);
  Status createChannel(const Response& r, LocalOp* op);
  // Tells the peers if needed and fails whatever is still pending.
  void stop(PendingOps& pending, LoopState& state);
  void finish(std::unique_ptr<LocalOp> op, const Status& status);
  void advanceRecorder(const std::vector<ResponsePtr>& responses, const PendingOps& pending,
                       FlightState to, std::chrono::steady_clock::time_point at);
  // Moves this rank's automatic-name counters past "<op>.<n>" operations that completed or
  // failed without it (while it had joined), so its next unnamed call matches the other ranks'.
  // Only responses from `first` on: the replayed ones before it are this rank's own calls.
  void alignAutoNames(const std::vector<ResponsePtr>& responses, size_t first);
  void recordRound(std::chrono::steady_clock::time_point start, const RoundResult& round,
                   const PendingOps& pending);

  std::unique_ptr<backends::Channel> channel_;
  const Config config_;
  Liveness liveness_;
  std::shared_ptr<spdlog::logger> log_;
  CommStats stats_;
  Timeline* timeline_;
  int timelineTrack_;
  std::shared_ptr<FlightRecorder> recorder_;
  std::shared_ptr<const OutputAllocator> outputs_;  // a user's allocator, or null: the pool

  // The queue's mutex is the flight recorder's: every submission and completion touches both.
  SpinLock& mutex_;
  std::condition_variable_any wake_;  // (any: mutex_ is a spin lock)
  std::vector<std::unique_ptr<LocalOp>> incoming_;
  std::atomic<bool> hasIncoming_{false};  // incoming_ is non-empty (read without the mutex)
  static constexpr std::chrono::microseconds kIdlePoll{50};  // poll for more work before sleeping
  InFlightNames inFlight_;  // the names of operations submitted and not finished
  std::array<uint64_t, kNumOpKinds> autoNameCounters_{};
  // Above this many bytes of host memory in one round a caller leaves the work to the thread
  // (CUDA operations do not count: no host temporaries): the fixed cost caller progress saves is
  // noise there, and a backend's collectives may allocate temporary buffers of the message's
  // size in the calling thread. From the application's main thread (glibc's main arena) a fused
  // 27 MiB allreduce then ran at 85 ms instead of 14 ms in half of the steps (page faults on
  // re-grown heap memory); the thread's arena maps them afresh.
  static constexpr size_t kCallerMaxBytes = 4u << 20;
  // Thread or driven mode, and the hand-over flag (progress_mode.h): under mutex_.
  ProgressMode progressMode_;
  SeatLease seat_;
  Engine* engine_ = nullptr;  // under seat_->mutex, while the thread runs
  bool closing_ = false;
  std::atomic<bool> closeRequested_{false};  // closing_, readable by a round in progress
  bool stopped_ = false;
  std::string brokenReason_;  // set when the thread stopped on a failure; submit() reports it
  std::atomic<bool> abort_{false};
  std::atomic<uint64_t> timeoutChanges_{0};
  std::thread thread_;
};

}  // namespace hcoll::runtime
