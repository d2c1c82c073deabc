#pragma once
// Entry point of the MPI backend. This header names no MPI type, so the runtime can include it.

#include <memory>
#include <optional>

#include "backends/backend.h"
#include "backends/registry.h"

namespace hcoll::backends::mpi {

// Initializes MPI with MPI_THREAD_MULTIPLE unless the application already did (then it must have
// provided MPI_THREAD_MULTIPLE). `beforeFinalize` runs at process exit (hcoll must be shut down
// before MPI goes); it returns whether MPI may be finalized. MPI initialized here is finalized at process exit (MPI cannot be initialized twice
// in one process) unless beforeFinalize said no: MPI_Finalize waits for every peer to finalize
// too, and peers that left, gave up or are stuck may never do so. Skipping it makes the
// launcher end the job (MPICH's hydra kills the other processes of a job when one exits without
// finalizing), which is what a job whose peers failed needs. Even a peer that closed cleanly can
// die before its MPI_Finalize: when closedTogether() says every rank closed together, the exit's
// MPI_Finalize runs under a watchdog that ends the process, with the status it was exiting with,
// after finalizeBoundSeconds (otherwise a peer may still be working, and finalize waits for it).
// worldHandle: the Fortran handle of the communicator to use as world (default MPI_COMM_WORLD).
// Fails with UNSUPPORTED, before any MPI call, when the process has loaded a different MPI
// library (e.g. Open MPI through mpi4py against an MPICH build): their symbols would mix.
Status createBackend(std::optional<int> worldHandle, bool (*beforeFinalize)(),
                     bool (*closedTogether)(), double finalizeBoundSeconds,
                     std::unique_ptr<Backend>* out);

// Its registry entry (backends/registry.h): host memory, every operation, the default backend.
// options.externalWorld is the world's Fortran handle; options.localRanks must be 0 or 1.
const BackendInfo& backendInfo();

// The MPI this library was built against, e.g. "MPICH 4.0.2" (no MPI call).
const char* builtAgainst();

// Ends the whole job (MPI_Abort on the world when MPI is usable, else _exit): hcoll_abort.
[[noreturn]] void abortJob(int exitCode);

}  // namespace hcoll::backends::mpi
