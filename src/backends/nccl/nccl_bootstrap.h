#pragma once
// The lazy, collective creation of an NCCL communicator for one (hcoll communicator, device):
// rank 0 makes the unique id, the communicator's own control plane (Channel::broadcastBytes)
// carries it to every member, then each member initializes its NCCL rank. CUDA-free so that it
// is unit-tested with a fake channel.

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

}  // namespace hcoll::backends::nccl
