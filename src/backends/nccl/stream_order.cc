#include "backends/nccl/stream_order.h"

namespace hcoll::backends::nccl {

class StreamOrder::Fence final : public Pending {
 public:
  Fence(StreamOrder& order, void* event, std::vector<void*> release)
      : order_(order), event_(event), release_(std::move(release)) {}
  ~Fence() override {
    // A fence abandoned before it finished (shutdown) keeps its events out of the pool.
    if (!finished_) return;
    order_.giveBack(event_);
    for (void* e : release_) order_.giveBack(e);
  }
  bool poll(Status* status) override {
    Status failure;
    switch (order_.api_.query(event_, &failure)) {
      case EventState::kDone:
        *status = Status::ok();
        finished_ = true;
        return true;
      case EventState::kFailed:
        *status = failure;
        finished_ = true;
        return true;
      case EventState::kNotReady:
        break;
    }
    if (order_.asyncError_) {
      Status s = order_.asyncError_();
      if (!s.isOk()) {
        *status = s;
        finished_ = true;
        return true;
      }
    }
    return false;
  }

 private:
  StreamOrder& order_;
  void* event_;
  std::vector<void*> release_;
  bool finished_ = false;
};

StreamOrder::StreamOrder(EventApi& api, void* internalStream, std::function<Status()> asyncError)
    : api_(api), stream_(internalStream), asyncError_(std::move(asyncError)) {}

StreamOrder::~StreamOrder() {
  for (void* e : all_) api_.destroyEvent(e);
}

Status StreamOrder::takeEvent(void** event) {
  if (!free_.empty()) {
    *event = free_.back();
    free_.pop_back();
    return Status::ok();
  }
  HCOLL_RETURN_IF_ERROR(api_.createEvent(event));
  all_.push_back(*event);
  ++created_;
  return Status::ok();
}

Status StreamOrder::waitFor(void* event) {
  if (event == nullptr) return Status::ok();
  return api_.streamWait(stream_, event);
}

Status StreamOrder::signal(void* callerStream) {
  void* event = nullptr;
  HCOLL_RETURN_IF_ERROR(takeEvent(&event));
  Status s = api_.record(event, stream_);
  if (s.isOk()) s = api_.streamWait(callerStream, event);
  signalled_.push_back(event);  // reusable once a later fence saw the stream drain
  return s;
}

PendingPtr StreamOrder::fence() {
  void* event = nullptr;
  Status s = takeEvent(&event);
  if (!s.isOk()) return finished(s);
  s = api_.record(event, stream_);
  if (!s.isOk()) {
    giveBack(event);
    return finished(s);
  }
  std::vector<void*> release;
  release.swap(signalled_);
  return std::make_unique<Fence>(*this, event, std::move(release));
}

}  // namespace hcoll::backends::nccl
