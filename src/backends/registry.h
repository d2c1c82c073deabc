#pragma once
// The backends of this build, chosen by name. Each backend folder defines one BackendInfo and
// names it in its CMakeLists.txt (hcoll_add_backend); the build generates the table that
// registeredBackends() returns, in the order the backends were added. The runtime picks a host
// backend by name (HCOLL_BACKEND, or the init parameters) and the device backend by the memory
// it serves, and never names a backend itself. Models: NCCL's transport table, UCC's TLs.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "common/status.h"

namespace hcoll::backends {

class DeviceBackend;

// What the runtime asks of the host backend it creates.
struct BackendOptions {
  // A communicator of the backend's own transport to use as the world, handed over by the
  // application (init parameters); absent: the backend's own world.
  std::optional<int64_t> externalWorld;
  // How many ranks this process hosts, for a backend that can host several (0: its default).
  int localRanks = 0;
  // Runs at process exit before the backend's transport is finalized, and says whether
  // finalizing is safe (no peer is known stuck or gone).
  bool (*beforeExit)() = nullptr;
  // How long the transport's finalize at exit may wait for peers before the process ends anyway
  // (a peer that closed cleanly may still die before finalizing): min(stall shutdown time, 30 s).
  double exitBoundSeconds = 30.0;
  // Runs at process exit after beforeExit: whether every rank closed together (the bound above
  // applies only then; a peer that merely stopped talking to this rank may still be working, and
  // ending this process inside finalize would make the launcher end the job under it).
  bool (*closedTogether)() = nullptr;
};

// Which memory a backend's collectives serve (BackendInfo::memory bits).
enum MemoryKind : uint32_t { kHostMemory = 1u << 0, kCudaMemory = 1u << 1 };

// The bit of `kind` in BackendInfo::operations.
constexpr uint32_t opBit(OpKind kind) { return 1u << static_cast<unsigned>(kind); }
constexpr uint32_t kAllOperations = (1u << kNumOpKinds) - 1;

struct BackendInfo {
  const char* name;  // what HCOLL_BACKEND says: "mpi", "loopback", "nccl"
  uint32_t memory;   // MemoryKind bits
  uint32_t operations;  // opBit()s of the operations it serves
  // The default host backend is the one with the highest priority.
  int priority;
  // Host backends: creates the process-wide state (null for device-only backends).
  Status (*create)(const BackendOptions& options, std::unique_ptr<Backend>* out);
  // Device backends: the process's device backend (null for host-only backends).
  DeviceBackend* (*device)();
  // The transport it was built against, e.g. "MPICH 4.0.2" (static text, no call into it).
  const char* (*transportVersion)();
  // Ends the whole job (hcoll_abort): never returns. Null: the process exits with the code.
  void (*abortJob)(int exitCode);
};

// Every backend of this build, in build order (generated: backends/backend_table.cc).
const std::vector<const BackendInfo*>& registeredBackends();
// The backend called `name`, or null.
const BackendInfo* findBackend(const std::string& name);
// The host backend with the highest priority (never null: every build has one).
const BackendInfo& defaultHostBackend();
// "mpi, loopback": for messages that list the choices.
std::string backendNames(uint32_t memory);

}  // namespace hcoll::backends
