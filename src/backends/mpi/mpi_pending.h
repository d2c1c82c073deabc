#pragma once
// Pending implementations over MPI requests, polled with MPI_Test (never blocking).

#include <mpi.h>

#include <functional>
#include <vector>

#include "backends/backend.h"
#include "backends/mpi/mpi_types.h"

namespace hcoll::backends::mpi {

// Waits for a set of MPI requests; keeps whatever the requests read or write alive meanwhile.
class RequestsPending : public Pending {
 public:
  // Requests still active at destruction belong to operations abandoned after the peers were
  // lost; MPI forbids freeing active collective requests, so they are left to MPI.
  RequestsPending() = default;
  std::vector<MPI_Request>& requests() { return requests_; }
  // Storage whose lifetime must cover the requests (counts, displacements, send copies).
  std::vector<std::vector<int>> intArrays;
  std::vector<std::vector<uint8_t>> byteArrays;
  // MPI-4 large-count calls: counts and displacements.
  std::vector<std::vector<MPI_Count>> countArrays;
  std::vector<std::vector<MPI_Aint>> displArrays;
  bool poll(Status* status) override;

 private:
  std::vector<MPI_Request> requests_;
};

// Runs a sequence of steps one after the other; a step starts once the previous one finished.
// Used for collectives split into chunks of at most INT_MAX elements.
class SequencePending : public Pending {
 public:
  explicit SequencePending(std::vector<std::function<PendingPtr()>> steps)
      : steps_(std::move(steps)) {}
  bool poll(Status* status) override;

 private:
  std::vector<std::function<PendingPtr()>> steps_;
  size_t next_ = 0;
  PendingPtr current_;
};

}  // namespace hcoll::backends::mpi
