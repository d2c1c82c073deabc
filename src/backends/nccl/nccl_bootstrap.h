#pragma once
// The lazy, collective creation of an NCCL communicator for one (hcoll communicator, device):
// rank 0 makes the unique id, the communicator's own control plane (Channel::broadcastBytes)
// carries it to every member, the members agree that every one of them is ready, and only then
// does each initialize its NCCL rank. CUDA-free so that it is unit-tested with a fake channel.

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "backends/backend.h"

namespace hcoll::backends::nccl {

// Fills *id on rank 0 (via makeId) and broadcasts it; every rank gets exactly idBytes bytes.
// A rank whose makeId failed broadcasts an empty id, so every rank fails instead of one hanging
// in the NCCL initialization.
Status shareUniqueId(Channel& control, size_t idBytes,
                     const std::function<Status(std::vector<uint8_t>*)>& makeId,
                     std::vector<uint8_t>* id);

// Bitwise AND over the ranks of "local is ok": local's failure on this rank, a kBackend naming
// the situation on the ranks that were ready, ok only when every rank was. Every rank takes part
// whatever its local status, so a rank that failed alone never leaves the others blocked.
Status agreeOnSuccess(Channel& control, const Status& local);

// What NcclChannel::create runs between preparing its local resources (stream, kernels; their
// outcome is `local`) and ncclCommInitRank: the id exchange, then the agreement. On success *id
// holds rank 0's id and every rank may enter the NCCL initialization; on failure no rank does.
Status prepareBootstrap(Channel& control, size_t idBytes, const Status& local,
                        const std::function<Status(std::vector<uint8_t>*)>& makeId,
                        std::vector<uint8_t>* id);

}  // namespace hcoll::backends::nccl
