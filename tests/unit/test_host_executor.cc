// The executor's host path after a backend failure in the middle of a data phase (an MPI call
// that returned an error): the rank may have sent part of the operation's messages and not
// received the rest, so the communicator must stop rather than let a later operation match what
// is left. The same failure on a device plane aborts that plane (test_device_executor.cc).

#include <catch2/catch.hpp>

#include <atomic>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "executor_scaffold.h"
#include "runtime/executor.h"
#include "stub_channel.h"

namespace {

using hcoll::Code;
using hcoll::DataType;
using hcoll::Status;

// A two-rank channel whose every data-plane call fails as a failed MPI call would.
class FailingChannel final : public htest::StubChannel {
 public:
  explicit FailingChannel(Status s) : StubChannel(0, 2, std::move(s)) {}
};

// ... whose allreduce throws instead, as a backend's scratch allocation can (std::bad_alloc).
class ThrowingChannel final : public htest::StubChannel {
 public:
  explicit ThrowingChannel(Status s) : StubChannel(0, 2, std::move(s)) {}
  PendingPtr allreduce(const void*, void*, size_t, DataType, hcoll::ReduceOp) override {
    throw std::bad_alloc();
  }
};

template <typename ChannelType>
struct HostFixture : htest::ExecutorScaffold<ChannelType> {
  explicit HostFixture(Status channelResult)
      : htest::ExecutorScaffold<ChannelType>(std::move(channelResult)) {}
  float data[1024] = {};

  // One host allreduce of 1024 float32 named `name`, through `executor`.
  void run(hcoll::runtime::Executor& executor, const std::string& name) {
    CHECK(this->executeAllreduce(executor, name, data, 1024));
  }

  // Two operations through one executor: the first fails with `code` and stops the communicator
  // (the communicator's loop then tells the peers: communicator_loop.cc), and nothing more runs
  // on the data plane: the second fails with the same status. Nothing is thrown.
  void expectFirstFailureStopsIt(Code code) {
    hcoll::runtime::Executor executor = this->makeExecutor();
    REQUIRE_NOTHROW(run(executor, "first"));
    REQUIRE(this->finishedOps.size() == 1);
    CHECK(this->finishedOps[0].second.code() == code);
    CHECK(executor.failure().code() == code);
    REQUIRE_NOTHROW(run(executor, "second"));
    REQUIRE(this->finishedOps.size() == 2);
    CHECK(this->finishedOps[1].second.code() == code);
  }
};

}  // namespace

TEST_CASE("Executor host path: a backend failure in a data phase stops the communicator",
          "[executor]") {
  HostFixture<FailingChannel> f(Status(Code::kBackend, "MPI_Testall failed: Other MPI error"));
  f.expectFirstFailureStopsIt(Code::kBackend);
}

TEST_CASE("Executor host path: an operation refused whole on every rank does not stop it",
          "[executor]") {
  // UNSUPPORTED from the backend is decided from negotiated sizes, alike on every rank, before
  // any message: the operation fails, the communicator goes on.
  HostFixture<FailingChannel> f(Status(Code::kUnsupported, "more than 2 GiB per rank"));
  hcoll::runtime::Executor executor = f.makeExecutor();
  f.run(executor, "refused");
  REQUIRE(f.finishedOps.size() == 1);
  CHECK(f.finishedOps[0].second.code() == Code::kUnsupported);
  CHECK(executor.failure().isOk());
}

TEST_CASE(
    "Executor host path: an exception from the backend stops the communicator, never "
    "escapes",
    "[executor]") {
  // A scratch allocation that throws in the middle of a batch: the batch ends (its operation
  // fails with NO_MEMORY), the exception goes no further, and the communicator stops as after a
  // failed MPI call (this rank may have posted part of its messages, or none while its peers
  // wait for them).
  HostFixture<ThrowingChannel> f(Status::ok());
  f.expectFirstFailureStopsIt(Code::kNoMemory);
}
