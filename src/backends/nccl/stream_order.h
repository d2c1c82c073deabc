#pragma once
// Orders a device plane's internal stream against its callers' streams with events:
// waitFor(event) makes the internal stream wait for a point a caller marked at submission,
// signal(stream) makes a caller's stream wait for everything enqueued so far, and fence() is a
// Pending that finishes when the internal stream drained, polling the event (never blocking)
// and an asynchronous-error check, so a failed peer becomes kBackend instead of a hang.

#include <functional>
#include <vector>

#include "backends/backend.h"
#include "backends/nccl/event_api.h"

namespace hcoll::backends::nccl {

class StreamOrder {
 public:
  // `asyncError` (may be empty) returns a non-ok status once the communicator failed.
  StreamOrder(EventApi& api, void* internalStream, std::function<Status()> asyncError);
  ~StreamOrder();
  StreamOrder(const StreamOrder&) = delete;
  StreamOrder& operator=(const StreamOrder&) = delete;

  void* stream() const { return stream_; }
  Status waitFor(void* event);
  Status signal(void* callerStream);
  PendingPtr fence();

  // Events created so far (pooled: a steady state creates none).
  size_t eventsCreated() const { return created_; }

 private:
  class Fence;
  Status takeEvent(void** event);
  void giveBack(void* event) { free_.push_back(event); }

  EventApi& api_;
  void* stream_;
  std::function<Status()> asyncError_;
  std::vector<void*> free_;
  std::vector<void*> all_;
  size_t created_ = 0;
  // Events recorded for signal() stay busy until the next fence finished.
  std::vector<void*> signalled_;
};

}  // namespace hcoll::backends::nccl
