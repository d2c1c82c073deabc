// The poll loop and the bounds of BoundedWait (bounded_wait.h).
#include "runtime/bounded_wait.h"

#include <algorithm>
#include <thread>

namespace hcoll::runtime {
namespace {

using Clock = std::chrono::steady_clock;

// Polls `pending` until it finishes (*finished), `abort` is set or `giveUpAt` passes.
// `onSlow(now, start)` runs about every 0.25 s; a failed Status it returns ends the loop with it.
template <typename OnSlow>
Status pollLoop(backends::Pending& pending, const WaitPolicy& policy,
                const std::atomic<bool>& abort, Clock::time_point giveUpAt, OnSlow&& onSlow,
                bool* finished) {
  *finished = false;
  constexpr auto kSlowReportEvery = std::chrono::milliseconds(250);
  // The wait's start is its first clock read: most waits of a small operation end within the
  // first polls, before any.
  Clock::time_point start{};
  Clock::time_point nextSlowReport{};
  bool started = false;
  Status status;
  // Reading the clock costs as much as a poll on a virtual machine (a quarter of the CPU time
  // of a 32 KiB broadcast went to clock_gettime): while spinning, look at it every 8th poll.
  unsigned polls = 0;
  bool spinning = policy.spin.count() > 0;
  while (!pending.poll(&status)) {
    if (abort.load(std::memory_order_relaxed)) {
      return Status(Code::kShutDown, "the communicator was shut down while an operation waited");
    }
    if (spinning && (++polls & 7) != 0) continue;
    const auto now = Clock::now();
    if (!started) {
      start = now;
      nextSlowReport = now + kSlowReportEvery;
      started = true;
    }
    if (now >= giveUpAt) return Status(Code::kInProgress, "handed over");
    const auto waited = now - start;
    if (now >= nextSlowReport) {
      Status verdict = onSlow(now, start);
      if (!verdict.isOk()) return verdict;
      nextSlowReport = now + kSlowReportEvery;
    }
    if (waited < policy.spin) continue;
    spinning = false;
    if (waited < policy.yieldFor) {
      std::this_thread::yield();
      continue;
    }
    auto sleep = std::min<Clock::duration>({waited / 16, policy.maxSleep, giveUpAt - now});
    std::this_thread::sleep_for(sleep);
  }
  *finished = true;
  return status;
}

}  // namespace

Status waitUnbounded(backends::Pending& pending, const WaitPolicy& policy,
                     const std::atomic<bool>& abort) {
  bool finished = false;
  return pollLoop(
      pending, policy, abort, Clock::time_point::max(),
      [](Clock::time_point, Clock::time_point) { return Status::ok(); }, &finished);
}

Status BoundedWait::run(backends::Pending& step, Report& report, const Options& options) {
  // When (seconds after `since`) this wait first saw the communicator closing; < 0: not yet.
  double closingSince = options.closing ? 0.0 : -1.0;
  bool finished = false;
  Status status = pollLoop(
      step, policy_, abort_, options.giveUpAt,
      [&](Clock::time_point now, Clock::time_point start) {
        // `since` defaults to the loop's own start: no clock read of its own (waits are short).
        const double waited =
            std::chrono::duration<double>(now - options.since.value_or(start)).count();
        return check(report, options, waited, &closingSince);
      },
      &finished);
  gaveUp_ = !finished && status.code() != Code::kInProgress;
  return status;
}

Status BoundedWait::check(Report& report, const Options& options, double waited,
                          double* closingSince) {
  // A peer that gave up will never take part again: fail now with its reason.
  Status verdict = liveness_.poll();
  if (verdict.isOk()) {
    if (*closingSince < 0 && closeRequested_ != nullptr && closeRequested_->load()) {
      *closingSince = waited;
    }
    if (*closingSince >= 0 && waited - *closingSince >= liveness_.closeTimeoutSeconds()) {
      verdict = report.closeBoundPassed(waited);
    }
  }
  if (verdict.isOk()) {
    report.slow(waited);
    const double shutdownAfter = liveness_.stallShutdownSeconds();
    if (!options.closing && shutdownAfter > 0 && waited >= shutdownAfter) {
      verdict = report.stalled(waited);
    }
  }
  return verdict;
}

}  // namespace hcoll::runtime
