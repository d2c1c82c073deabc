#pragma once
// Entry point of the loopback backend: N ranks as N threads of one process, over shared memory
// (models: Gloo's test `spawn` over a HashStore, UCC's tl/self). The process hosts every rank;
// each rank's thread drives its own world channel (Backend::world(rank)). Real collectives with
// the MPI backend's semantics, no transport: for tests (fast, sanitizer-friendly, no launcher)
// and for applications that want hcoll's negotiation and fusion between threads.

#include <memory>

#include "backends/backend.h"
#include "backends/registry.h"

namespace hcoll::backends::loopback {

// The most ranks one process hosts (threads, and rounds that are O(ranks^2) to check).
constexpr int kMaxRanks = 1024;

// A backend whose world has `ranks` ranks, all hosted here. INVALID_ARGUMENT unless
// 1 <= ranks <= kMaxRanks.
Status createLoopbackBackend(int ranks, std::unique_ptr<Backend>* out);

// The registry's entry ("loopback"; host memory, every operation; never the default). Its world
// size is BackendOptions::localRanks when set (the init parameters' local_ranks), else
// HCOLL_LOOPBACK_SIZE, else 1.
const BackendInfo& backendInfo();

}  // namespace hcoll::backends::loopback
