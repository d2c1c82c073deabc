// The caller-progress state machine's transitions (progress_mode.h has the diagram).
#include "runtime/progress_mode.h"

namespace hcoll::runtime {

void ProgressMode::enterDriven() {
  if (mode_ == Mode::kDriven) return;
  mode_ = Mode::kDriven;
  quietTicks_ = 0;
}

void ProgressMode::callerClaimed(bool tookSubmissions) {
  if (tookSubmissions) enterDriven();
}

void ProgressMode::absorbSeatWanted(std::atomic<bool>& seatWanted) {
  if (mode_ == Mode::kThread && seatWanted.exchange(false, std::memory_order_relaxed)) {
    enterDriven();  // callers that wait at once found this thread running their rounds
  }
}

bool ProgressMode::takesWorkNow(Clock::time_point now, Clock::time_point takeAt) {
  if (takeAt > now) return false;
  // A drivable operation left unclaimed past its window: its caller does not wait at once.
  if (takeAt != Clock::time_point::min()) mode_ = Mode::kThread;
  quietTicks_ = 0;
  return true;
}

void ProgressMode::beforeSleep(Clock::time_point now, Clock::time_point takeAt,
                               Clock::time_point* sleepUntil) {
  *sleepUntil = std::min(*sleepUntil, takeAt);
  if (mode_ != Mode::kDriven) return;
  if (takeAt == Clock::time_point::max() && ++quietTicks_ > kDrivenQuietTicks) {
    mode_ = Mode::kThread;  // callers have gone quiet: their next submission wakes the thread
  } else {
    *sleepUntil = std::min(*sleepUntil, now + kDrivenTick);
  }
}

}  // namespace hcoll::runtime
