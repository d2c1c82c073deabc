#pragma once
// The NCCL device backend: process-wide CUDA state (device count, probed once and safely
// without a GPU), stream markers at submission, device memory for outputs and fusion buffers,
// and the lazy creation of an NcclChannel per (communicator, device).

#include "backends/device.h"

namespace hcoll::backends::nccl {

// The process-wide instance.
DeviceBackend* ncclDeviceBackend();

}  // namespace hcoll::backends::nccl
