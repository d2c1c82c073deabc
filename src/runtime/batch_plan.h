#pragma once
// Which ready operations run together: consecutive responses with the same fusion key form a
// run, and a run's members are cut into batches that each fill one fusion buffer. Pure functions
// of the negotiated responses, so every rank cuts the same batches.

#include <cstddef>
#include <utility>
#include <vector>

#include "common/types.h"
#include "runtime/message.h"

namespace hcoll::runtime {

// Whether two ready operations may share backend calls.
bool sameFusionKey(const OpSpec& a, const OpSpec& b);

// Splits members (in order) into [begin, end) batches of at most `threshold` bytes, and, when
// the kind reduces, of one dtype (a fusion buffer holds one). A member bigger than the
// threshold is a batch of its own; a threshold of 0 (fusion off) makes every member one.
std::vector<std::pair<size_t, size_t>> planBatches(const std::vector<size_t>& memberBytes,
                                                   const std::vector<DataType>& dtypes,
                                                   bool reduces, size_t threshold);

}  // namespace hcoll::runtime
