#include "communicator.h"

#include <stdexcept>
#include <string>

namespace hcoll::torch_c10d {

Communicator::Communicator(std::shared_ptr<const HcollLibrary> lib, hcoll_comm_t handle)
    : lib_(std::move(lib)), handle_(handle) {
  if (handle_ != nullptr) {
    lib_->check(lib_->hcoll_comm_rank(handle_, &rank_), "hcoll_comm_rank");
    lib_->check(lib_->hcoll_comm_size(handle_, &size_), "hcoll_comm_size");
  }
}

Communicator::~Communicator() {
  // Best effort: after hcoll_shutdown (or its exit handler) the handle is already gone.
  if (handle_ != nullptr && lib_->hcoll_is_initialized()) lib_->hcoll_comm_destroy(handle_);
}

void Communicator::setTimeout(std::chrono::milliseconds timeout) {
  // The group's timeout becomes hcoll's stall shutdown time for this communicator: an operation
  // some ranks never submit fails with TIMEOUT on every rank instead of hanging (0 = never).
  const double seconds = timeout.count() <= 0 ? 0.0 : static_cast<double>(timeout.count()) / 1e3;
  lib_->check(lib_->hcoll_comm_set_timeout(handle_, seconds < 1e6 ? seconds : 0.0),
              "hcoll_comm_set_timeout");
}

std::shared_ptr<Communicator> Communicator::world(std::shared_ptr<const HcollLibrary> lib, int rank,
                                                  int size, std::chrono::milliseconds timeout) {
  hcoll_comm_t world = nullptr;
  lib->check(lib->hcoll_comm_world(&world), "hcoll_comm_world");
  int worldSize = 0;
  lib->check(lib->hcoll_comm_size(world, &worldSize), "hcoll_comm_size");
  // Every process of hcoll's world sees the same two numbers, so all fail here together.
  if (worldSize != size) {
    throw std::runtime_error(
        "hcoll torch.distributed backend: init_process_group asked for world_size " +
        std::to_string(size) + " but hcoll's MPI world has " + std::to_string(worldSize) +
        " process(es). hcoll bootstraps from MPI, not from the c10d store: start the job with "
        "mpiexec -n " +
        std::to_string(size) + " (see docs/torch_distributed.md)");
  }
  hcoll_comm_t split = nullptr;
  lib->check(lib->hcoll_comm_split(world, 0, rank, &split), "hcoll_comm_split");
  std::shared_ptr<Communicator> comm(new Communicator(lib, split));
  // Ranks given to init_process_group (torch's) need not equal MPI's, but they must be 0..size-1,
  // one per process: every rank checks the same gathered list, so all fail or none does.
  int32_t mine = rank;
  const int64_t one = 1;
  hcoll_tensor_t in{&mine, HCOLL_INT32, 1, &one, HCOLL_DEVICE_HOST, nullptr};
  std::vector<int32_t> all(static_cast<size_t>(size));
  const int64_t n = size;
  hcoll_tensor_t out{all.data(), HCOLL_INT32, 1, &n, HCOLL_DEVICE_HOST, nullptr};
  hcoll_request_t req = nullptr;
  lib->check(lib->hcoll_allgather_into(split, "hcoll.c10d.ranks", &in, &out, nullptr, &req),
             "hcoll_allgather_into (rank check)");
  const hcoll_status_t status = lib->hcoll_wait(req, -1.0);
  const std::string error = status == HCOLL_SUCCESS ? "" : lib->hcoll_request_error(req);
  lib->hcoll_request_free(req);
  if (status != HCOLL_SUCCESS) {
    throw std::runtime_error("hcoll torch.distributed backend: rank check failed: " + error);
  }
  for (int i = 0; i < size; ++i) {
    if (all[static_cast<size_t>(i)] != i) {
      std::string list;
      for (int32_t r : all) list += (list.empty() ? "" : ", ") + std::to_string(r);
      throw std::runtime_error(
          "hcoll torch.distributed backend: the ranks given to init_process_group are [" + list +
          "] (in MPI rank order), not 0.." + std::to_string(size - 1) + " once each");
    }
  }
  comm->setTimeout(timeout);
  return comm;
}

std::shared_ptr<Communicator> Communicator::subset(const Communicator& parent,
                                                   const std::vector<int>& ranks,
                                                   std::chrono::milliseconds timeout) {
  const auto& lib = parent.library();
  hcoll_comm_t created = nullptr;
  lib->check(lib->hcoll_comm_create(parent.handle(), ranks.data(), static_cast<int>(ranks.size()),
                                    &created),
             "hcoll_comm_create (new_group)");
  std::shared_ptr<Communicator> comm(new Communicator(lib, created));
  if (comm->isMember()) comm->setTimeout(timeout);
  return comm;
}

}  // namespace hcoll::torch_c10d
