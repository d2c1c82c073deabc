#include "runtime/progress.h"

#include <algorithm>
#include <thread>

namespace hcoll::runtime {

Status waitFor(backends::Pending& pending, const WaitPolicy& policy,
               const std::atomic<bool>& abort,
               const std::function<void(double)>& onSlow) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto nextSlowReport = start + std::chrono::seconds(1);
  Status status;
  while (!pending.poll(&status)) {
    if (abort.load(std::memory_order_relaxed)) {
      return Status(Code::kShutDown, "the communicator was shut down while an operation waited");
    }
    const auto now = Clock::now();
    const auto waited = now - start;
    if (onSlow && now >= nextSlowReport) {
      onSlow(std::chrono::duration<double>(waited).count());
      nextSlowReport = now + std::chrono::seconds(1);
    }
    if (waited < policy.spin) continue;
    if (waited < policy.yieldFor) {
      std::this_thread::yield();
      continue;
    }
    auto sleep = std::min<Clock::duration>(waited / 16, policy.maxSleep);
    std::this_thread::sleep_for(sleep);
  }
  return status;
}

}  // namespace hcoll::runtime
