#pragma once
// Set-up of a POSIX shared-memory segment that every rank of a communicator on one node maps:
// the common part of the shared-memory lanes (mpi_shm.h) and the small-message control block
// (mpi_shm_control.h). Rank 0 creates the segment and broadcasts its verdict and name, the others
// open it, and a MIN-allreduce makes every rank keep it or none; the name is unlinked as soon as
// every rank that could map it has (nothing is left in /dev/shm, even after a crash). Its space
// is reserved up front (posix_fallocate), so a full /dev/shm fails the set-up instead of raising
// SIGBUS later. Tearing down is local (munmap): it never waits for a peer that left or died.

#include <mpi.h>

#include <cstddef>
#include <cstdint>

namespace hcoll::backends::mpi {

// What this process maps for shared memory at most, over all its communicators and uses (each
// segment is reserved in /dev/shm, which a container may keep small, e.g. Docker's 64 MiB).
constexpr size_t kMaxShmProcessBytes = size_t{32} << 20;

// Counts `bytes` against kMaxShmProcessBytes; false (nothing counted) if they do not fit.
bool claimShmBudget(size_t bytes);
void releaseShmBudget(size_t bytes);

// Collective over `comm`. `willing`: this rank's own yes (its setting and its budget). Returns
// the segment of `bytes` (zero-filled) mapped on every rank, or null on every rank alike: a rank
// not willing, or creating or mapping failing on any rank. `kind` (a few letters) tells segments
// of one communicator apart in their names.
void* mapNodeSegment(MPI_Comm comm, int rank, size_t bytes, uint64_t uniqueId, const char* kind,
                     bool willing);

// Unmaps a segment returned by mapNodeSegment (local, never blocks) and releases its budget.
void unmapNodeSegment(void* base, size_t bytes);

}  // namespace hcoll::backends::mpi
