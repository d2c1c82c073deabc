#include "backends/mpi/mpi_pending.h"

namespace hcoll::backends::mpi {

bool RequestsPending::poll(Status* status) {
  if (requests_.empty()) {
    *status = Status::ok();
    return true;
  }
  int done = 0;
  int rc = MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done,
                       MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS) {
    *status = mpiError("MPI_Testall", rc);
    return true;
  }
  if (!done) return false;
  *status = Status::ok();
  return true;
}

bool SequencePending::poll(Status* status) {
  while (true) {
    if (!current_) {
      if (next_ == steps_.size()) {
        *status = Status::ok();
        return true;
      }
      current_ = steps_[next_++]();
    }
    Status s;
    if (!current_->poll(&s)) return false;
    current_.reset();
    if (!s.isOk()) {
      *status = s;
      return true;
    }
  }
}

}  // namespace hcoll::backends::mpi
