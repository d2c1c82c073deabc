#pragma once
// The base of every point-to-point schedule (mpi_p2p.cc, mpi_p2p_reduce.cc, mpi_adasum.cc): one
// operation's transport (mpi_transport.h), polled stage by stage. A stage posts its transfers;
// once they all completed the schedule computes locally and posts the next stage (advance), or
// finishes. Internal to the MPI backend.

#include <array>
#include <cstddef>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "backends/mpi/mpi_transport.h"

namespace hcoll::backends::mpi::p2p {

class StagedSchedule : public Pending {
 public:
  // Opens the operation's transport with room for `transfersPerStage` transfers per stage.
  StagedSchedule(const ScheduleContext& context, size_t transfersPerStage)
      : transport_(context.transports->open(transfersPerStage)) {}

  bool poll(Status* status) override {
    if (!transport_->poll(status)) return false;
    if (!status->isOk()) return true;  // failed: the transport withdrew its receives
    return advance(status);
  }

  P2pTransport& transport() { return *transport_; }

 protected:
  // Called once every transfer of the stage completed: posts the next stage and returns false,
  // or returns true (finished, *status set).
  virtual bool advance(Status* status) {
    *status = Status::ok();
    return true;
  }

  // Nothing posted in this stage (an advance that posted nothing has finished).
  bool idle() const { return transport_->idle(); }

 private:
  std::unique_ptr<P2pTransport> transport_;
};

// A schedule whose first stage failed to post: withdraws what it posted and reports why.
inline PendingPtr failedToStart(StagedSchedule& schedule, Status status) {
  schedule.transport().abandon();
  return finished(std::move(status));
}

// Where each rank's block starts (prefix sums of the byte counts), inline up to 8 ranks: these
// schedules run on small communicators, and need no heap allocation per table and operation.
class BlockOffsets {
 public:
  explicit BlockOffsets(const std::vector<size_t>& bytes) {
    if (bytes.size() > inline_.size()) heap_.resize(bytes.size());
    size_t* at = heap_.empty() ? inline_.data() : heap_.data();
    size_t sum = 0;
    for (size_t j = 0; j < bytes.size(); ++j) {
      at[j] = sum;
      sum += bytes[j];
    }
  }
  size_t operator[](size_t j) const { return heap_.empty() ? inline_[j] : heap_[j]; }

 private:
  std::array<size_t, 8> inline_{};
  std::vector<size_t> heap_;
};

}  // namespace hcoll::backends::mpi::p2p
