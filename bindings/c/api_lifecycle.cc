// Lifecycle and library information.

#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "bindings/c/errors.h"
#include "bindings/c/state.h"
#include "hcoll/hcoll.h"

namespace hcoll::bindings {
namespace {

constexpr uint64_t kKnownInitFields =
    HCOLL_INIT_FIELD_MPI_COMM | HCOLL_INIT_FIELD_ALLOCATOR | HCOLL_INIT_FIELD_BACKEND;
// Handles of the world as seen by each rank this process hosts (hcoll_comm_world_of), in the
// runtime's hostedRanks() order; written at initialize and shutdown, which are serialized.
struct HostedWorld {
  int rank;
  uintptr_t handle;
};
std::mutex gWorldsMutex;
std::vector<HostedWorld> gWorlds;

hcoll_status_t initialize(const hcoll_init_params_t* params) {
  runtime::InitOptions options;
  if (params != nullptr) {
    if (params->mask & ~kKnownInitFields) {
      return fail(HCOLL_ERR_INVALID_ARGUMENT,
                  "hcoll_initialize: params->mask has bits this library does not know");
    }
    if (params->mask & HCOLL_INIT_FIELD_MPI_COMM) options.externalWorld = params->mpi_comm;
    if (params->mask & HCOLL_INIT_FIELD_BACKEND) {
      if (params->local_ranks < 0) {
        return fail(HCOLL_ERR_INVALID_ARGUMENT, "hcoll_initialize: params->local_ranks is " +
                                                    std::to_string(params->local_ranks) +
                                                    ", it must be >= 0");
      }
      if (params->backend != nullptr) options.backend = params->backend;
      options.localRanks = params->local_ranks;
    }
    if (params->mask & HCOLL_INIT_FIELD_ALLOCATOR) {
      if (params->alloc == nullptr) {
        return fail(HCOLL_ERR_INVALID_ARGUMENT,
                    "hcoll_initialize: HCOLL_INIT_FIELD_ALLOCATOR is set but alloc is NULL");
      }
      auto allocator = std::make_shared<runtime::OutputAllocator>();
      hcoll_alloc_fn alloc = params->alloc;
      hcoll_free_fn release = params->free;
      void* ctx = params->alloc_ctx;
      allocator->alloc = [=](int32_t device, void* stream, size_t bytes) {
        return alloc(ctx, device, stream, bytes);
      };
      if (release != nullptr) {
        allocator->free = [=](int32_t device, void* ptr) { release(ctx, device, ptr); };
      }
      options.outputs = std::move(allocator);
    }
  }
  Status s = runtime::Runtime::initialize(options);
  if (!s.isOk()) return toC(Status(s.code(), "hcoll_initialize: " + s.message()));
  auto rt = runtime::Runtime::current();
  std::lock_guard<std::mutex> lock(gWorldsMutex);
  gWorlds.clear();
  for (size_t i = 0; i < rt->worlds().size(); ++i) {
    gWorlds.push_back({rt->hostedRanks()[i], commTable().insert(rt->worlds()[i])});
  }
  return HCOLL_SUCCESS;
}

}  // namespace
}  // namespace hcoll::bindings

using namespace hcoll::bindings;

extern "C" {

HCOLL_API hcoll_status_t hcoll_initialize(const hcoll_init_params_t* params) {
  return guarded("hcoll_initialize", [&] { return initialize(params); });
}

HCOLL_API hcoll_status_t hcoll_shutdown(void) {
  return guarded("hcoll_shutdown", [&] {
    hcoll::Status s = hcoll::runtime::Runtime::shutdown();
    if (!s.isOk()) return toC(hcoll::Status(s.code(), "hcoll_shutdown: " + s.message()));
    // Communicator handles from this initialization become invalid. Request handles stay valid
    // until freed: a request pending at shutdown reports HCOLL_ERR_SHUT_DOWN from test/wait.
    commTable().clear();
    std::lock_guard<std::mutex> lock(gWorldsMutex);
    gWorlds.clear();
    return HCOLL_SUCCESS;
  });
}

HCOLL_API int hcoll_is_initialized(void) {
  return hcoll::runtime::Runtime::current() != nullptr ? 1 : 0;
}

HCOLL_API hcoll_status_t hcoll_version(int* major, int* minor, int* patch) {
  if (major) *major = HCOLL_VERSION_MAJOR;
  if (minor) *minor = HCOLL_VERSION_MINOR;
  if (patch) *patch = HCOLL_VERSION_PATCH;
  return HCOLL_SUCCESS;
}

HCOLL_API const char* hcoll_version_string(void) {
  return HCOLL_VERSION_STRING;
}

HCOLL_API int hcoll_nccl_built(void) { return HCOLL_WITH_NCCL; }

HCOLL_API int hcoll_nccl_version(void) {
  // The backend names its build as "NCCL <major>.<minor>.<patch>"; the code is NCCL's own
  // NCCL_VERSION_CODE formula (the one Horovod's nccl_built() returns).
  const char* version = hcoll::runtime::Runtime::backendVersion("nccl");
  int major = 0, minor = 0, patch = 0;
  if (version == nullptr || std::sscanf(version, "NCCL %d.%d.%d", &major, &minor, &patch) != 3) {
    return 0;
  }
  return major <= 2 && minor < 9 ? major * 1000 + minor * 100 + patch
                                 : major * 10000 + minor * 100 + patch;
}

HCOLL_API hcoll_status_t hcoll_start_timeline(const char* path) {
  return guarded("hcoll_start_timeline", [&] {
    if (path == nullptr)
      return fail(HCOLL_ERR_INVALID_ARGUMENT, "hcoll_start_timeline: path is NULL");
    hcoll::Status s = hcoll::runtime::Runtime::startTimeline(path);
    return s.isOk() ? HCOLL_SUCCESS
                    : toC(hcoll::Status(s.code(), "hcoll_start_timeline: " + s.message()));
  });
}

HCOLL_API hcoll_status_t hcoll_stop_timeline(void) {
  return guarded("hcoll_stop_timeline", [&] {
    hcoll::Status s = hcoll::runtime::Runtime::stopTimeline();
    return s.isOk() ? HCOLL_SUCCESS
                    : toC(hcoll::Status(s.code(), "hcoll_stop_timeline: " + s.message()));
  });
}

HCOLL_API const char* hcoll_mpi_version(void) {
  const char* version = hcoll::runtime::Runtime::backendVersion("mpi");
  return version != nullptr ? version : "none (built without the mpi backend)";
}

HCOLL_API void hcoll_abort(const char* reason) {
  // Never returns; nothing to catch on the way out but a failure to format the reason.
  std::string why = reason != nullptr ? reason : "(no reason given)";
  hcoll::runtime::Runtime::abortJob(why);
}

HCOLL_API hcoll_status_t hcoll_comm_world(hcoll_comm_t* comm) {
  return guarded("hcoll_comm_world", [&] {
    std::shared_ptr<hcoll::runtime::Runtime> rt;
    if (hcoll_status_t s = requireRuntime("hcoll_comm_world", &rt); s != HCOLL_SUCCESS) return s;
    if (comm == nullptr) return fail(HCOLL_ERR_INVALID_ARGUMENT, "hcoll_comm_world: comm is NULL");
    std::lock_guard<std::mutex> lock(gWorldsMutex);
    if (gWorlds.empty()) {
      return fail(HCOLL_ERR_NOT_INITIALIZED, "hcoll_comm_world: hcoll is shutting down");
    }
    *comm = toHandle(gWorlds.front().handle);
    return HCOLL_SUCCESS;
  });
}

HCOLL_API hcoll_status_t hcoll_comm_world_of(int rank, hcoll_comm_t* comm) {
  return guarded("hcoll_comm_world_of", [&] {
    std::shared_ptr<hcoll::runtime::Runtime> rt;
    if (hcoll_status_t s = requireRuntime("hcoll_comm_world_of", &rt); s != HCOLL_SUCCESS) return s;
    if (comm == nullptr) {
      return fail(HCOLL_ERR_INVALID_ARGUMENT, "hcoll_comm_world_of: comm is NULL");
    }
    std::lock_guard<std::mutex> lock(gWorldsMutex);
    for (const HostedWorld& world : gWorlds) {
      if (world.rank == rank) {
        *comm = toHandle(world.handle);
        return HCOLL_SUCCESS;
      }
    }
    return fail(HCOLL_ERR_INVALID_ARGUMENT,
                "hcoll_comm_world_of: rank " + std::to_string(rank) +
                    " is not hosted by this process (it hosts " +
                    hcoll::rankSequence(rt->hostedRanks()) + ", backend " + rt->backendName() + ")");
  });
}

}  // extern "C"
