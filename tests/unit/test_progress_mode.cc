// The caller-progress state machine (runtime/progress_mode.h): every transition of its diagram,
// driven with explicit times (no threads, no sleeping).
#include <catch2/catch.hpp>

#include <atomic>
#include <memory>
#include <vector>

#include "runtime/progress_mode.h"

using hcoll::runtime::ProgressMode;
using Clock = ProgressMode::Clock;
using Mode = ProgressMode::Mode;

namespace {

struct FakeOp {
  bool callerDrivable;
  Clock::time_point firstSeen;  // when the thread first saw it (default: not yet)
};
using Ops = std::vector<std::unique_ptr<FakeOp>>;

Ops ops(std::initializer_list<FakeOp> list) {
  Ops out;
  for (const FakeOp& op : list) out.push_back(std::make_unique<FakeOp>(op));
  return out;
}

// Puts `mode` in driven mode the way a caller does: it claims fresh submissions.
void drive(ProgressMode& mode) {
  mode.callerClaimed(/*tookSubmissions=*/true);
  REQUIRE(mode.mode() == Mode::kDriven);
}

}  // namespace

TEST_CASE("progress mode starts in thread mode: every submission wakes the thread",
          "[progress_mode]") {
  ProgressMode mode;
  CHECK(mode.mode() == Mode::kThread);
  CHECK_FALSE(mode.handedOver());
  CHECK(mode.wakesThread(true));
  CHECK(mode.wakesThread(false));
  const auto t0 = Clock::now();
  // Thread mode takes submitted work at once, drivable or not.
  CHECK(mode.takeAt(ops({{true, t0}}), t0) == Clock::time_point::min());
  CHECK(mode.takesWorkNow(t0, mode.takeAt(ops({{true, t0}}), t0)));
  CHECK(mode.mode() == Mode::kThread);
}

TEST_CASE("thread -> driven: a caller claims fresh submissions", "[progress_mode]") {
  ProgressMode mode;
  mode.callerClaimed(/*tookSubmissions=*/false);  // only the engine's own pending work
  CHECK(mode.mode() == Mode::kThread);
  mode.callerClaimed(/*tookSubmissions=*/true);
  CHECK(mode.mode() == Mode::kDriven);
  CHECK_FALSE(mode.wakesThread(true));  // the caller will drive it from its wait
  CHECK(mode.wakesThread(false));       // a non-drivable one still wakes the thread
}

TEST_CASE("thread -> driven: the idle thread absorbs 'seat wanted'", "[progress_mode]") {
  ProgressMode mode;
  std::atomic<bool> wanted{false};
  mode.absorbSeatWanted(wanted);
  CHECK(mode.mode() == Mode::kThread);
  wanted = true;
  mode.absorbSeatWanted(wanted);
  CHECK(mode.mode() == Mode::kDriven);
  CHECK_FALSE(wanted.load());  // consumed
  // In driven mode the flag is left for later (nothing to change).
  wanted = true;
  mode.absorbSeatWanted(wanted);
  CHECK(wanted.load());
}

TEST_CASE("driven: a drivable submission becomes the thread's after its claim window",
          "[progress_mode]") {
  ProgressMode mode;
  drive(mode);
  const auto t0 = Clock::now();
  const Ops submitted = ops({{true, t0}, {true, t0 + std::chrono::microseconds(30)}});
  const auto at = mode.takeAt(submitted, t0);
  CHECK(at == t0 + ProgressMode::kClaimWindow);  // the earliest window ends first
  CHECK_FALSE(mode.takesWorkNow(t0 + std::chrono::microseconds(99), at));
  CHECK(mode.mode() == Mode::kDriven);
  // driven -> thread: left unclaimed, so its caller does not wait at once.
  CHECK(mode.takesWorkNow(t0 + ProgressMode::kClaimWindow, at));
  CHECK(mode.mode() == Mode::kThread);
  CHECK(mode.wakesThread(true));
}

TEST_CASE("driven: a claim window starts when the thread first sees the submission",
          "[progress_mode]") {
  ProgressMode mode;
  drive(mode);
  const auto t0 = Clock::now();
  const auto t1 = t0 + std::chrono::milliseconds(3);  // the thread's next look
  Ops submitted = ops({{true, {}}});
  const auto at = mode.takeAt(submitted, t1);
  CHECK(submitted[0]->firstSeen == t1);  // dated by this look
  CHECK(at == t1 + ProgressMode::kClaimWindow);
  // A later look keeps the first date.
  CHECK(mode.takeAt(submitted, t1 + std::chrono::microseconds(50)) == at);
  CHECK_FALSE(mode.takesWorkNow(t1 + std::chrono::microseconds(50), at));
  CHECK(mode.takesWorkNow(at, at));
}

TEST_CASE("driven: a non-drivable submission is taken at once and driven mode stays",
          "[progress_mode]") {
  ProgressMode mode;
  drive(mode);
  const auto t0 = Clock::now();
  const auto at = mode.takeAt(ops({{true, t0}, {false, t0}}), t0);
  CHECK(at == Clock::time_point::min());
  CHECK(mode.takesWorkNow(t0, at));
  CHECK(mode.mode() == Mode::kDriven);
}

TEST_CASE("driven: the idle thread ticks, and quiet ticks end driven mode", "[progress_mode]") {
  ProgressMode mode;
  drive(mode);
  const auto t0 = Clock::now();
  const auto nothing = mode.takeAt(Ops{}, t0);
  CHECK(nothing == Clock::time_point::max());
  auto now = t0;
  for (int tick = 1; tick <= ProgressMode::kDrivenQuietTicks; ++tick) {
    auto until = now + std::chrono::seconds(1);  // the next notice check
    mode.beforeSleep(now, nothing, &until);
    CHECK(until == now + ProgressMode::kDrivenTick);  // capped by the tick
    CHECK(mode.mode() == Mode::kDriven);
    now = until;
  }
  // driven -> thread: one tick more with nothing submitted.
  auto until = now + std::chrono::seconds(1);
  mode.beforeSleep(now, nothing, &until);
  CHECK(mode.mode() == Mode::kThread);
  CHECK(until == now + std::chrono::seconds(1));  // no tick cap in thread mode
}

TEST_CASE("driven: taking work restarts the quiet count; a submission in the window is no tick",
          "[progress_mode]") {
  ProgressMode mode;
  drive(mode);
  auto now = Clock::now();
  for (int tick = 0; tick < ProgressMode::kDrivenQuietTicks; ++tick) {
    auto until = Clock::time_point::max();
    mode.beforeSleep(now, Clock::time_point::max(), &until);
  }
  // A submission waiting for its claim window: sleeping until the window ends is not quiet.
  const auto at = now + ProgressMode::kClaimWindow;
  auto until = Clock::time_point::max();
  mode.beforeSleep(now, at, &until);
  CHECK(until == at);
  CHECK(mode.mode() == Mode::kDriven);
  // The thread takes a non-drivable operation (driven mode stays) and counts afresh.
  CHECK(mode.takesWorkNow(now, Clock::time_point::min()));
  for (int tick = 0; tick < ProgressMode::kDrivenQuietTicks; ++tick) {
    until = Clock::time_point::max();
    mode.beforeSleep(now, Clock::time_point::max(), &until);
  }
  CHECK(mode.mode() == Mode::kDriven);
}

TEST_CASE("hand-over: a caller leaving work sets the flag until the thread collects",
          "[progress_mode]") {
  ProgressMode mode;
  drive(mode);
  mode.callerLeft(/*leftWork=*/false);
  CHECK_FALSE(mode.handedOver());
  mode.callerLeft(/*leftWork=*/true);
  CHECK(mode.handedOver());
  mode.callerLeft(/*leftWork=*/false);  // a later caller that left nothing does not clear it
  CHECK(mode.handedOver());
  CHECK(mode.mode() == Mode::kDriven);  // orthogonal to the mode
  mode.threadCollected();
  CHECK_FALSE(mode.handedOver());
}
