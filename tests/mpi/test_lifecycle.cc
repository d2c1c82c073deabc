// Lifecycle: calls before initialize are NOT_INITIALIZED; initialize -> shutdown -> initialize
// works; handles from before a shutdown are INVALID_HANDLE; malformed HCOLL_* environment values
// fail initialize with INVALID_ARGUMENT; a user output allocator owns output memory.
// Has its own main: hcoll is not initialized before the first test case.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

#include "support/test_util.h"

using namespace htest;

namespace {

void initOk(const hcoll_init_params_t* p = nullptr) {
  hcoll_status_t s = hcoll_initialize(p);
  INFO("hcoll_initialize: " << hcoll_last_error());
  REQUIRE(s == HCOLL_SUCCESS);
  REQUIRE(hcoll_is_initialized() == 1);
}

void shutdownOk() {
  HCOLL_REQUIRE_OK(hcoll_shutdown());
  REQUIRE(hcoll_is_initialized() == 0);
}

int64_t worldSum(int64_t mine) {
  Tensor t(HCOLL_INT64, {1});
  t.set(0, static_cast<double>(mine));
  auto d = t.desc();
  hcoll_request_t req;
  REQUIRE(hcoll_allreduce(world(), nullptr, &d, &d, HCOLL_SUM, 1, 1, &req) == HCOLL_SUCCESS);
  REQUIRE(waitAndFree(req) == HCOLL_SUCCESS);
  return static_cast<int64_t>(t.get(0));
}

// A counting user allocator.
struct UserAlloc {
  std::mutex mutex;
  std::set<void*> live;
  int allocs = 0;
  int frees = 0;
  std::atomic<bool> refuse{false};  // while set, every allocation fails
};
void* userAlloc(void* ctx, int32_t device, void*, size_t bytes) {
  auto* u = static_cast<UserAlloc*>(ctx);
  if (device != HCOLL_DEVICE_HOST || u->refuse.load()) return nullptr;
  void* p = std::malloc(bytes == 0 ? 1 : bytes);
  std::lock_guard<std::mutex> lock(u->mutex);
  u->live.insert(p);
  ++u->allocs;
  return p;
}
void userFree(void* ctx, int32_t, void* p) {
  auto* u = static_cast<UserAlloc*>(ctx);
  std::lock_guard<std::mutex> lock(u->mutex);
  u->live.erase(p);
  ++u->frees;
  std::free(p);
}
// Initializes hcoll with `u` as its output allocator.
void initWithAllocator(UserAlloc* u) {
  hcoll_init_params_t p{};
  p.mask = HCOLL_INIT_FIELD_ALLOCATOR;
  p.alloc = userAlloc;
  p.free = userFree;
  p.alloc_ctx = u;
  initOk(&p);
}

}  // namespace

TEST_CASE("lifecycle: every call before initialize is NOT_INITIALIZED", "[lifecycle]") {
  REQUIRE(hcoll_is_initialized() == 0);
  const auto NI = HCOLL_ERR_NOT_INITIALIZED;
  hcoll_comm_t c;
  REQUIRE(hcoll_comm_world(&c) == NI);
  REQUIRE(std::string(hcoll_last_error()).size() > 0);
  REQUIRE(hcoll_shutdown() == NI);
  Tensor t(HCOLL_FLOAT32, {2});
  auto d = t.desc();
  hcoll_request_t req;
  auto fake = reinterpret_cast<hcoll_comm_t>(uintptr_t{0xC000000100000001ull});
  REQUIRE(hcoll_allreduce(fake, "x", &d, &d, HCOLL_SUM, 1, 1, &req) == NI);
  REQUIRE(hcoll_barrier(fake, &req) == NI);
  REQUIRE(hcoll_comm_split(fake, 0, 0, &c) == NI);
  REQUIRE(hcoll_comm_from_mpi(0, &c) == NI);
  int x;
  REQUIRE(hcoll_comm_rank(fake, &x) == NI);
  // Pure information calls work before initialize.
  REQUIRE(std::string(hcoll_status_string(NI)).size() > 0);
  HCOLL_REQUIRE_OK(hcoll_version(&x, nullptr, nullptr));
  REQUIRE(std::string(hcoll_version_string()) == HCOLL_VERSION_STRING);
}

TEST_CASE("lifecycle: bad init params are INVALID_ARGUMENT", "[lifecycle]") {
  hcoll_init_params_t p{};
  p.mask = uint64_t{1} << 40;  // unknown field
  REQUIRE(hcoll_initialize(&p) == HCOLL_ERR_INVALID_ARGUMENT);
  REQUIRE(std::string(hcoll_last_error()).size() > 0);
  p.mask = HCOLL_INIT_FIELD_ALLOCATOR;  // set but alloc is NULL
  REQUIRE(hcoll_initialize(&p) == HCOLL_ERR_INVALID_ARGUMENT);
  REQUIRE(hcoll_is_initialized() == 0);
}

TEST_CASE("lifecycle: initialize, shutdown, initialize; stale handles", "[lifecycle]") {
  initOk();
  const int n = worldSize();
  REQUIRE(hcoll_initialize(nullptr) == HCOLL_ERR_INVALID_ARGUMENT);  // already initialized
  REQUIRE(hcoll_is_initialized() == 1);
  REQUIRE(worldSum(1) == n);
  hcoll_comm_t oldWorld = world();
  hcoll_comm_t oldSplit = HCOLL_COMM_NULL;
  HCOLL_REQUIRE_OK(hcoll_comm_split(oldWorld, 0, 0, &oldSplit));
  hcoll_request_t oldReq;
  HCOLL_REQUIRE_OK(hcoll_barrier(oldWorld, &oldReq));
  HCOLL_REQUIRE_OK(hcoll_wait(oldReq, 30));  // completed but not freed
  shutdownOk();
  REQUIRE(hcoll_shutdown() == HCOLL_ERR_NOT_INITIALIZED);
  int x;
  REQUIRE(hcoll_comm_size(oldWorld, &x) == HCOLL_ERR_NOT_INITIALIZED);

  initOk();
  REQUIRE(worldSum(2) == 2 * n);
  REQUIRE(hcoll_comm_size(oldWorld, &x) == HCOLL_ERR_INVALID_HANDLE);
  REQUIRE(std::string(hcoll_last_error()).size() > 0);
  REQUIRE(hcoll_comm_size(oldSplit, &x) == HCOLL_ERR_INVALID_HANDLE);
  // Requests outlive a shutdown (so that pending ones can report SHUT_DOWN) until freed.
  REQUIRE(hcoll_test(oldReq) == HCOLL_SUCCESS);
  REQUIRE(hcoll_request_free(oldReq) == HCOLL_SUCCESS);
  REQUIRE(hcoll_request_free(oldReq) == HCOLL_ERR_INVALID_HANDLE);
  Tensor t(HCOLL_FLOAT32, {2});
  auto d = t.desc();
  hcoll_request_t req;
  REQUIRE(hcoll_allreduce(oldWorld, "x", &d, &d, HCOLL_SUM, 1, 1, &req) == HCOLL_ERR_INVALID_HANDLE);
  REQUIRE(world() != HCOLL_COMM_NULL);
  shutdownOk();
}

TEST_CASE("lifecycle: shutdown with an operation no other rank submitted does not hang", "[lifecycle]") {
  initOk();
  Tensor t(HCOLL_INT32, {3});
  auto d = t.desc();
  hcoll_request_t req;
  const std::string name = "orphan." + std::to_string(worldRank());  // never matched
  HCOLL_REQUIRE_OK(hcoll_allreduce(world(), name.c_str(), &d, &d, HCOLL_SUM, 1, 1, &req));
  REQUIRE(hcoll_test(req) == HCOLL_IN_PROGRESS);
  shutdownOk();
  REQUIRE(hcoll_test(req) == HCOLL_ERR_SHUT_DOWN);
  REQUIRE(hcoll_wait(req, 1.0) == HCOLL_ERR_SHUT_DOWN);
  REQUIRE(std::string(hcoll_request_error(req)).size() > 0);
  initOk();
  REQUIRE(hcoll_test(req) == HCOLL_ERR_SHUT_DOWN);
  REQUIRE(hcoll_request_free(req) == HCOLL_SUCCESS);
  REQUIRE(worldSum(1) == worldSize());
  shutdownOk();
}

TEST_CASE("lifecycle: the backend is chosen by name; the world as seen by a hosted rank",
          "[lifecycle][backend]") {
  // Unknown names fail on every rank (each reads the same environment) before any MPI call.
  REQUIRE(setenv("HCOLL_BACKEND", "carrier-pigeon", 1) == 0);
  REQUIRE(hcoll_initialize(nullptr) == HCOLL_ERR_INVALID_ARGUMENT);
  std::string msg = hcoll_last_error();
  INFO(msg);
  REQUIRE(msg.find("carrier-pigeon") != std::string::npos);
  REQUIRE(msg.find("mpi") != std::string::npos);  // the names this build has
  REQUIRE(hcoll_is_initialized() == 0);
  // The init parameter overrides the environment; mpi hosts one rank per process.
  hcoll_init_params_t p{};
  p.mask = HCOLL_INIT_FIELD_BACKEND;
  p.backend = "mpi";
  p.local_ranks = 2;
  REQUIRE(hcoll_initialize(&p) == HCOLL_ERR_INVALID_ARGUMENT);
  p.local_ranks = -1;
  REQUIRE(hcoll_initialize(&p) == HCOLL_ERR_INVALID_ARGUMENT);
  p.local_ranks = 0;
  initOk(&p);
  REQUIRE(unsetenv("HCOLL_BACKEND") == 0);
  hcoll_comm_t mine = HCOLL_COMM_NULL;
  HCOLL_REQUIRE_OK(hcoll_comm_world_of(worldRank(), &mine));
  REQUIRE(mine == world());
  const int other = (worldRank() + 1) % worldSize();
  if (other != worldRank()) {
    REQUIRE(hcoll_comm_world_of(other, &mine) == HCOLL_ERR_INVALID_ARGUMENT);
    REQUIRE(std::string(hcoll_last_error()).find("not hosted") != std::string::npos);
  }
  REQUIRE(hcoll_comm_world_of(0, nullptr) == HCOLL_ERR_INVALID_ARGUMENT);
  REQUIRE(worldSum(1) == worldSize());
  shutdownOk();
  REQUIRE(hcoll_comm_world_of(0, &mine) == HCOLL_ERR_NOT_INITIALIZED);
}

TEST_CASE("lifecycle: malformed environment values fail initialize", "[lifecycle][env]") {
  const char* const cases[][2] = {{"HCOLL_FUSION_THRESHOLD", "abc"},
                                  {"HCOLL_FUSION_THRESHOLD", "-5"},
                                  {"HCOLL_CYCLE_TIME_MS", "fast"},
                                  {"HCOLL_CYCLE_TIME_MS", "1e300"},  // would overflow a clock
                                  {"HCOLL_STALL_CHECK_TIME_SECONDS", "inf"},
                                  {"HCOLL_CACHE_CAPACITY", "12x"},
                                  {"HCOLL_STALL_CHECK_TIME_SECONDS", "-1"},
                                  {"HCOLL_STALL_SHUTDOWN_TIME_SECONDS", "nan"},
                                  {"HCOLL_LOG_LEVEL", "loud"},
                                  {"HCOLL_MPI_SHM", "yes"},
                                  {"HCOLL_MPI_SHM_SMALL", "2"}};
  for (auto& c : cases) {
    INFO(c[0] << "=" << c[1]);
    REQUIRE(setenv(c[0], c[1], 1) == 0);
    REQUIRE(hcoll_initialize(nullptr) == HCOLL_ERR_INVALID_ARGUMENT);
    std::string msg = hcoll_last_error();
    INFO(msg);
    REQUIRE(msg.find(c[0]) != std::string::npos);
    REQUIRE(hcoll_is_initialized() == 0);
    REQUIRE(unsetenv(c[0]) == 0);
  }
  // Good values are accepted.
  REQUIRE(setenv("HCOLL_FUSION_THRESHOLD", "0", 1) == 0);
  REQUIRE(setenv("HCOLL_LOG_LEVEL", "error", 1) == 0);
  REQUIRE(setenv("HCOLL_MPI_SHM", "0", 1) == 0);
  REQUIRE(setenv("HCOLL_MPI_SHM_SMALL", "0", 1) == 0);
  initOk();
  REQUIRE(worldSum(3) == 3 * worldSize());
  shutdownOk();
  unsetenv("HCOLL_FUSION_THRESHOLD");
  unsetenv("HCOLL_LOG_LEVEL");
  unsetenv("HCOLL_MPI_SHM");
  unsetenv("HCOLL_MPI_SHM_SMALL");
}

TEST_CASE("lifecycle: HCOLL_TIMELINE naming a directory fails initialize", "[lifecycle][env]") {
  // Accepted, it wrote hidden per-rank files "<dir>/.0", "<dir>/.1". Every rank sees the same
  // directory ("." and "/tmp/") and fails before any collective, so no rank waits for another.
  for (const char* dir : {".", "/tmp/", "/tmp"}) {
    INFO("HCOLL_TIMELINE=" << dir);
    REQUIRE(setenv("HCOLL_TIMELINE", dir, 1) == 0);
    REQUIRE(hcoll_initialize(nullptr) == HCOLL_ERR_INVALID_ARGUMENT);
    std::string msg = hcoll_last_error();
    INFO(msg);
    REQUIRE(msg.find("HCOLL_TIMELINE") != std::string::npos);
    REQUIRE(msg.find("directory") != std::string::npos);
    REQUIRE(hcoll_is_initialized() == 0);
  }
  REQUIRE(unsetenv("HCOLL_TIMELINE") == 0);
  initOk();
  REQUIRE(worldSum(2) == 2 * worldSize());
  shutdownOk();
}

TEST_CASE("lifecycle: outputs from a user allocator belong to the user", "[lifecycle][allocator]") {
  UserAlloc u;
  initWithAllocator(&u);
  const int r = worldRank();
  const int n = worldSize();
  Tensor in(HCOLL_INT32, {2});
  in.set(0, r);
  in.set(1, 10 + r);
  auto d = in.desc();
  hcoll_request_t req;
  HCOLL_REQUIRE_OK(hcoll_allgather(world(), "alloc.ag", &d, &req));
  HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
  hcoll_tensor_t out;
  HCOLL_REQUIRE_OK(hcoll_request_output(req, 0, &out));
  void* data = out.data;
  {
    std::lock_guard<std::mutex> lock(u.mutex);
    REQUIRE(u.live.count(data) == 1);
    REQUIRE(u.allocs >= 1);
  }
  HCOLL_REQUIRE_OK(hcoll_request_free(req));
  // Still ours after the request is gone: read it, then free it ourselves.
  const auto* v = static_cast<const int32_t*>(data);
  for (int k = 0; k < n; ++k) {
    REQUIRE(v[2 * k] == k);
    REQUIRE(v[2 * k + 1] == 10 + k);
  }
  {
    std::lock_guard<std::mutex> lock(u.mutex);
    REQUIRE(u.live.count(data) == 1);  // hcoll did not free it
  }
  userFree(&u, HCOLL_DEVICE_HOST, data);
  // reducescatter and alltoall outputs go through it too.
  Tensor rs(HCOLL_FLOAT32, {n});
  for (int i = 0; i < n; ++i) rs.set(i, i);
  auto rd = rs.desc();
  int before = u.allocs;
  HCOLL_REQUIRE_OK(hcoll_reducescatter(world(), "alloc.rs", &rd, HCOLL_SUM, 1, 1, &req));
  HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
  HCOLL_REQUIRE_OK(hcoll_request_output(req, 0, &out));
  REQUIRE(static_cast<const float*>(out.data)[0] == static_cast<float>(n * r));
  {
    std::lock_guard<std::mutex> lock(u.mutex);
    REQUIRE(u.allocs > before);
    REQUIRE(u.live.count(out.data) == 1);
  }
  data = out.data;
  HCOLL_REQUIRE_OK(hcoll_request_free(req));
  userFree(&u, HCOLL_DEVICE_HOST, data);
  {
    std::lock_guard<std::mutex> lock(u.mutex);
    REQUIRE(u.live.empty());
  }
  // A request freed while in flight: its outputs can never be handed out, so hcoll gives them
  // back through `free`. Rank 1 submits only after rank 0 freed its request, so rank 0's
  // allgather is surely still in flight when freed (a barrier may overtake named ops).
  hcoll_request_t fence;
  if (r == 0) HCOLL_REQUIRE_OK(hcoll_allgather(world(), "alloc.abandoned", &d, &req));
  if (r == 0) HCOLL_REQUIRE_OK(hcoll_request_free(req));
  HCOLL_REQUIRE_OK(hcoll_barrier(world(), &fence));
  HCOLL_REQUIRE_OK(waitAndFree(fence));
  if (r != 0) {  // the other ranks take their output as usual
    HCOLL_REQUIRE_OK(hcoll_allgather(world(), "alloc.abandoned", &d, &req));
    HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
    HCOLL_REQUIRE_OK(hcoll_request_output(req, 0, &out));
    HCOLL_REQUIRE_OK(hcoll_request_free(req));
    userFree(&u, HCOLL_DEVICE_HOST, out.data);
  }
  // Ops run in submission order: once this one is done, the abandoned allgather is done too.
  REQUIRE(worldSum(1) == n);
  {
    std::lock_guard<std::mutex> lock(u.mutex);
    INFO("allocs " << u.allocs << ", frees " << u.frees);
    REQUIRE(u.live.empty());
  }
  shutdownOk();
  // Default allocation again after a plain initialize.
  initOk();
  REQUIRE(worldSum(1) == n);
  shutdownOk();
}

TEST_CASE("lifecycle: an allocator that refuses an output fails that rank's call alone",
          "[lifecycle][allocator]") {
  // A grouped allgather small enough to ride in its round's readiness exchange once cached
  // (the fold: its data is here before any output is allocated). Rank 0's allocator refuses
  // the outputs of the second call: that call fails there with NO_MEMORY and gives nothing back
  // half-allocated; the other ranks get their result, and the next call works everywhere.
  UserAlloc u;
  initWithAllocator(&u);
  const int r = worldRank();
  const int n = worldSize();
  const uint64_t foldedBefore = commStats(world()).folded;
  for (int call = 0; call < 3; ++call) {
    INFO("call " << call);
    Tensor a(HCOLL_INT32, {1}), b(HCOLL_INT32, {2});
    a.set(0, 100 * r + call);
    b.set(0, 10 * r);
    b.set(1, 10 * r + 1);
    const hcoll_tensor_t ins[2] = {a.desc(), b.desc()};
    const bool refused = call == 1 && r == 0;
    u.refuse = refused;
    hcoll_request_t req;
    HCOLL_REQUIRE_OK(hcoll_grouped_allgather(world(), "alloc.refused", 2, ins, &req));
    const hcoll_status_t status = hcoll_wait(req, 30);
    u.refuse = false;
    if (refused) {
      REQUIRE(status == HCOLL_ERR_NO_MEMORY);
      HCOLL_REQUIRE_OK(hcoll_request_free(req));
      continue;
    }
    HCOLL_REQUIRE_OK(status);
    hcoll_tensor_t outA, outB;
    HCOLL_REQUIRE_OK(hcoll_request_output(req, 0, &outA));
    HCOLL_REQUIRE_OK(hcoll_request_output(req, 1, &outB));
    HCOLL_REQUIRE_OK(hcoll_request_free(req));
    for (int k = 0; k < n; ++k) {
      REQUIRE(static_cast<const int32_t*>(outA.data)[k] == 100 * k + call);
      REQUIRE(static_cast<const int32_t*>(outB.data)[2 * k] == 10 * k);
      REQUIRE(static_cast<const int32_t*>(outB.data)[2 * k + 1] == 10 * k + 1);
    }
    userFree(&u, HCOLL_DEVICE_HOST, outA.data);
    userFree(&u, HCOLL_DEVICE_HOST, outB.data);
  }
  {
    std::lock_guard<std::mutex> lock(u.mutex);
    INFO("allocs " << u.allocs << ", frees " << u.frees);
    REQUIRE(u.live.empty());  // nothing of the refused call was kept or leaked
  }
  // On one node with the control block (this test's runs), the cached calls folded.
  int local = 0;
  HCOLL_REQUIRE_OK(hcoll_comm_local_size(world(), &local));
  const char* small = std::getenv("HCOLL_MPI_SHM_SMALL");
  if (n > 1 && local == n && (small == nullptr || std::string(small) != "0")) {
    REQUIRE(commStats(world()).folded > foldedBefore);
  }
  REQUIRE(worldSum(1) == n);
  shutdownOk();
}

int main(int argc, char** argv) {
  int result = Catch::Session().run(argc, argv);
  if (hcoll_is_initialized()) hcoll_shutdown();
  return result;
}
