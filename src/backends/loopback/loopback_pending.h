#pragma once
// The collectives of the loopback backend as Pendings. Each one joins its round at creation and
// then advances only when polled, never blocking: it reads its peers' buffers once every rank
// arrived, and finishes once every rank has read its own (so that no buffer is reused while a
// peer still reads it). A rank that never arrives leaves the others' Pendings unfinished; the
// runtime bounds that with its stall timeout.

#include <memory>
#include <vector>

#include "backends/backend.h"
#include "backends/loopback/loopback_group.h"

namespace hcoll::backends::loopback {

// Where a call sits: its group, plane, sequence number on that plane, and the caller's rank.
struct Seat {
  std::shared_ptr<Group> group;
  Plane plane;
  uint64_t seq;
  int rank;
};

// Control plane: contributions are copied, so these never wait for their peers to read.
// `fold` (may be null): a small collective carried by the AND (backend.h's FoldedCollective).
PendingPtr startBitsAnd(const Seat& seat, uint64_t* words, size_t count,
                        const Channel::FoldedCollective* fold = nullptr);
PendingPtr startGatherBytes(const Seat& seat, std::vector<uint8_t> mine,
                            std::vector<std::vector<uint8_t>>* atRoot);
PendingPtr startBroadcastBytes(const Seat& seat, std::vector<uint8_t>* buf);

// Data plane: the semantics of backends::Collectives.
PendingPtr startAllreduce(const Seat& seat, const void* send, void* recv, size_t count,
                          DataType dtype, ReduceOp op);
// In place; the whole tree of common/adasum.h, bitwise what the MPI backend computes.
PendingPtr startAdasum(const Seat& seat, void* buf, size_t count, DataType dtype,
                       const std::vector<size_t>& tensorCounts);
PendingPtr startAllgatherv(const Seat& seat, const void* send, size_t sendBytes, void* recv,
                           const std::vector<size_t>& recvBytes);
PendingPtr startBroadcast(const Seat& seat, void* buf, size_t bytes, int root);
// recv must not overlap send.
PendingPtr startAlltoallv(const Seat& seat, const void* send, const std::vector<size_t>& sendBytes,
                          void* recv, const std::vector<size_t>& recvBytes);
PendingPtr startReduceScatter(const Seat& seat, const void* send, void* recv,
                              const std::vector<size_t>& recvCounts, DataType dtype, ReduceOp op);
PendingPtr startBarrier(const Seat& seat);

}  // namespace hcoll::backends::loopback
