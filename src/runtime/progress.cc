#include "runtime/progress.h"

#include <algorithm>
#include <thread>

namespace hcoll::runtime {

Status waitFor(backends::Pending& pending, const WaitPolicy& policy,
               const std::atomic<bool>& abort, SlowCheck onSlow) {
  using Clock = std::chrono::steady_clock;
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
    if (now >= policy.giveUpAt) return Status(Code::kInProgress, "handed over");
    const auto waited = now - start;
    if (onSlow && now >= nextSlowReport) {
      Status verdict = onSlow(std::chrono::duration<double>(waited).count());
      if (!verdict.isOk()) return verdict;
      nextSlowReport = now + kSlowReportEvery;
    }
    if (waited < policy.spin) continue;
    spinning = false;
    if (waited < policy.yieldFor) {
      std::this_thread::yield();
      continue;
    }
    auto sleep = std::min<Clock::duration>({waited / 16, policy.maxSleep, policy.giveUpAt - now});
    std::this_thread::sleep_for(sleep);
  }
  return status;
}

}  // namespace hcoll::runtime
