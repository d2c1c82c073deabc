#pragma once
// Shared-memory lanes between the ranks of a communicator that lives on one node: one ring of
// chunks per ordered pair of ranks, written by the sender and read by the receiver, each side
// copying with memcpy while the other copies too. MPICH moves a message above 8 KiB with a
// rendezvous and one kernel copy (CMA, process_vm_readv, with its page pinning) by the receiver
// alone, the sender idle. Through a ring of 4 x 128 KiB chunks, hcoll on 2 ranks of the test VM
// (medians of interleaved blocks, against the same schedule over MPI messages): broadcast
// 0.5-0.8x MPI_Bcast's time from 128 KiB to 8 MiB, alltoall 0.8-0.95x MPI_Alltoall's from
// 512 KiB to 64 MiB (over MPI messages 1.07-1.2x), allreduce 0.5x instead of 0.65x at 512 KiB.
// Every point-to-point schedule routes its transfers above 8 KiB here (mpi_transport.h).
//
// A lane is a FIFO byte stream, like MPI's non-overtaking order on one (source, tag, comm): the
// k-th transfer posted from i to j is the k-th posted by j from i, so the point-to-point
// schedules route a transfer here or through MPI alike on both sides and nothing else changes.
// Both counters only grow (across operations), each written by one side: `published` by the
// writer, `consumed` by the reader (the ring itself: mpi_shm_ring.h).
//
// The segment is POSIX shared memory created by rank 0, opened by the others and unlinked as
// soon as every rank mapped it (nothing is left in /dev/shm, even after a crash); its space is
// reserved up front (posix_fallocate), so a full /dev/shm fails the set-up (the communicator
// then uses MPI alone) instead of raising SIGBUS later. Tearing down is local (munmap): unlike
// MPI_Win_free it never waits for a peer that left or died.

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "backends/mpi/mpi_shm_ring.h"

namespace hcoll::backends::mpi {

// HCOLL_MPI_SHM (0 | 1, default 1): what is wrong with its value, or empty. Checked when the
// backend is created; `0` on any rank turns the lanes off for every communicator it is part of.
std::string shmSettingError();

class ShmLanes {
 public:
  // Communicators of up to this many ranks get lanes: n * (n - 1) rings of kRingBytes.
  static constexpr int kMaxRanks = 4;
  static constexpr size_t kChunkBytes = ShmRing::kChunkBytes;
  static constexpr size_t kChunks = ShmRing::kChunks;

  // Collective over `comm` (whose ranks are `size`, all on this node when localSize == size).
  // Returns the lanes, or null on every rank alike: not one node, too many ranks, HCOLL_MPI_SHM=0
  // on any rank, a rank's process already holding 32 MiB of lanes, or shared memory unavailable
  // on any rank.
  static std::shared_ptr<ShmLanes> make(MPI_Comm comm, int rank, int size, int localSize,
                                        uint64_t uniqueId);
  // The lanes of rank `rank` of `size` over memory the caller owns, zeroed once, aligned to
  // ShmRing::kLine and segmentBytes(size) long, shared by every rank: the unit tests' ranks are
  // threads of one process (tests/unit/test_p2p_transport.cc). Nothing is unmapped at the end.
  static std::shared_ptr<ShmLanes> overMemory(void* base, int rank, int size);
  static size_t segmentBytes(int size) {
    return static_cast<size_t>(size) * static_cast<size_t>(size - 1) * ShmRing::kBytes;
  }
  ~ShmLanes();
  ShmLanes(const ShmLanes&) = delete;
  ShmLanes& operator=(const ShmLanes&) = delete;

  // Copies up to `bytes` of `data` into the lane to `peer`, in whole chunks while there is room;
  // returns how many bytes it copied (0: the lane is full, the reader has not caught up).
  size_t push(int peer, const char* data, size_t bytes);
  // Copies up to `bytes` from the lane from `peer` into `data`, chunk by chunk as they arrive;
  // returns how many. A transfer's chunks are cut alike on both sides (kChunkBytes from its
  // start), so a pull of the rest of a transfer never takes a chunk of the next one.
  size_t pull(int peer, char* data, size_t bytes);

 private:
  ShmLanes(void* base, size_t bytes, int rank, int size);
  ShmRing ring(int from, int to) const;

  void* base_;
  size_t bytes_;  // of the mapping to unmap at the end; 0: the memory is not ours
  int rank_;
  int size_;
};

}  // namespace hcoll::backends::mpi
