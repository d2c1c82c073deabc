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
  // A communicator of the backend's transport to use as the world (the C API's mpi_comm).
  std::optional<int64_t> externalWorld;
  // The host backend by name (overrides HCOLL_BACKEND); "" = HCOLL_BACKEND or the default.
  std::string backend;
  // Ranks this process hosts, for a backend that hosts several (0: the backend's default).
  int localRanks = 0;
  std::shared_ptr<const OutputAllocator> outputs = std::make_shared<OutputAllocator>();
};

class Runtime {
 public:
  static Status initialize(const InitOptions& options);
  static Status shutdown();
  // The current runtime, or null when not initialized.
  static std::shared_ptr<Runtime> current();

  const Config& config() const { return config_; }
  // The world as seen by the first rank this process hosts (its only one, for most backends).
  const std::shared_ptr<Communicator>& world() const { return worlds_.front(); }
  // The world as seen by each rank this process hosts, in rank order (hostedRanks()).
  const std::vector<std::shared_ptr<Communicator>>& worlds() const { return worlds_; }
  // The world ranks this process hosts: one, except for a backend that hosts several (loopback).
  const std::vector<int>& hostedRanks() const { return hostedRanks_; }
  const char* backendName() const { return backendName_; }
  const std::shared_ptr<const OutputAllocator>& outputAllocator() const { return outputs_; }
  std::shared_ptr<Request> newRequest() const { return makeRequest(outputs_); }

  // Collective over parent's members; *out is null on ranks outside the new communicator.
  Status split(Communicator& parent, int color, int key, std::shared_ptr<Communicator>* out);
  Status create(Communicator& parent, const std::vector<int32_t>& ranks,
                std::shared_ptr<Communicator>* out);
  // For a rank whose split/create arguments were invalid (`why`): takes part in the call's
  // negotiation anyway, so that the other ranks fail with MISMATCH instead of waiting for this
  // rank forever, then returns `why`. `kind` is kCommSplit or kCommCreate.
  Status refuseCommOp(Communicator& parent, OpKind kind, Status why);
  // Wraps a communicator of the backend's own transport, given by the application (the C API's
  // hcoll_comm_from_mpi); kUnsupported for a backend that has none.
  Status fromExternal(int64_t handle, std::shared_ptr<Communicator>* out);
  // Collective over comm's members; blocks. Sets comm's stall shutdown time (0 = never) on every
  // rank, or fails with MISMATCH on every rank when they passed different values.
  Status setTimeout(Communicator& comm, double seconds);
  // hcoll_abort: logs `reason`, tells the peers of every communicator (best effort, bounded) and
  // ends the job. Works initialized or not.
  [[noreturn]] static void abortJob(const std::string& reason);
  // What the backend `name` of this build was built against, e.g. "MPICH 4.0.2" (static text,
  // no call into it); null when the build has no such backend.
  static const char* backendVersion(const char* name);
  // Whether CUDA tensors on `device` can be used in this process (kUnsupported says why not) and
  // `data` is memory of that device (kInvalidArgument), and whether the device backend reduces
  // `dtype`: checked at submission.
  // Starts (or restarts on another file) / stops the timeline of this process at run time, as
  // HCOLL_TIMELINE does at initialize. Local: each process decides for itself.
  static Status startTimeline(const std::string& path);
  static Status stopTimeline();
  static Status checkDeviceMemory(int32_t device, const void* data);
  static Status checkDeviceReduction(DataType dtype);
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
  std::unique_ptr<Timeline> timeline_;  // writing between start() and stop()
  std::shared_ptr<const OutputAllocator> outputs_;
  std::vector<std::shared_ptr<Communicator>> worlds_;  // one per hosted rank
  std::vector<int> hostedRanks_;
  const char* backendName_ = "";
  std::mutex commsMutex_;
  std::vector<std::weak_ptr<Communicator>> comms_;
};

}  // namespace hcoll::runtime
