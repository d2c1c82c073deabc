#pragma once
// Every collective as point-to-point messages on the data communicator, for small communicators
// (mpi_p2p.cc: broadcast, allgather, alltoall; mpi_p2p_reduce.cc: reduce-scatter, allreduce).
// MPICH's non-blocking collectives build a schedule per call (~1,000 cycles before the first byte
// moves, and MPI_Ialltoallv is slower than MPI_Ialltoall on top) and allocate their temporaries
// per call: on 2 ranks, Isend/Irecv took 6.1 against 6.8 us for the readiness exchange plus a
// 32 KiB MPI_Ibcast, 8.7 against 9.3 us for a 128 KiB alltoall, and 32 against 52 us for a
// 512 KiB allgather, whose MPICH algorithm is slower than a plain exchange even when blocking
// (47 us) (raw MPI microbenchmark, medians of 9 interleaved blocks). Broadcast runs down a
// binomial tree (MPICH's choice below 8 ranks at every size); alltoall and allgather post every
// message at once (MPICH's "scattered" alltoall); reductions send every block to its owner, which
// reduces it (mpi_local_reduce.h). Every schedule is written once over the point-to-point transport
// (mpi_transport.h: MPI messages or shared-memory lanes, routed per transfer by its size), whose
// transfers between two ranks arrive in the order they were posted: every rank posts the
// operations in the negotiated order, and a data phase given up on or failed ends the
// communicator (the executor), so no later operation can match an earlier one's transfer.

#include <cstddef>
#include <vector>

#include "backends/backend.h"
#include "backends/mpi/mpi_transport.h"

namespace hcoll::backends::mpi {

// Which collectives run these schedules: mpi_algorithms.h. Each takes the context it runs in
// (mpi_transport.h: rank, size, transports, scratch pool, reduction).

// Rank r sends sendBytes[j] bytes (packed in rank order in `send`) to rank j and receives
// recvBytes[j] from it (packed in rank order in `recv`). `send` and `recv` must not overlap.
PendingPtr pointToPointAlltoallv(const ScheduleContext& context, const void* send,
                                 const std::vector<size_t>& sendBytes, void* recv,
                                 const std::vector<size_t>& recvBytes);

// The even case: bytesPerRank bytes to and from every rank, block j at j * bytesPerRank.
PendingPtr pointToPointAlltoall(const ScheduleContext& context, const void* send, void* recv,
                                size_t bytesPerRank);

// Every rank's sendBytes bytes (`send`, or its block already in place in `recv` when send is
// null) land in every rank's `recv`, rank j's at the sum of recvBytes[0, j).
PendingPtr pointToPointAllgatherv(const ScheduleContext& context, const void* send,
                                  size_t sendBytes, void* recv,
                                  const std::vector<size_t>& recvBytes);

// Rank r's block of context.reduction (mpi_local_reduce.h) of every rank's `send`, rank-major
// blocks of counts[j] elements, into `recv` (which must not overlap `send`): block j goes to rank
// j; rank r - 1's contribution to block r arrives in `recv`, the other peers' in a scratch buffer
// from context.pool (none on 2 ranks), and once all arrived they are reduced into `recv` by the
// host reduction library (common/reduce.h, the same element rules as MPI's collectives with
// hcoll's user ops). MPICH's pairwise algorithm, without its temporary buffer per call.
PendingPtr pointToPointReduceScatter(const ScheduleContext& context, const void* send, void* recv,
                                     const std::vector<size_t>& counts);

// Allreduce of `count` elements (context.reduction, as above) from `send` into `recv`
// (send == nullptr: in place, recv holds this rank's contribution): a reduce-scatter as above,
// rank j owning the j-th of `size` near-equal blocks, then an allgather of the reduced blocks.
// Every block is reduced once, by its owner, so all ranks get bitwise the same result.
PendingPtr pointToPointAllreduce(const ScheduleContext& context, const void* send, void* recv,
                                 size_t count);

// Root's `bytes` bytes of `buf` replace every other rank's, down a binomial tree.
PendingPtr binomialBroadcast(const ScheduleContext& context, void* buf, size_t bytes, int root);

// Adasum (common/adasum.h) of every rank's `count` elements of `dtype` in `buf`, in place, the
// vector being tensors of tensorCounts elements (mpi_adasum.cc).
PendingPtr pointToPointAdasum(const ScheduleContext& context, void* buf, size_t count,
                              DataType dtype, const std::vector<size_t>& tensorCounts);

}  // namespace hcoll::backends::mpi
