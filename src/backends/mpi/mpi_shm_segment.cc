#include "backends/mpi/mpi_shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

namespace hcoll::backends::mpi {
namespace {

constexpr size_t kNameBytes = 64;
std::atomic<size_t> gMappedBytes{0};

// Creates (rank 0) or opens the segment and maps it; null on failure.
void* mapSegment(const char* name, bool create, size_t bytes) {
  const int fd =
      create ? shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600) : shm_open(name, O_RDWR, 0);
  if (fd < 0) return nullptr;
  // Reserve the pages now: a full /dev/shm fails here, not with SIGBUS at a later memcpy.
  const bool sized = !create || (ftruncate(fd, static_cast<off_t>(bytes)) == 0 &&
                                 posix_fallocate(fd, 0, static_cast<off_t>(bytes)) == 0);
  void* base = sized ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : nullptr;
  close(fd);
  if (base == MAP_FAILED) base = nullptr;
  if (create && base == nullptr) shm_unlink(name);  // ours (O_EXCL), and of no use
  return base;
}

}  // namespace

bool claimShmBudget(size_t bytes) {
  size_t mapped = gMappedBytes.load();
  do {
    if (mapped + bytes > kMaxShmProcessBytes) return false;
  } while (!gMappedBytes.compare_exchange_weak(mapped, mapped + bytes));
  return true;
}

void releaseShmBudget(size_t bytes) {
  gMappedBytes.fetch_sub(bytes);
}

void* mapNodeSegment(MPI_Comm comm, int rank, size_t bytes, uint64_t uniqueId, const char* kind,
                     bool willing) {
  char name[kNameBytes] = {};
  void* base = nullptr;
  int ok = willing ? 1 : 0;
  if (rank == 0 && ok) {
    std::snprintf(name, sizeof name, "/hcoll.%ld.%016llx.%s", static_cast<long>(getpid()),
                  static_cast<unsigned long long>(uniqueId), kind);
    base = mapSegment(name, /*create=*/true, bytes);
    if (base == nullptr) ok = 0;
  }
  // Rank 0's verdict first (the others need the name), then everyone's.
  if (MPI_Bcast(&ok, 1, MPI_INT, 0, comm) != MPI_SUCCESS ||
      MPI_Bcast(name, kNameBytes, MPI_CHAR, 0, comm) != MPI_SUCCESS) {
    ok = 0;
  }
  if (rank != 0 && ok && !willing) ok = 0;
  if (rank != 0 && ok) {
    name[kNameBytes - 1] = '\0';
    base = mapSegment(name, /*create=*/false, bytes);
    if (base == nullptr) ok = 0;
  }
  int all = 0;
  if (MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) all = 0;
  if (rank == 0 && base != nullptr) shm_unlink(name);  // every rank that could map it has
  if (all == 0) {
    if (base != nullptr) munmap(base, bytes);
    return nullptr;
  }
  return base;
}

void unmapNodeSegment(void* base, size_t bytes) {
  munmap(base, bytes);
  releaseShmBudget(bytes);
}

}  // namespace hcoll::backends::mpi
