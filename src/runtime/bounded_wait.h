#pragma once
// Every wait of a communicator on a backend step — a negotiation round's control-plane
// collective (Negotiator::waitControl) and a data phase or device fence (Executor::waitData) —
// goes through one BoundedWait, so that no wait outlives a peer that left, stalled or gave up:
// - how it polls (WaitPolicy: spin, then yield, then sleep a fraction of the time waited);
// - the bounds, the same on both planes (from runtime::Liveness): the stall shutdown time
//   (kTimeout), the close bound once the communicator is asked to close (kShutDown), abort
//   (kShutDown), and a peer's "gone" notice (that peer's failure), looked at every 0.25 s;
// - what happens to a step it gives up on: MPI or the device may still complete it and touch its
//   buffers, so the Pending and the buffers go to keepForever (common/keep_forever.h) and are
//   never destroyed.
// The plane says only what its failures say (BoundedWait::Report); the helper decides when.

#include <atomic>
#include <chrono>
#include <optional>

#include "backends/backend.h"
#include "common/keep_forever.h"
#include "runtime/liveness.h"

namespace hcoll::runtime {

struct WaitPolicy {
  std::chrono::microseconds spin{50};        // busy polling before yielding
  std::chrono::microseconds yieldFor{300};   // polling with sched_yield before sleeping
  std::chrono::microseconds maxSleep{5000};  // longest sleep between polls
};

// The control plane waits for peers that may be idle. The data plane runs operations every rank
// already agreed to start, and MPI advances a non-blocking collective only inside MPI calls: a
// sleeping poller stalls the pipeline of a large collective on every rank, so it keeps polling
// (yielding the core to other threads) for as long as a blocking MPI call would, and sleeps only
// briefly, after seconds, when a peer is evidently stuck.
// (A rank whose peer is idle would otherwise compete for a core with other communicators for its
// whole yield phase: with 2 ms, a stalled communicator cost a busy one ~10 % of its throughput.)
inline WaitPolicy controlPlanePolicy() { return WaitPolicy{}; }
inline WaitPolicy dataPlanePolicy() {
  return WaitPolicy{std::chrono::microseconds(200), std::chrono::microseconds(5000000),
                    std::chrono::microseconds(200)};
}

// The poll loop alone, with no bound but `abort`: for the settings check at initialize, which
// runs before any communicator (and so any Liveness) exists. Returns the Pending's status, or
// kShutDown once `abort` is true.
Status waitUnbounded(backends::Pending& pending, const WaitPolicy& policy,
                     const std::atomic<bool>& abort);

class BoundedWait {
 public:
  using Clock = std::chrono::steady_clock;

  // A plane's words for its failures and what it does while a wait is slow.
  class Report {
   public:
    // About every 0.25 s, with the seconds waited (stall warnings, stall notes to peers).
    virtual void slow(double waited) { (void)waited; }
    // The stall shutdown time passed: the kTimeout to end the wait with (and its logging).
    virtual Status stalled(double waited) = 0;
    // Closing, the close bound passed: the kShutDown to end the wait with.
    virtual Status closeBoundPassed(double waited) = 0;

   protected:
    ~Report() = default;
  };

  struct Options {
    // When the wait began (default: now). A round's entry resumed after a caller handed it over
    // counts from the round's start.
    std::optional<Clock::time_point> since;
    // Part of closing from its start: the close bound counts from `since` and the stall bound
    // does not apply (the close bound is the shorter one).
    bool closing = false;
    // A caller's thread driving the wait (Communicator::drive) stops here with kInProgress, the
    // step still active and still the caller's, so that its own deadline holds.
    Clock::time_point giveUpAt = Clock::time_point::max();
  };

  BoundedWait(Liveness& liveness, const std::atomic<bool>& abort, WaitPolicy policy)
      : liveness_(liveness), abort_(abort), policy_(policy) {}
  // `flag` becomes true when the communicator is asked to close: from then on a wait also ends
  // after the close bound.
  void watchCloseRequests(const std::atomic<bool>& flag) { closeRequested_ = &flag; }

  // Polls `step` until it finishes and returns its status, or gives up on it: kShutDown once the
  // communicator is aborted ("the communicator was shut down while an operation waited") or the
  // close bound passed (report.closeBoundPassed), kTimeout past the stall shutdown time
  // (report.stalled), the failure a peer's notice reports. Returns kInProgress once
  // options.giveUpAt passed (`step` untouched). A step that did not finish ok — given up on, or
  // failed (a failed backend step may leave transfers active) — goes to keepForever together
  // with `buffers` (moved from: what the step reads or writes), and `step` becomes null.
  template <typename... Buffers>
  Status wait(backends::PendingPtr& step, Report& report, const Options& options,
              Buffers&... buffers) {
    Status status = run(*step, report, options);
    if (!status.isOk() && status.code() != Code::kInProgress) {
      keepForever(std::move(step), std::move(buffers)...);  // leaves `step` null
    }
    return status;
  }
  // Whether the last wait ended by giving up (abort, a bound, a peer's notice) rather than by the
  // step finishing or giveUpAt.
  bool gaveUp() const { return gaveUp_; }

 private:
  Status run(backends::Pending& step, Report& report, const Options& options);
  // The bounds, checked about every 0.25 s; ok to go on waiting.
  // `waited`: seconds since options.since; *closingSince: when (in the same seconds) the wait
  // first saw the communicator closing, < 0 before.
  Status check(Report& report, const Options& options, double waited, double* closingSince);

  Liveness& liveness_;
  const std::atomic<bool>& abort_;
  const std::atomic<bool>* closeRequested_ = nullptr;
  WaitPolicy policy_;
  bool gaveUp_ = false;
};

}  // namespace hcoll::runtime
