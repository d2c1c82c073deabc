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

// Each counter on a cache line of its own: the writer's stores must not evict the reader's.
constexpr size_t kLine = 64;
constexpr size_t kHeaderBytes = 2 * kLine;
constexpr size_t kRingBytes = kHeaderBytes + ShmLanes::kChunks * ShmLanes::kChunkBytes;
uint64_t loadAcquire(const uint64_t* at) {
  return __atomic_load_n(at, __ATOMIC_ACQUIRE);
}
void storeRelease(uint64_t* at, uint64_t v) {
  __atomic_store_n(at, v, __ATOMIC_RELEASE);
}

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

struct ShmLanes::Ring {
  uint64_t* published;  // chunks the writer has filled (written by the writer only)
  uint64_t* consumed;   // chunks the reader has emptied (written by the reader only)
  char* chunks;
};

std::shared_ptr<ShmLanes> ShmLanes::make(MPI_Comm comm, int rank, int size, int localSize,
                                         uint64_t uniqueId) {
  // Decided by facts every rank shares (size, localSize) before any rank looks further, so the
  // collective calls below run on all ranks or none.
  if (size < 2 || size > kMaxRanks || localSize != size) return nullptr;
  const size_t bytes = static_cast<size_t>(size) * static_cast<size_t>(size - 1) * kRingBytes;
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

ShmLanes::~ShmLanes() {
  unmapNodeSegment(base_, bytes_);
}

ShmLanes::Ring ShmLanes::ring(int from, int to) const {
  // Ordered pairs without the diagonal: from's rings to the others, in rank order.
  const auto index = static_cast<size_t>(from) * static_cast<size_t>(size_ - 1) +
                     static_cast<size_t>(to < from ? to : to - 1);
  char* at = static_cast<char*>(base_) + index * kRingBytes;
  return Ring{reinterpret_cast<uint64_t*>(at), reinterpret_cast<uint64_t*>(at + kLine),
              at + kHeaderBytes};
}

size_t ShmLanes::push(int peer, const char* data, size_t bytes) {
  const Ring r = ring(rank_, peer);
  uint64_t published = *r.published;  // only this side writes it
  const uint64_t consumed = loadAcquire(r.consumed);
  size_t done = 0;
  while (done < bytes && published - consumed < kChunks) {
    const size_t n = std::min(kChunkBytes, bytes - done);
    std::memcpy(r.chunks + (published % kChunks) * kChunkBytes, data + done, n);
    done += n;
    storeRelease(r.published, ++published);
  }
  return done;
}

size_t ShmLanes::pull(int peer, char* data, size_t bytes) {
  const Ring r = ring(peer, rank_);
  uint64_t consumed = *r.consumed;  // only this side writes it
  const uint64_t published = loadAcquire(r.published);
  size_t done = 0;
  while (done < bytes && consumed < published) {
    const size_t n = std::min(kChunkBytes, bytes - done);
    std::memcpy(data + done, r.chunks + (consumed % kChunks) * kChunkBytes, n);
    done += n;
    storeRelease(r.consumed, ++consumed);
  }
  return done;
}

}  // namespace hcoll::backends::mpi
