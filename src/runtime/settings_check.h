#pragma once
// The settings that change what a rank sends or how operations match must be the same on every
// rank: a fusion threshold that differs makes ranks pack different batches (wrong data), a cache
// capacity that differs gives an operation different slots (hangs). hcoll_initialize compares
// them over the world and fails on every rank when they differ; when they agree, every rank
// adopts rank 0's values, so that what the executor derives from them is the same everywhere
// by construction, not only by comparison.

#include "backends/backend.h"
#include "runtime/config.h"
#include "common/status.h"

namespace hcoll::runtime {

// Collective over `world`; blocks. INVALID_ARGUMENT on every rank, naming the variable, its
// values and the ranks, when a checked setting differs.
Status agreeOnSettings(backends::Channel& world, Config* config);

}  // namespace hcoll::runtime
