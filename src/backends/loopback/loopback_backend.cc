#include "backends/loopback/loopback_backend.h"

#include <cerrno>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "backends/loopback/loopback_channel.h"
#include "backends/loopback/loopback_group.h"

namespace hcoll::backends::loopback {
namespace {

class LoopbackBackend final : public Backend {
 public:
  explicit LoopbackBackend(int ranks) : ranks_(ranks), calls_(static_cast<size_t>(ranks), 0) {}

  int worldSize() const override { return ranks_; }

  std::vector<int> hostedRanks() const override {
    std::vector<int> all(static_cast<size_t>(ranks_));
    for (int r = 0; r < ranks_; ++r) all[static_cast<size_t>(r)] = r;
    return all;
  }

  // Like MPI_Comm_dup of the world: the k-th call of each rank joins the k-th world group, so
  // that every call gives a new communicator whatever order the ranks' threads call in.
  Status world(int rank, std::unique_ptr<Channel>* out) override {
    out->reset();
    if (rank < 0 || rank >= ranks_) {
      return invalidArgument("loopback: rank " + std::to_string(rank) + " is not one of the " +
                             std::to_string(ranks_) + " ranks of this process");
    }
    std::lock_guard<std::mutex> lock(mutex_);
    const uint64_t generation = calls_[static_cast<size_t>(rank)]++;
    WorldSlot& slot = open_[generation];
    if (!slot.group) slot.group = std::make_shared<Group>(ranks_);
    *out = std::make_unique<LoopbackChannel>(slot.group, rank);
    if (++slot.taken == ranks_) open_.erase(generation);  // every rank has its channel
    return Status::ok();
  }

  Status fromExternal(int64_t /*handle*/, std::unique_ptr<Channel>* out) override {
    out->reset();
    return Status(Code::kUnsupported,
                  "the loopback backend has no external communicators (hcoll_comm_from_mpi "
                  "needs the MPI backend)");
  }

 private:
  struct WorldSlot {
    std::shared_ptr<Group> group;
    int taken = 0;
  };
  const int ranks_;
  std::mutex mutex_;
  std::vector<uint64_t> calls_;         // world() calls per rank so far
  std::map<uint64_t, WorldSlot> open_;  // world groups not yet taken by every rank
};

// HCOLL_LOOPBACK_SIZE: a whole number of ranks; anything else is reported, not ignored.
Status ranksFromEnvironment(int* ranks) {
  const char* text = std::getenv("HCOLL_LOOPBACK_SIZE");
  *ranks = 1;
  if (text == nullptr || *text == '\0') return Status::ok();
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || value < 1 || value > kMaxRanks) {
    return invalidArgument(std::string("HCOLL_LOOPBACK_SIZE='") + text +
                           "': expected a number of ranks in [1, " + std::to_string(kMaxRanks) +
                           "]");
  }
  *ranks = static_cast<int>(value);
  return Status::ok();
}

Status createFromOptions(const BackendOptions& options, std::unique_ptr<Backend>* out) {
  if (options.externalWorld) {
    return invalidArgument(
        "init params: the loopback backend has no external world communicator (mpi_comm is "
        "for the mpi backend)");
  }
  int ranks = options.localRanks;
  if (ranks == 0) HCOLL_RETURN_IF_ERROR(ranksFromEnvironment(&ranks));
  // No transport to finalize at exit, so options.beforeExit is not needed.
  return createLoopbackBackend(ranks, out);
}

const char* transportVersion() { return "loopback (threads of one process)"; }

}  // namespace

const BackendInfo& backendInfo() {
  static const BackendInfo kInfo = {
      "loopback", kHostMemory, kAllOperations, /*priority=*/10, createFromOptions,
      /*device=*/nullptr, transportVersion, /*abortJob=*/nullptr,
  };
  return kInfo;
}

Status createLoopbackBackend(int ranks, std::unique_ptr<Backend>* out) {
  out->reset();
  if (ranks < 1 || ranks > kMaxRanks) {
    return invalidArgument("loopback: the number of ranks must be in [1, " +
                           std::to_string(kMaxRanks) + "], not " + std::to_string(ranks));
  }
  *out = std::make_unique<LoopbackBackend>(ranks);
  return Status::ok();
}

}  // namespace hcoll::backends::loopback
