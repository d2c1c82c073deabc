#pragma once
// Who runs a communicator's rounds, as one state machine: the communicator's thread, or the
// callers that wait on their own operations (caller progress, docs/architecture.md has the
// diagram). The seat mutex decides who runs a round at any instant; this decides whether a
// submission wakes the thread, when the idle thread takes work a caller could have driven, and
// that work a driving caller leaves behind reaches the thread. Only local: which thread runs a
// round changes nothing the other ranks see.
//
//            caller claimed fresh submissions | idle thread saw "seat wanted"
//   +---------+ -------------------------------------------------> +---------+
//   | kThread |                                                     | kDriven |
//   +---------+ <------------------------------------------------- +---------+
//   every submission    thread took drivable work left unclaimed      drivable submissions do
//   wakes the thread    for kClaimWindow | kDrivenQuietTicks ticks     not wake the thread; it
//                       with nothing submitted                        ticks every kDrivenTick
//
// Orthogonal to the mode, the hand-over flag: a driving caller that leaves work behind (a round
// unmatched, or left in flight at its deadline) sets it, which wakes the thread whatever the
// mode; the thread clears it when it collects the work.
//
// Not thread-safe: the communicator calls it under its mutex. The one signal from outside that
// mutex, "a caller found the seat held", is an atomic flag the seat owns (the seat outlives the
// communicator), passed to idleLook().

#include <algorithm>
#include <atomic>
#include <chrono>

namespace hcoll::runtime {

class ProgressMode {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Mode { kThread, kDriven };

  // A drivable submission waits this long for its caller's claim before the idle thread in
  // driven mode takes it (the caller is then not waiting at once).
  static constexpr std::chrono::microseconds kClaimWindow{100};
  // In driven mode the idle thread looks every tick; after this many ticks with nothing
  // submitted, callers have gone quiet and driven mode ends. Ticks of 1 ms cost a 27 MiB
  // allreduce 80 ms of its 14 ms in one of three steps on a 2-core machine (each wake preempts a
  // polling rank); 5 ms ticks cost nothing measurable.
  static constexpr std::chrono::milliseconds kDrivenTick{5};
  static constexpr int kDrivenQuietTicks = 20;

  Mode mode() const { return mode_; }
  bool handedOver() const { return handedOver_; }

  // A submission: must it wake the thread? A drivable one in driven mode will most likely be
  // driven by its caller's wait; waking the thread would cost a context switch on a core the
  // backend's progress needs.
  bool wakesThread(bool drivable) const { return !drivable || mode_ == Mode::kThread; }

  // A waiting caller claimed the queue to drive it; `tookSubmissions`: fresh ones were there.
  void callerClaimed(bool tookSubmissions);
  // A driving caller stopped driving; `leftWork`: something remains (pending, a round in flight,
  // newer submissions) that the thread must now run.
  void callerLeft(bool leftWork) { handedOver_ = handedOver_ || leftWork; }
  // The thread moved the submissions (and whatever a caller handed over) into its engine.
  void threadCollected() { handedOver_ = false; }

  // The idle thread's look, in this order, each time it wakes:
  // 1. `seatWanted` is set by a caller that waits at once and found the thread running its
  //    rounds (driven mode would have let it drive); consumed here.
  void absorbSeatWanted(std::atomic<bool>& seatWanted);
  // 2. Does the thread take the submitted work now (`takeAt`: see takeAt())?
  bool takesWorkNow(Clock::time_point now, Clock::time_point takeAt);
  // 3. (After any notice check.) About to sleep: caps *sleepUntil by the driven-mode tick, and
  //    counts the tick towards the end of driven mode.
  void beforeSleep(Clock::time_point now, Clock::time_point takeAt, Clock::time_point* sleepUntil);

  // When submitted work becomes the thread's: Clock::time_point::max() when nothing is
  // submitted, min() (at once) in thread mode or for a non-drivable operation, else the end of
  // the earliest claim window. A window starts when the thread first sees the submission (its
  // look at `now` dates every one not yet seen): a caller that reaches its wait within a window
  // of that look drives its own operation. `ops` is a range of pointers to operations with
  // `callerDrivable` and `firstSeen` (a default time point: not seen yet).
  template <typename Ops>
  Clock::time_point takeAt(const Ops& ops, Clock::time_point now) const {
    if (ops.empty()) return Clock::time_point::max();
    if (mode_ == Mode::kThread) return Clock::time_point::min();
    auto at = Clock::time_point::max();
    for (const auto& op : ops) {
      if (!op->callerDrivable) return Clock::time_point::min();
      if (op->firstSeen == Clock::time_point{}) op->firstSeen = now;
      at = std::min(at, op->firstSeen + kClaimWindow);
    }
    return at;
  }

 private:
  void enterDriven();

  Mode mode_ = Mode::kThread;
  bool handedOver_ = false;
  int quietTicks_ = 0;  // ticks with nothing submitted since driven mode began or work was taken
};

}  // namespace hcoll::runtime
