#pragma once
// Byte encoding of negotiation messages. Decoding is defensive: every length is bounds-checked
// against the remaining input and against hard limits, so a malformed message is rejected with
// a Status and never reads out of bounds or allocates without limit. What it accepts is still
// only well-formed bytes: whether a spec makes sense for its kind and communicator size (splits
// per rank, ndim >= 1 for allgather, a root in range) is the coordinator's check.

#include <cstdint>
#include <vector>

#include "runtime/message.h"
#include "common/status.h"

namespace hcoll::runtime::wire {

// The submission limits (common/types.h), which every valid message respects.
constexpr uint32_t kMaxNameLength = hcoll::kMaxNameLength;
constexpr uint32_t kMaxMembers = hcoll::kMaxGroupMembers;
constexpr uint32_t kMaxListLength = 1u << 20;  // ops per message, entries per vector

std::vector<uint8_t> encode(const RequestList& list);
std::vector<uint8_t> encode(const ResponseList& list);

Status decode(const uint8_t* data, size_t size, RequestList* out);
Status decode(const uint8_t* data, size_t size, ResponseList* out);

}  // namespace hcoll::runtime::wire
