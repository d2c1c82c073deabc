// The executor's device path against a fake device backend (no GPU): the order of a fused
// batch's calls (wait for the callers' markers, pack, collective, unpack, signal the callers'
// streams, fence), the fusion lease held until the fence finished, and what a failure does:
// the fence still runs, the plane is aborted (its communicator would be out of step), a lease
// whose fence failed is abandoned, and an aborted communicator aborts its planes.

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backends/device.h"
#include "fusion/fusion_allocator.h"
#include "executor_scaffold.h"
#include "runtime/executor.h"
#include "stub_channel.h"

namespace {

using hcoll::Code;
using hcoll::DataType;
using hcoll::ReduceOp;
using hcoll::Status;
using hcoll::backends::Channel;
using hcoll::backends::DeviceCollectives;
using hcoll::backends::finished;
using hcoll::backends::MemoryOps;
using hcoll::backends::PendingPtr;
using hcoll::backends::StreamMarker;
using hcoll::fusion::FusionAllocator;

struct Script {  // what the fakes log, and how they fail
  std::vector<std::string> log;
  int failScaleAt = -1;  // the n-th scaleCopy (0-based) fails
  Status fenceStatus;
  int scales = 0;
};

class FakeMarker final : public StreamMarker {
 public:
  explicit FakeMarker(int id) : id(id) {}
  int id;
};

class FakeMemory final : public MemoryOps {
 public:
  explicit FakeMemory(Script& s) : s_(s) {}
  Status copy(void* dst, const void* src, size_t bytes) override {
    s_.log.push_back("copy");
    std::memmove(dst, src, bytes);
    return Status::ok();
  }
  Status scaleCopy(void* dst, const void* src, size_t count, DataType, double) override {
    if (s_.scales++ == s_.failScaleAt) return Status(Code::kBackend, "launch failed");
    s_.log.push_back("scale");
    std::memmove(dst, src, count * 4);
    return Status::ok();
  }
  Status zero(void* dst, size_t bytes) override {
    std::memset(dst, 0, bytes);
    return Status::ok();
  }
  Status normalizeBool(void*, size_t) override { return Status::ok(); }

 private:
  Script& s_;
};

class FakePlane final : public DeviceCollectives {
 public:
  explicit FakePlane(Script& s) : s_(s), memory_(s) {}
  int32_t device() const override { return 0; }
  void* stream() const override { return const_cast<int*>(&stream_); }
  MemoryOps& memory() override { return memory_; }
  Status waitFor(StreamMarker* marker) override {
    s_.log.push_back("wait " + std::to_string(static_cast<FakeMarker*>(marker)->id));
    return Status::ok();
  }
  Status signal(void*) override {
    s_.log.push_back("signal");
    return Status::ok();
  }
  PendingPtr fence() override {
    s_.log.push_back("fence");
    class Fence final : public hcoll::backends::Pending {
     public:
      explicit Fence(Script& s) : s_(s) {}
      bool poll(Status* status) override {
        // The batch's lease must still be out while the device may use it.
        s_.log.push_back("fenced, leased " +
                         std::to_string(FusionAllocator::instance().stats().leasedNow));
        *status = s_.fenceStatus;
        return true;
      }

     private:
      Script& s_;
    };
    return std::make_unique<Fence>(s_);
  }
  void abort(const Status& why) override { s_.log.push_back("abort: " + why.message()); }
  PendingPtr allreduce(const void* send, void*, size_t count, DataType, ReduceOp) override {
    s_.log.push_back("allreduce " + std::to_string(count) + (send ? " out of place" : ""));
    return finished();
  }
  PendingPtr allgatherv(const void*, size_t, void*, const std::vector<size_t>&) override {
    return finished();
  }
  PendingPtr broadcast(void*, size_t, int) override { return finished(); }
  PendingPtr alltoallv(const void*, const std::vector<size_t>&, void*,
                       const std::vector<size_t>&) override {
    return finished();
  }
  PendingPtr reduceScatter(const void*, void*, const std::vector<size_t>&, DataType,
                           ReduceOp) override {
    return finished();
  }
  PendingPtr barrier() override { return finished(); }

 private:
  Script& s_;
  FakeMemory memory_;
  int stream_ = 0;
};

class FakeBackend final : public hcoll::backends::DeviceBackend {
 public:
  explicit FakeBackend(Script& s) : s_(s) {}
  bool available() override { return true; }
  Status mark(int32_t, void*, hcoll::backends::StreamMarkerPtr*) override { return Status::ok(); }
  Status checkReduction(DataType) const override { return Status::ok(); }
  Status create(Channel&, int32_t, std::unique_ptr<DeviceCollectives>* out) override {
    s_.log.push_back("create");
    *out = std::make_unique<FakePlane>(s_);
    return Status::ok();
  }
  void* allocate(int32_t, size_t bytes) override { return std::malloc(bytes); }
  void release(int32_t, void* p) override { std::free(p); }

 private:
  Script& s_;
};

// "Device" memory on the host; what is still out at the end (an abandoned lease) is freed then.
class HostMemory final : public hcoll::fusion::MemoryProvider {
 public:
  ~HostMemory() override {
    for (void* p : live_) std::free(p);
  }
  void* allocate(const hcoll::fusion::BufferKey&, size_t bytes) override {
    return *live_.insert(std::malloc(bytes)).first;
  }
  void release(const hcoll::fusion::BufferKey&, void* p) override {
    live_.erase(p);
    std::free(p);
  }

 private:
  std::set<void*> live_;
};

// A one-rank channel: the device batches never use it.
class OneRank final : public htest::StubChannel {
 public:
  OneRank() : StubChannel(0, 1, Status::ok()) {}
};

// Two fused allreduces of 4 float32 each, on "device 0", one caller stream.
struct Fixture : htest::ExecutorScaffold<OneRank> {
  Script script;
  FakeBackend backend{script};
  HostMemory memory;
  float data[2][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}};
  float outData[2][4] = {};
  int callerStream = 0;
  int ops = 2;                  // how many allreduces the batch holds
  bool distinctOutput = false;  // outputs in outData instead of aliasing the inputs

  Fixture() {
    hcoll::backends::setDeviceBackendForTesting(&backend);
    FusionAllocator::instance().setDeviceProvider(&memory);
  }
  ~Fixture() {
    FusionAllocator::instance().trim();
    FusionAllocator::instance().setDeviceProvider(nullptr);
    hcoll::backends::setDeviceBackendForTesting(nullptr);
  }

  void runBatch() {
    hcoll::runtime::Executor executor = makeExecutor();
    hcoll::runtime::PendingOps pending;
    std::vector<hcoll::runtime::ResponsePtr> responses;
    for (int k = 0; k < ops; ++k) {
      auto op = std::make_unique<hcoll::runtime::LocalOp>();
      op->spec.name = k == 0 ? "a" : "b";
      op->spec.device = 0;
      op->spec.members.push_back(hcoll::runtime::MemberSpec{DataType::kFloat32, {4}});
      hcoll::TensorDesc t;
      t.data = data[k];
      t.shape = {4};
      t.device = 0;
      t.stream = &callerStream;
      op->inputs.push_back(t);
      if (distinctOutput) t.data = outData[k];
      op->outputs.push_back(t);
      op->markers.push_back(std::make_unique<FakeMarker>(k + 1));
      op->request = std::make_shared<hcoll::runtime::Request>(nullptr);
      auto response = std::make_shared<hcoll::runtime::Response>();
      response->spec = op->spec;
      responses.push_back(response);
      pending.add(std::move(op));
    }
    executor.execute(responses, pending);
    CHECK(pending.empty());
    if (abortAtEnd) abort.store(true);
  }  // the executor and its planes end here
  bool abortAtEnd = false;
};

}  // namespace

TEST_CASE("Executor device path: markers, pack, collective, unpack, signal, then fence",
          "[device]") {
  Fixture f;
  const auto before = FusionAllocator::instance().stats();
  f.runBatch();
  const std::vector<std::string> expected{
      "create", "wait 1",
      "wait 2", "scale",
      "scale",  "allreduce 8",
      "scale",  "scale",
      "signal",  // one caller stream: one signal
      "fence",  "fenced, leased " + std::to_string(before.leasedNow + 1)};
  CHECK(f.script.log == expected);
  REQUIRE(f.finishedOps.size() == 2);
  for (auto& [name, s] : f.finishedOps) CHECK(s.isOk());
  CHECK(FusionAllocator::instance().stats().leasedNow == before.leasedNow);  // returned after
}

TEST_CASE("Executor device path: a lone out-of-place allreduce hands the input to the backend",
          "[device]") {
  Fixture f;
  f.ops = 1;
  f.distinctOutput = true;
  const auto before = FusionAllocator::instance().stats();
  f.runBatch();
  // No copy into the output before the collective, and no unscaled copy after it.
  const std::vector<std::string> expected{
      "create", "wait 1", "allreduce 4 out of place",
      "signal", "fence",  "fenced, leased " + std::to_string(before.leasedNow)};
  CHECK(f.script.log == expected);
  REQUIRE(f.finishedOps.size() == 1);
  CHECK(f.finishedOps[0].second.isOk());
}

TEST_CASE("Executor device path: a failure before the collective still fences, then aborts",
          "[device]") {
  Fixture f;
  const auto before = FusionAllocator::instance().stats();
  f.script.failScaleAt = 1;  // packing the second tensor fails: no collective on this rank
  f.runBatch();
  const std::vector<std::string> expected{"create",
                                          "wait 1",
                                          "wait 2",
                                          "scale",
                                          "signal",
                                          "fence",
                                          "fenced, leased " + std::to_string(before.leasedNow + 1),
                                          "abort: launch failed"};
  CHECK(f.script.log == expected);
  for (auto& [name, s] : f.finishedOps) CHECK(s.code() == Code::kBackend);
}

TEST_CASE("Executor device path: a failed fence abandons the lease and aborts the plane",
          "[device]") {
  Fixture f;
  f.script.fenceStatus = Status(Code::kBackend, "peer gone");
  const auto before = FusionAllocator::instance().stats();
  f.runBatch();
  CHECK(f.script.log.back() == "abort: peer gone");
  const auto after = FusionAllocator::instance().stats();
  CHECK(after.abandoned == before.abandoned + 1);  // the device may still write it
  CHECK(after.leasedNow == before.leasedNow);
  for (auto& [name, s] : f.finishedOps) CHECK(s.code() == Code::kBackend);
}

TEST_CASE("Executor device path: an aborted communicator aborts its planes", "[device]") {
  Fixture f;
  f.abortAtEnd = true;
  f.runBatch();
  CHECK(f.script.log.back() == "abort: the communicator was aborted");
}
