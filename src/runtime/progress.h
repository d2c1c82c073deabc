#pragma once
// Polls a backend Pending to completion from a communicator's thread without burning a core:
// it spins briefly (the common case finishes in microseconds), then yields, then sleeps for a
// fraction of the time already waited, so a peer that is late costs little CPU and an operation
// that finishes late is noticed within ~6% of its duration.

#include <atomic>
#include <chrono>
#include <type_traits>

#include "backends/backend.h"

namespace hcoll::runtime {

struct WaitPolicy {
  std::chrono::microseconds spin{50};         // busy polling before yielding
  std::chrono::microseconds yieldFor{300};    // polling with sched_yield before sleeping
  std::chrono::microseconds maxSleep{5000};   // longest sleep between polls
  // A caller's thread driving the wait (Communicator::drive) stops here with kInProgress, the
  // Pending still active, so that its own deadline holds; the communicator's thread never stops.
  std::chrono::steady_clock::time_point giveUpAt = std::chrono::steady_clock::time_point::max();
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

// A callable borrowed for the length of one waitFor call: unlike std::function it never
// allocates (a wait runs twice per operation: the readiness round and the data phase).
class SlowCheck {
 public:
  SlowCheck() = default;
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, SlowCheck>>>
  SlowCheck(F& f)  // NOLINT: implicit, like std::function; `f` must outlive the call
      : object_(&f), call_([](void* o, double waited) { return (*static_cast<F*>(o))(waited); }) {}
  explicit operator bool() const { return call_ != nullptr; }
  Status operator()(double waited) const { return call_(object_, waited); }

 private:
  void* object_ = nullptr;
  Status (*call_)(void*, double) = nullptr;
};

// Returns the Pending's status, kShutDown once `abort` becomes true, or kInProgress (the Pending
// still active, not given up on) once the policy's giveUpAt passed. `onSlow` (may be empty)
// is called about every 0.25 s with the seconds waited so far, for stall reporting; a failed
// Status it returns ends the wait with that status (the Pending is then abandoned, still active).
Status waitFor(backends::Pending& pending, const WaitPolicy& policy,
               const std::atomic<bool>& abort, SlowCheck onSlow = {});

}  // namespace hcoll::runtime
