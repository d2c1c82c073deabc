// StreamOrder's event bookkeeping against a fake EventApi: what waits on what, pooling, and
// asynchronous errors finishing a fence instead of hanging it.

#include "hcoll/config.h"
#if HCOLL_WITH_NCCL  // the backend sources are built with it

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backends/nccl/stream_order.h"

namespace {

using hcoll::Code;
using hcoll::Status;
using hcoll::backends::nccl::EventApi;
using hcoll::backends::nccl::EventState;
using hcoll::backends::nccl::StreamOrder;

// Events are ints; a stream is "done" up to the events the test completes by hand.
class FakeEvents final : public EventApi {
 public:
  Status createEvent(void** event) override {
    *event = reinterpret_cast<void*>(static_cast<intptr_t>(++next_));
    live.insert({*event, true});
    return Status::ok();
  }
  void destroyEvent(void* event) override { live.erase(event); }
  Status record(void* event, void* stream) override {
    log.push_back("record " + name(event) + " on " + name(stream));
    done[event] = false;
    return Status::ok();
  }
  Status streamWait(void* stream, void* event) override {
    log.push_back(name(stream) + " waits " + name(event));
    return Status::ok();
  }
  EventState query(void* event, Status* failure) override {
    ++queries;
    if (failAll) {
      *failure = Status(Code::kBackend, "device fault");
      return EventState::kFailed;
    }
    return done[event] ? EventState::kDone : EventState::kNotReady;
  }
  static std::string name(void* p) { return std::to_string(reinterpret_cast<intptr_t>(p)); }

  std::map<void*, bool> live;
  std::map<void*, bool> done;
  std::vector<std::string> log;
  int queries = 0;
  bool failAll = false;

 private:
  intptr_t next_ = 0;
};

void* streamId(intptr_t i) {
  return reinterpret_cast<void*>(i);
}

}  // namespace

TEST_CASE("StreamOrder: the internal stream waits for markers, callers wait for the work",
          "[device]") {
  FakeEvents api;
  StreamOrder order(api, streamId(100), {});
  void* marker = nullptr;
  REQUIRE(api.createEvent(&marker).isOk());
  REQUIRE(order.waitFor(marker).isOk());
  REQUIRE(order.waitFor(nullptr).isOk());  // nothing to wait for: no call
  REQUIRE(order.signal(streamId(7)).isOk());
  REQUIRE(api.log.size() == 3);
  CHECK(api.log[0] == "100 waits 1");
  CHECK(api.log[1] == "record 2 on 100");
  CHECK(api.log[2] == "7 waits 2");
}

TEST_CASE("StreamOrder: fence finishes only when the recorded event completed", "[device]") {
  FakeEvents api;
  StreamOrder order(api, streamId(100), {});
  auto fence = order.fence();
  Status s;
  CHECK_FALSE(fence->poll(&s));
  CHECK_FALSE(fence->poll(&s));
  REQUIRE(api.done.size() == 1);
  api.done.begin()->second = true;
  REQUIRE(fence->poll(&s));
  CHECK(s.isOk());
}

TEST_CASE("StreamOrder: events are pooled, a steady state creates none", "[device]") {
  FakeEvents api;
  StreamOrder order(api, streamId(100), {});
  for (int i = 0; i < 50; ++i) {
    REQUIRE(order.signal(streamId(7)).isOk());
    auto fence = order.fence();
    for (auto& e : api.done) e.second = true;
    Status s;
    REQUIRE(fence->poll(&s));
    REQUIRE(s.isOk());
  }
  CHECK(order.eventsCreated() <= 2);
}

TEST_CASE("StreamOrder: an asynchronous error finishes a fence with that error", "[device]") {
  FakeEvents api;
  bool failed = false;
  StreamOrder order(api, streamId(100),
                    [&] { return failed ? Status(Code::kBackend, "peer gone") : Status::ok(); });
  auto fence = order.fence();
  Status s;
  CHECK_FALSE(fence->poll(&s));
  failed = true;
  REQUIRE(fence->poll(&s));
  CHECK(s.code() == Code::kBackend);
  CHECK(s.message() == "peer gone");
}

TEST_CASE("StreamOrder: a failed event query is the fence's error; events are destroyed",
          "[device]") {
  FakeEvents api;
  {
    StreamOrder order(api, streamId(100), {});
    api.failAll = true;
    auto fence = order.fence();
    Status s;
    REQUIRE(fence->poll(&s));
    CHECK(s.code() == Code::kBackend);
    CHECK_FALSE(api.live.empty());
  }
  CHECK(api.live.empty());
}

#endif  // HCOLL_WITH_NCCL
