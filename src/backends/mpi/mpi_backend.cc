#include "backends/mpi/mpi_backend.h"

#include <mpi.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "backends/mpi/mpi_channel.h"
#include "backends/mpi/mpi_types.h"

namespace hcoll::backends::mpi {
namespace {

std::once_flag gAtExitOnce;
bool (*gBeforeFinalize)() = nullptr;
bool (*gClosedTogether)() = nullptr;
bool gOwnsMpi = false;
double gFinalizeBoundSeconds = 30.0;

bool mpiUsable() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

// MPI_Finalize waits for every peer, and a peer that closed cleanly can still die before its own
// MPI_Finalize (launcher clean-up off, as fault-tolerant jobs run): then it never returns. So it
// runs under a watchdog that, after `boundSeconds`, says why on stderr (spdlog is gone by then)
// and ends the process with the status it was exiting with: its work was done.
void finalizeWithin(double boundSeconds, int exitStatus) {
  struct Watch {
    std::mutex mutex;
    std::condition_variable finalized;
    bool done = false;
  };
  auto watch = std::make_shared<Watch>();
  std::thread dog([watch, boundSeconds, exitStatus] {
    std::unique_lock<std::mutex> lock(watch->mutex);
    if (watch->finalized.wait_for(lock, std::chrono::duration<double>(boundSeconds),
                                  [&] { return watch->done; })) {
      return;
    }
    char why[256];
    const int n = std::snprintf(why, sizeof why,
                                "hcoll: MPI_Finalize did not return within %.1f s at exit (a "
                                "peer may have died after closing); ending the process with "
                                "exit status %d\n",
                                boundSeconds, exitStatus);
    if (n > 0) (void)!::write(STDERR_FILENO, why, std::min(static_cast<size_t>(n), sizeof why));
    ::_exit(exitStatus);
  });
  MPI_Finalize();
  {
    std::lock_guard<std::mutex> lock(watch->mutex);
    watch->done = true;
  }
  watch->finalized.notify_one();
  dog.join();
}

// At process exit (on_exit: `exitStatus` is what the process exits with): hcoll shuts down
// (announcing its leave to the peers), then MPI initialized by hcoll is finalized, within a
// bound, unless that is known to wait for peers that will never finalize.
void finalizeAtExit(int exitStatus, void*) {
  if (!mpiUsable()) return;
  const bool safe = gBeforeFinalize == nullptr || gBeforeFinalize();
  if (!gOwnsMpi || !safe) return;
  // The watchdog's _exit skips stdio's flush at exit: flush now, whatever happens next.
  std::fflush(nullptr);
  if (gClosedTogether != nullptr && gClosedTogether()) {
    finalizeWithin(gFinalizeBoundSeconds, exitStatus);
  } else {
    MPI_Finalize();
  }
}

#if defined(MPICH_VERSION)
constexpr const char* kBuiltAgainst = "MPICH " MPICH_VERSION;
constexpr const char* kOwnLibrary = "libmpich";
constexpr const char* kForeignLibrary = "libmpi.so";  // Open MPI
constexpr const char* kForeignName = "Open MPI";
#elif defined(OMPI_MAJOR_VERSION)
#define HCOLL_STR2_(x) #x
#define HCOLL_STR_(x) HCOLL_STR2_(x)
constexpr const char* kBuiltAgainst = "Open MPI " HCOLL_STR_(OMPI_MAJOR_VERSION) "." HCOLL_STR_(
    OMPI_MINOR_VERSION) "." HCOLL_STR_(OMPI_RELEASE_VERSION);
constexpr const char* kOwnLibrary = "libmpi.so";
constexpr const char* kForeignLibrary = "libmpich";
constexpr const char* kForeignName = "MPICH";
#else
constexpr const char* kBuiltAgainst = "an unknown MPI";
constexpr const char* kOwnLibrary = nullptr;
constexpr const char* kForeignLibrary = nullptr;
constexpr const char* kForeignName = nullptr;
#endif

// The path of a mapped library of the other MPI family, or "" (Linux: /proc/self/maps).
std::string foreignMpiLoaded() {
  if (kForeignLibrary == nullptr) return "";
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const auto slash = line.rfind('/');
    if (slash == std::string::npos) continue;
    const std::string file = line.substr(slash + 1);
    if (file.rfind(kForeignLibrary, 0) == 0 && file.find(kOwnLibrary) == std::string::npos) {
      return line.substr(line.find('/'));
    }
  }
  return "";
}

// Makes MPI report errors instead of aborting while a user-supplied handle is examined, then
// restores the previous handlers.
class ErrorsReturnScope {
 public:
  ErrorsReturnScope() {
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &world_);
    MPI_Comm_get_errhandler(MPI_COMM_SELF, &self_);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  }
  ~ErrorsReturnScope() {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, world_);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, self_);
    MPI_Errhandler_free(&world_);
    MPI_Errhandler_free(&self_);
  }

 private:
  MPI_Errhandler world_ = MPI_ERRHANDLER_NULL;
  MPI_Errhandler self_ = MPI_ERRHANDLER_NULL;
};

Status duplicate(MPI_Comm comm, std::unique_ptr<Channel>* out) {
  if (comm == MPI_COMM_NULL) {
    // What MPI_Comm_split/create hand to ranks left out: this rank is not a member.
    return Status(Code::kNotMember, "the MPI communicator is MPI_COMM_NULL: this rank is not a member");
  }
  MPI_Comm dup;
  int rc;
  {
    ErrorsReturnScope scope;
    int isInter = 0;
    rc = MPI_Comm_test_inter(comm, &isInter);
    if (rc != MPI_SUCCESS) {
      return invalidArgument("the handle is not a valid MPI communicator (" +
                             mpiError("MPI_Comm_test_inter", rc).message() + ")");
    }
    if (isInter) return invalidArgument("intercommunicators are not supported");
    rc = MPI_Comm_dup(comm, &dup);
  }
  if (rc != MPI_SUCCESS) return mpiError("MPI_Comm_dup", rc);
  return MpiChannel::make(CommHandle(dup), out);
}

class MpiBackend final : public Backend {
 public:
  MpiBackend(MPI_Comm world, int worldRank, int worldSize)
      : world_(world), worldRank_(worldRank), worldSize_(worldSize) {}
  ~MpiBackend() override { freeCustomTypes(); }

  int worldSize() const override { return worldSize_; }
  std::vector<int> hostedRanks() const override { return {worldRank_}; }
  Status world(int rank, std::unique_ptr<Channel>* out) override {
    if (rank != worldRank_) {
      return invalidArgument("rank " + std::to_string(rank) + " is not this process's (" +
                             std::to_string(worldRank_) + "): MPI hosts one rank per process");
    }
    return duplicate(world_, out);
  }
  Status fromExternal(int64_t handle, std::unique_ptr<Channel>* out) override {
    if (handle < INT_MIN || handle > INT_MAX) {
      return invalidArgument("the handle is not a valid MPI communicator (out of range)");
    }
    return duplicate(MPI_Comm_f2c(static_cast<int>(handle)), out);
  }

 private:
  MPI_Comm world_;
  int worldRank_;
  int worldSize_;
};

}  // namespace

const char* builtAgainst() { return kBuiltAgainst; }

void abortJob(int exitCode) {
  if (mpiUsable()) MPI_Abort(MPI_COMM_WORLD, exitCode);
  ::_exit(exitCode);  // MPI_Abort returned (it should not), or there is no MPI to abort
}

Status createBackend(std::optional<int> worldHandle, bool (*beforeFinalize)(),
                     bool (*closedTogether)(), double finalizeBoundSeconds,
                     std::unique_ptr<Backend>* out) {
  if (std::string foreign = foreignMpiLoaded(); !foreign.empty()) {
    return Status(Code::kUnsupported,
                  std::string("this hcoll was built against ") + kBuiltAgainst +
                      " but the process has also loaded " + kForeignName + " (" + foreign +
                      ", e.g. through mpi4py): one process can use only one MPI. Use an hcoll "
                      "built for " + kForeignName + " (cmake -DHCOLL_MPI=" +
                      (std::string(kForeignName) == "MPICH" ? "mpich" : "openmpi") + ")");
  }
  gBeforeFinalize = beforeFinalize;
  gClosedTogether = closedTogether;
  gFinalizeBoundSeconds = finalizeBoundSeconds;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) return Status(Code::kBackend, "MPI has already been finalized");
  if (!initialized) {
    int provided = 0;
    if (int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
        rc != MPI_SUCCESS) {
      return mpiError("MPI_Init_thread", rc);
    }
    gOwnsMpi = true;
  }
  // Always: a process that exits without hcoll_shutdown still announces its leave to its peers.
  // (No MPI_COMM_SELF attribute hook on the application's MPI_Finalize: MPICH runs attribute
  // callbacks under its global lock, and shutting down there inverts the lock order with
  // hcoll_initialize, which ThreadSanitizer reports. Shut hcoll down before MPI_Finalize.)
  std::call_once(gAtExitOnce, [] { ::on_exit(finalizeAtExit, nullptr); });
  int provided = 0;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    return Status(Code::kUnsupported,
                  "MPI was initialized without MPI_THREAD_MULTIPLE (provided level " +
                      std::to_string(provided) +
                      "); hcoll drives MPI from one thread per communicator");
  }
  MPI_Comm world = worldHandle ? MPI_Comm_f2c(*worldHandle) : MPI_COMM_WORLD;
  int rank = 0, size = 1;
  {
    ErrorsReturnScope scope;
    if (world == MPI_COMM_NULL || MPI_Comm_rank(world, &rank) != MPI_SUCCESS ||
        MPI_Comm_size(world, &size) != MPI_SUCCESS) {
      return invalidArgument("init params: mpi_comm is not a valid MPI communicator");
    }
  }
  if (std::string bad = shmSettingError(); !bad.empty()) return invalidArgument(bad);
  if (std::string bad = shmSmallSettingError(); !bad.empty()) return invalidArgument(bad);
  HCOLL_RETURN_IF_ERROR(createCustomTypes());
  *out = std::make_unique<MpiBackend>(world, rank, size);
  return Status::ok();
}

namespace {

Status createFromOptions(const BackendOptions& options, std::unique_ptr<Backend>* out) {
  if (options.localRanks > 1) {
    return invalidArgument("the mpi backend hosts one rank per process (local ranks " +
                           std::to_string(options.localRanks) +
                           "); start one process per rank with mpiexec");
  }
  std::optional<int> world;
  if (options.externalWorld) {
    if (*options.externalWorld < INT_MIN || *options.externalWorld > INT_MAX) {
      return invalidArgument("init params: mpi_comm is not a valid MPI communicator");
    }
    world = static_cast<int>(*options.externalWorld);
  }
  return createBackend(world, options.beforeExit, options.closedTogether, options.exitBoundSeconds,
                       out);
}

[[noreturn]] void abortWithCode(int exitCode) { abortJob(exitCode); }

}  // namespace

const BackendInfo& backendInfo() {
  static const BackendInfo kInfo = {
      "mpi",    kHostMemory, kAllOperations, /*priority=*/100, createFromOptions,
      /*device=*/nullptr, builtAgainst, abortWithCode,
  };
  return kInfo;
}

}  // namespace hcoll::backends::mpi
