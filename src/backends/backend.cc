#include "backends/backend.h"

namespace hcoll::backends {
namespace {

class FinishedPending final : public Pending {
 public:
  explicit FinishedPending(Status s) : status_(std::move(s)) {}
  bool poll(Status* status) override {
    *status = status_;
    return true;
  }

 private:
  Status status_;
};

}  // namespace

PendingPtr finished(Status status) { return std::make_unique<FinishedPending>(std::move(status)); }

PeerSignals& PeerSignals::none() {
  static PeerSignals* silent = new PeerSignals();  // stateless; never destroyed (used at exit)
  return *silent;
}

}  // namespace hcoll::backends
