#pragma once
// The NCCL device backend: process-wide CUDA state (device count, probed once and safely
// without a GPU), stream markers at submission, device memory for outputs and fusion buffers,
// and the lazy creation of an NcclChannel per (communicator, device).

#include "backends/device.h"
#include "backends/registry.h"

namespace hcoll::backends::nccl {

// The process-wide instance.
DeviceBackend* ncclDeviceBackend();

// Its registry entry (backends/registry.h): CUDA memory, the data collectives.
const BackendInfo& backendInfo();

}  // namespace hcoll::backends::nccl
