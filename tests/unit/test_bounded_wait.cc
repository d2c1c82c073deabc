// BoundedWait (runtime/bounded_wait.h) without MPI: fake Pendings that finish after N polls or
// never, fake peer signals. Each bound ends a wait with its status (stall: kTimeout, close and
// abort: kShutDown, a peer's notice: its failure), giveUpAt hands the step back still active, and
// a step given up on is kept (never destroyed) with its buffers. The data plane's own message for
// the stall bound is checked through an Executor.

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/keep_forever.h"
#include "executor_scaffold.h"
#include "runtime/bounded_wait.h"
#include "runtime/liveness.h"
#include "stub_channel.h"

namespace {

using hcoll::Code;
using hcoll::Status;
using hcoll::backends::PeerSignals;
using hcoll::backends::Pending;
using hcoll::backends::PendingPtr;
using hcoll::runtime::BoundedWait;
using hcoll::runtime::Liveness;
using Clock = std::chrono::steady_clock;
using Flag = std::shared_ptr<std::atomic<bool>>;

Flag makeFlag() { return std::make_shared<std::atomic<bool>>(false); }

// Finishes with `result` at its `finishAfter`-th poll (never if < 0), or once `release` is set;
// sets `destroyed` when destroyed.
class FakePending final : public Pending {
 public:
  FakePending(int finishAfter, Flag destroyed, Status result = Status::ok(), Flag release = {})
      : finishAfter_(finishAfter),
        destroyed_(std::move(destroyed)),
        result_(std::move(result)),
        release_(std::move(release)) {}
  ~FakePending() override { destroyed_->store(true); }
  bool poll(Status* status) override {
    ++polls_;
    if ((finishAfter_ >= 0 && polls_ >= finishAfter_) || (release_ && release_->load())) {
      *status = result_;
      return true;
    }
    return false;
  }

 private:
  int finishAfter_;
  int polls_ = 0;
  Flag destroyed_;
  Status result_;
  Flag release_;
};

// Peer signals whose notices a test queues.
class FakeSignals final : public PeerSignals {
 public:
  bool pollNotice(Notice* out) override {
    if (queued.empty()) return false;
    *out = queued.front();
    queued.pop_front();
    return true;
  }
  std::deque<Notice> queued;
};

class SignalChannel final : public htest::StubChannel {
 public:
  SignalChannel() : StubChannel(0, 2, htest::unusedCall()) {}
  PeerSignals& signals() override { return fake; }
  FakeSignals fake;
};

// The plane's words: fixed messages, and how often the wait reported itself slow.
class TestReport final : public BoundedWait::Report {
 public:
  void slow(double) override { ++slowCalls; }
  Status stalled(double waited) override {
    stalledAt = waited;
    return Status(Code::kTimeout, "test: stalled");
  }
  Status closeBoundPassed(double waited) override {
    closedAt = waited;
    return Status(Code::kShutDown, "test: close bound");
  }
  int slowCalls = 0;
  double stalledAt = -1;
  double closedAt = -1;
};

// Moved into the kept list with a step; records whether the kept object is ever destroyed.
struct TrackedBuffer {
  explicit TrackedBuffer(Flag f) : destroyed(std::move(f)) {}
  TrackedBuffer(TrackedBuffer&&) = default;
  ~TrackedBuffer() {
    if (destroyed) destroyed->store(true);
  }
  Flag destroyed;
};

struct Fixture {
  SignalChannel channel;
  Liveness liveness{channel, 0.0};
  std::atomic<bool> abort{false};
  std::atomic<bool> closeRequested{false};
  BoundedWait wait{liveness, abort, hcoll::runtime::controlPlanePolicy()};
  TestReport report;
  Fixture() { wait.watchCloseRequests(closeRequested); }
};

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

TEST_CASE("BoundedWait: a step that finishes is returned with its status", "[bounded_wait]") {
  Fixture f;
  f.liveness.setStallShutdownSeconds(5);
  Flag destroyed = makeFlag();
  PendingPtr step = std::make_unique<FakePending>(200, destroyed);
  const size_t keptBefore = hcoll::keptForeverCount();
  const Status s = f.wait.wait(step, f.report, {});
  CHECK(s.isOk());
  CHECK_FALSE(f.wait.gaveUp());
  REQUIRE(step != nullptr);  // still the caller's
  CHECK(hcoll::keptForeverCount() == keptBefore);
  step.reset();
  CHECK(destroyed->load());
}

TEST_CASE("BoundedWait: the stall bound ends the wait with the plane's kTimeout",
          "[bounded_wait]") {
  Fixture f;
  f.liveness.setStallShutdownSeconds(0.6);
  Flag destroyed = makeFlag();
  Flag bufferDestroyed = makeFlag();
  PendingPtr step = std::make_unique<FakePending>(-1, destroyed);
  TrackedBuffer buffer(bufferDestroyed);
  const size_t keptBefore = hcoll::keptForeverCount();
  const auto start = Clock::now();
  const Status s = f.wait.wait(step, f.report, {}, buffer);
  const double took = secondsSince(start);
  CHECK(s.code() == Code::kTimeout);
  CHECK(s.message() == "test: stalled");
  CHECK(took >= 0.6);
  CHECK(took < 3.0);
  CHECK(f.report.stalledAt >= 0.6);
  CHECK(f.report.slowCalls >= 2);  // every ~0.25 s
  CHECK(f.wait.gaveUp());
  // Given up on: kept for the life of the process, with its buffer, never destroyed.
  CHECK(step == nullptr);
  CHECK(buffer.destroyed == nullptr);  // moved into the kept list
  CHECK(hcoll::keptForeverCount() == keptBefore + 1);
  CHECK_FALSE(destroyed->load());
  CHECK_FALSE(bufferDestroyed->load());
}

TEST_CASE("BoundedWait: closing, the close bound counts from `since` and ends the wait with "
          "kShutDown",
          "[bounded_wait]") {
  Fixture f;
  f.liveness.setStallShutdownSeconds(0.5);  // the close bound: min(stall, 30 s)
  Flag destroyed = makeFlag();
  PendingPtr step = std::make_unique<FakePending>(-1, destroyed);
  BoundedWait::Options options;
  options.closing = true;
  // The close bound counts from `since`: already 0.4 s of it passed.
  options.since = Clock::now() - std::chrono::milliseconds(400);
  const auto start = Clock::now();
  const Status s = f.wait.wait(step, f.report, options);
  CHECK(s.code() == Code::kShutDown);
  CHECK(s.message() == "test: close bound");
  CHECK(f.report.stalledAt < 0);
  CHECK(f.report.closedAt >= 0.5);
  CHECK(secondsSince(start) < 0.45);  // not a full 0.5 s from the call
  CHECK(f.wait.gaveUp());
  CHECK(step == nullptr);
  CHECK_FALSE(destroyed->load());
}

TEST_CASE("BoundedWait: abort ends the wait with kShutDown", "[bounded_wait]") {
  Fixture f;
  f.liveness.setStallShutdownSeconds(0);  // no stall bound
  Flag destroyed = makeFlag();
  PendingPtr step = std::make_unique<FakePending>(-1, destroyed);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    f.abort.store(true);
  });
  const Status s = f.wait.wait(step, f.report, {});
  aborter.join();
  CHECK(s.code() == Code::kShutDown);
  CHECK(s.message() == "the communicator was shut down while an operation waited");
  CHECK(f.wait.gaveUp());
  CHECK(step == nullptr);
  CHECK_FALSE(destroyed->load());
}

TEST_CASE("BoundedWait: a peer's notice ends the wait with that peer's failure",
          "[bounded_wait]") {
  Fixture f;
  f.liveness.setStallShutdownSeconds(0);
  PeerSignals::Notice closing;
  closing.rank = 1;
  closing.kind = PeerSignals::NoticeKind::kClosing;  // not a failure: the wait goes on
  f.channel.fake.queued.push_back(closing);
  PeerSignals::Notice gone;
  gone.rank = 1;
  gone.kind = PeerSignals::NoticeKind::kGone;
  gone.code = Code::kTimeout;
  gone.text = "it timed out";
  f.channel.fake.queued.push_back(gone);
  Flag destroyed = makeFlag();
  PendingPtr step = std::make_unique<FakePending>(-1, destroyed);
  const auto start = Clock::now();
  const Status s = f.wait.wait(step, f.report, {});
  CHECK(s.code() == Code::kTimeout);
  CHECK(s.message() == "rank 1 gave up on the communicator: it timed out");
  CHECK(secondsSince(start) < 2.0);  // at the first look, ~0.25 s
  CHECK(f.wait.gaveUp());
  CHECK(f.liveness.peerGone());
  CHECK(step == nullptr);
  CHECK_FALSE(destroyed->load());
}

TEST_CASE("BoundedWait: giveUpAt hands the step back still active", "[bounded_wait]") {
  Fixture f;
  f.liveness.setStallShutdownSeconds(5);
  Flag destroyed = makeFlag();
  Flag release = makeFlag();
  PendingPtr step = std::make_unique<FakePending>(-1, destroyed, Status::ok(), release);
  const size_t keptBefore = hcoll::keptForeverCount();
  BoundedWait::Options options;
  options.giveUpAt = Clock::now() + std::chrono::milliseconds(50);
  const Status s = f.wait.wait(step, f.report, options);
  CHECK(s.code() == Code::kInProgress);
  CHECK_FALSE(f.wait.gaveUp());
  REQUIRE(step != nullptr);  // the caller's, to resume
  CHECK(hcoll::keptForeverCount() == keptBefore);
  // Resumed (from any thread), it finishes.
  release->store(true);
  CHECK(f.wait.wait(step, f.report, {}).isOk());
  CHECK(step != nullptr);
  step.reset();
  CHECK(destroyed->load());
}

TEST_CASE("BoundedWait: a step that failed is kept, without giving up", "[bounded_wait]") {
  Fixture f;
  Flag destroyed = makeFlag();
  PendingPtr step =
      std::make_unique<FakePending>(3, destroyed, Status(Code::kBackend, "MPI_Test failed"));
  std::vector<uint64_t> words(4, 7);
  const size_t keptBefore = hcoll::keptForeverCount();
  const Status s = f.wait.wait(step, f.report, {}, words);
  CHECK(s.code() == Code::kBackend);
  CHECK(s.message() == "MPI_Test failed");
  CHECK_FALSE(f.wait.gaveUp());
  // A failed transport step may leave transfers active: it and its buffers are kept.
  CHECK(step == nullptr);
  CHECK(words.empty());
  CHECK(hcoll::keptForeverCount() == keptBefore + 1);
  CHECK_FALSE(destroyed->load());
}

TEST_CASE("waitUnbounded: the Pending's status, or kShutDown on abort", "[bounded_wait]") {
  std::atomic<bool> abort{false};
  Flag destroyed = makeFlag();
  FakePending done(5, destroyed, Status(Code::kMismatch, "differs"));
  CHECK(hcoll::runtime::waitUnbounded(done, hcoll::runtime::controlPlanePolicy(), abort).code() ==
        Code::kMismatch);
  FakePending never(-1, destroyed);
  abort.store(true);
  CHECK(hcoll::runtime::waitUnbounded(never, hcoll::runtime::controlPlanePolicy(), abort).code() ==
        Code::kShutDown);
}

namespace {

// A two-rank channel whose allreduce never finishes (the peer stopped), and whose Pendings
// record their destruction.
class StuckChannel final : public htest::StubChannel {
 public:
  StuckChannel() : StubChannel(0, 2, htest::unusedCall()) {}
  PendingPtr allreduce(const void*, void*, size_t, hcoll::DataType, hcoll::ReduceOp) override {
    return std::make_unique<FakePending>(-1, destroyed);
  }
  Flag destroyed = makeFlag();
};

}  // namespace

TEST_CASE("Executor data phase: the stall bound fails it with TIMEOUT and keeps the step",
          "[bounded_wait]") {
  htest::ExecutorScaffold<StuckChannel> scaffold;
  scaffold.liveness.setStallShutdownSeconds(0.5);
  hcoll::runtime::Executor executor = scaffold.makeExecutor();
  float data[16] = {};
  scaffold.executeAllreduce(executor, "stuck", data, 16);
  REQUIRE(scaffold.finishedOps.size() == 1);
  const Status& s = scaffold.finishedOps[0].second;
  CHECK(s.code() == Code::kTimeout);
  CHECK(s.message().rfind("timed out after 0 s in the data phase of a collective on rank 0: a "
                          "peer stopped taking part (it is stuck or has exited). The "
                          "communicator is unusable from now on",
                          0) == 0);
  CHECK(executor.failure().code() == Code::kTimeout);
  CHECK_FALSE(scaffold.channel.destroyed->load());  // kept: MPI may still complete it
}
