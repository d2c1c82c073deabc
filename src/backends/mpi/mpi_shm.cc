#include "backends/mpi/mpi_shm.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/mpi/mpi_shm_segment.h"
#include "common/logging.h"

namespace hcoll::backends::mpi {
namespace {

constexpr size_t kRingBytes = ShmRing::kBytes;

// What this rank asks for (HCOLL_MPI_SHM, checked at initialize: shmSettingError).
bool wanted() {
  const char* v = std::getenv("HCOLL_MPI_SHM");
  return v == nullptr || *v == '\0' || std::strcmp(v, "1") == 0;
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
  const size_t bytes = segmentBytes(size);
  const bool claimed = wanted() && claimShmBudget(bytes);
  void* base = mapNodeSegment(comm, rank, bytes, uniqueId, "lanes", claimed);
  if (base == nullptr) {
    if (claimed) releaseShmBudget(bytes);
    const char* why = !wanted()  ? "HCOLL_MPI_SHM=0 here"
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

std::shared_ptr<ShmLanes> ShmLanes::overMemory(void* base, int rank, int size) {
  return std::shared_ptr<ShmLanes>(new ShmLanes(base, 0, rank, size));
}

ShmLanes::~ShmLanes() {
  if (bytes_ != 0) unmapNodeSegment(base_, bytes_);
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
