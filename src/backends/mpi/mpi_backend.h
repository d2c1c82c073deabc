#pragma once
// Entry point of the MPI backend. This header names no MPI type, so the runtime can include it.

#include <memory>
#include <optional>

#include "backends/backend.h"

namespace hcoll::backends::mpi {

// Initializes MPI with MPI_THREAD_MULTIPLE unless the application already did (then it must have
// provided MPI_THREAD_MULTIPLE). MPI initialized here is finalized at process exit, after
// `beforeFinalize` ran, because MPI cannot be initialized twice in one process.
// worldHandle: the Fortran handle of the communicator to use as world (default MPI_COMM_WORLD).
Status createBackend(std::optional<int> worldHandle, void (*beforeFinalize)(),
                     std::unique_ptr<Backend>* out);

}  // namespace hcoll::backends::mpi
