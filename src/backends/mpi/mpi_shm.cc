#include "backends/mpi/mpi_shm.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/logging.h"

namespace hcoll::backends::mpi {
namespace {

constexpr size_t kRingBytes = ShmRing::kBytes;
constexpr size_t kNameBytes = 64;
// What this process maps for lanes at most, over all its communicators (each one's segment is
// reserved in /dev/shm, which a container may keep small, e.g. Docker's 64 MiB): communicators
// made beyond it use MPI alone.
constexpr size_t kMaxProcessBytes = size_t{32} << 20;
std::atomic<size_t> gMappedBytes{0};

// Counts `bytes` against kMaxProcessBytes; false (nothing counted) if they do not fit.
bool claimBudget(size_t bytes) {
  size_t mapped = gMappedBytes.load();
  do {
    if (mapped + bytes > kMaxProcessBytes) return false;
  } while (!gMappedBytes.compare_exchange_weak(mapped, mapped + bytes));
  return true;
}

// What this rank asks for (HCOLL_MPI_SHM, checked at initialize: shmSettingError).
bool wanted() {
  const char* v = std::getenv("HCOLL_MPI_SHM");
  return v == nullptr || *v == '\0' || std::strcmp(v, "1") == 0;
}

// Creates (rank 0) or opens the segment and maps it; null on failure.
void* mapSegment(const char* name, bool create, size_t bytes) {
  const int fd = create ? shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600)
                        : shm_open(name, O_RDWR, 0);
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

std::string shmSettingError() {
  const char* v = std::getenv("HCOLL_MPI_SHM");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "0") == 0 || std::strcmp(v, "1") == 0) {
    return {};
  }
  return std::string("HCOLL_MPI_SHM must be 0 or 1, not '") + v + "'";
}

std::shared_ptr<ShmLanes> ShmLanes::make(MPI_Comm comm, int rank, int size, int localSize,
                                         uint64_t uniqueId) {
  // Decided by facts every rank shares (size, localSize) before any rank looks further, so the
  // collective calls below run on all ranks or none.
  if (size < 2 || size > kMaxRanks || localSize != size) return nullptr;
  const size_t bytes = static_cast<size_t>(size) * static_cast<size_t>(size - 1) * kRingBytes;
  char name[kNameBytes] = {};
  void* base = nullptr;
  int ok = wanted() && claimBudget(bytes) ? 1 : 0;
  const bool claimed = ok != 0;
  if (rank == 0 && ok) {
    std::snprintf(name, sizeof name, "/hcoll.%ld.%016llx", static_cast<long>(getpid()),
                  static_cast<unsigned long long>(uniqueId));
    base = mapSegment(name, /*create=*/true, bytes);
    if (base == nullptr) ok = 0;
  }
  // Rank 0's verdict first (the others need the name), then everyone's.
  if (MPI_Bcast(&ok, 1, MPI_INT, 0, comm) != MPI_SUCCESS ||
      MPI_Bcast(name, kNameBytes, MPI_CHAR, 0, comm) != MPI_SUCCESS) {
    ok = 0;
  }
  if (rank != 0 && ok && !claimed) ok = 0;  // this rank's own setting or budget says no
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
    if (claimed) gMappedBytes.fetch_sub(bytes);
    const char* why = !wanted()   ? "HCOLL_MPI_SHM=0 here"
                      : !claimed ? "this process's 32 MiB for lanes are in use"
                                 : "another rank declined, or /dev/shm failed";
    logging::get("backend")->debug(
        "communicator of {} ranks on one node: no shared-memory lanes ({}): MPI messages", size,
        why);
    return nullptr;
  }
  logging::get("backend")->debug(
      "communicator of {} ranks on one node: shared-memory lanes, {} KiB", size, bytes >> 10);
  return std::shared_ptr<ShmLanes>(new ShmLanes(base, bytes, rank, size));
}

ShmLanes::ShmLanes(void* base, size_t bytes, int rank, int size)
    : base_(base), bytes_(bytes), rank_(rank), size_(size) {}

ShmLanes::~ShmLanes() {
  munmap(base_, bytes_);
  gMappedBytes.fetch_sub(bytes_);
}

ShmRing ShmLanes::ring(int from, int to) const {
  // Ordered pairs without the diagonal: from's rings to the others, in rank order.
  const auto index = static_cast<size_t>(from) * static_cast<size_t>(size_ - 1) +
                     static_cast<size_t>(to < from ? to : to - 1);
  return ShmRing(static_cast<char*>(base_) + index * kRingBytes);
}

size_t ShmLanes::push(int peer, const char* data, size_t bytes) {
  return ring(rank_, peer).push(data, bytes);
}

size_t ShmLanes::pull(int peer, char* data, size_t bytes) {
  return ring(peer, rank_).pull(data, bytes);
}

}  // namespace hcoll::backends::mpi
