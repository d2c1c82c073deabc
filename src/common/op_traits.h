#pragma once
// The per-kind rules of every operation, in one table: which kinds reduce, fuse, need rows, let
// dim 0 differ across ranks, and may be cached. The coordinator, the message checks and the
// executor all read them here, so that a new kind (or a changed rule) is one line.

#include "common/types.h"

namespace hcoll {

struct OpTraits {
  const char* name;
  // Carries a reduce op and pre/post scale factors that must agree (allreduce, reducescatter).
  bool reduces;
  // Ready operations of this kind with equal fusion keys may share backend calls.
  bool fusible;
  // Members are split into rows (dim 0): they must have ndim >= 1, and caller-provided outputs
  // are sized in rows (allgather, alltoall, reducescatter).
  bool needsRows;
  // Ranks may pass a different dim 0 (the rest of the shape must agree): allgather, alltoall.
  bool dim0Varies;
  // A successful response may enter the response cache (collectives on data; not barrier, join
  // or communicator creation, whose responses depend on more than the request).
  bool cacheable;
  // Creates a communicator (split, create): run by the communicator, not the executor.
  bool createsComm;
};

inline constexpr OpTraits kOpTraits[kNumOpKinds] = {
    //  name            reduces fusible needsRows dim0Varies cacheable createsComm
    {"allreduce",       true,   true,   false,    false,     true,     false},
    {"allgather",       false,  true,   true,     true,      true,     false},
    {"broadcast",       false,  true,   false,    false,     true,     false},
    {"alltoall",        false,  false,  true,     true,      true,     false},
    {"reducescatter",   true,   true,   true,     false,     true,     false},
    {"barrier",         false,  false,  false,    false,     false,    false},
    {"join",            false,  false,  false,    false,     false,    false},
    {"comm_split",      false,  false,  false,    false,     false,    true},
    {"comm_create",     false,  false,  false,    false,     false,    true},
};
static_assert(static_cast<int>(OpKind::kCommCreate) == kNumOpKinds - 1,
              "kOpTraits lists every OpKind in order");

// The traits of `k` (k must be a valid kind: the C API and the wire decoder check it).
inline const OpTraits& traitsOf(OpKind k) { return kOpTraits[static_cast<int>(k)]; }

}  // namespace hcoll
