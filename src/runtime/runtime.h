#pragma once
// The process-wide runtime: configuration, the backend, the world communicator and the registry
// of live communicators. Exactly one exists between initialize and shutdown.

#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "backends/backend.h"
#include "runtime/communicator.h"
#include "runtime/config.h"
#include "runtime/request.h"
#include "runtime/timeline.h"

namespace hcoll::runtime {

struct InitOptions {
  std::optional<int> worldHandle;  // Fortran handle of the world communicator
  std::shared_ptr<const OutputAllocator> outputs = std::make_shared<OutputAllocator>();
};

class Runtime {
 public:
  static Status initialize(const InitOptions& options);
  static Status shutdown();
  // The current runtime, or null when not initialized.
  static std::shared_ptr<Runtime> current();

  const Config& config() const { return config_; }
  const std::shared_ptr<Communicator>& world() const { return world_; }
  const std::shared_ptr<const OutputAllocator>& outputAllocator() const { return outputs_; }
  std::shared_ptr<Request> newRequest() const { return std::make_shared<Request>(outputs_); }

  // Collective over parent's members; *out is null on ranks outside the new communicator.
  Status split(Communicator& parent, int color, int key, std::shared_ptr<Communicator>* out);
  Status create(Communicator& parent, const std::vector<int32_t>& ranks,
                std::shared_ptr<Communicator>* out);
  // For a rank whose split/create arguments were invalid (`why`): takes part in the call's
  // negotiation anyway, so that the other ranks fail with MISMATCH instead of waiting for this
  // rank forever, then returns `why`. `kind` is kCommSplit or kCommCreate.
  Status refuseCommOp(Communicator& parent, OpKind kind, Status why);
  Status fromMpi(int handle, std::shared_ptr<Communicator>* out);
  // Collective over comm's members; blocks. Sets comm's stall shutdown time (0 = never) on every
  // rank, or fails with MISMATCH on every rank when they passed different values.
  Status setTimeout(Communicator& comm, double seconds);
  // hcoll_abort: logs `reason`, tells the peers of every communicator (best effort, bounded) and
  // ends the job. Works initialized or not.
  [[noreturn]] static void abortJob(const std::string& reason);
  // The MPI the backend was built against, e.g. "MPICH 4.0.2" (static text; no MPI call).
  static const char* mpiVersion();
  // Collective: drains and stops `comm` (not the world).
  Status destroy(const std::shared_ptr<Communicator>& comm);

  ~Runtime();

 private:
  Runtime() = default;
  Status adopt(std::unique_ptr<backends::Channel> channel, std::shared_ptr<Communicator>* out);
  Status runCommOp(Communicator& parent, std::unique_ptr<LocalOp> op,
                   std::shared_ptr<Communicator>* out);
  void closeAll();

  Config config_;
  std::unique_ptr<backends::Backend> backend_;
  std::unique_ptr<Timeline> timeline_;  // null unless HCOLL_TIMELINE is set
  std::shared_ptr<const OutputAllocator> outputs_;
  std::shared_ptr<Communicator> world_;
  std::mutex commsMutex_;
  std::vector<std::weak_ptr<Communicator>> comms_;
};

}  // namespace hcoll::runtime
