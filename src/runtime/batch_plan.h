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

// Splits `count` members (in order) into [begin, end) batches of at most `threshold` bytes,
// and, when the kind reduces, of one dtype (a fusion buffer holds one). A member bigger than the
// threshold is a batch of its own; a threshold of 0 (fusion off) makes every member one.
// bytesOf(i) and dtypeOf(i) describe member i (read in place: no copy of the run on the
// execution path).
// The batches go to `*out` (cleared first; its capacity is reused from call to call).
template <typename BytesOf, typename DtypeOf>
void planBatches(size_t count, BytesOf&& bytesOf, DtypeOf&& dtypeOf, bool reduces,
                 size_t threshold, std::vector<std::pair<size_t, size_t>>* out) {
  std::vector<std::pair<size_t, size_t>>& batches = *out;
  batches.clear();
  size_t begin = 0;
  size_t bytes = 0;
  for (size_t i = 0; i < count; ++i) {
    const size_t member = bytesOf(i);
    const bool fits =
        bytes + member <= threshold && (i == begin || !reduces || dtypeOf(begin) == dtypeOf(i));
    if (!fits && i > begin) {
      batches.emplace_back(begin, i);
      begin = i;
      bytes = 0;
    }
    bytes += member;
  }
  if (begin < count) batches.emplace_back(begin, count);
}

}  // namespace hcoll::runtime
