/* How a framework plugin uses hcoll without linking it: dlopen() libhcoll.so.0, resolve every
 * public function with dlsym(), and drive collectives through the pointers only. The header is
 * used for types and constants; nothing here references an hcoll symbol at link time.
 * Run: mpiexec.mpich -n 2 ./hcoll-example-plugin [path/to/libhcoll.so.0]   (default: the loader
 * search path, e.g. LD_LIBRARY_PATH) */
#include <dlfcn.h>
#include <hcoll/hcoll.h>
#include <stdio.h>
#include <string.h>

/* The function table: one X entry per public function of hcoll.h, so none can be forgotten. */
/* clang-format off */
#define HCOLL_FUNCTIONS(X)                                                                     \
  X(hcoll_initialize) X(hcoll_shutdown) X(hcoll_is_initialized) X(hcoll_version)               \
  X(hcoll_status_string) X(hcoll_last_error) X(hcoll_nccl_built) X(hcoll_mpi_version)          \
  X(hcoll_abort) X(hcoll_comm_world) X(hcoll_comm_world_of)                                    \
  X(hcoll_comm_split) X(hcoll_comm_create) X(hcoll_comm_from_mpi) X(hcoll_comm_destroy)        \
  X(hcoll_comm_rank) X(hcoll_comm_size) X(hcoll_comm_local_rank) X(hcoll_comm_local_size)      \
  X(hcoll_comm_stats) X(hcoll_comm_set_timeout) X(hcoll_allreduce) X(hcoll_grouped_allreduce)  \
  X(hcoll_allgather)                                                                           \
  X(hcoll_grouped_allgather) X(hcoll_broadcast) X(hcoll_grouped_broadcast)                     \
  X(hcoll_alltoall) X(hcoll_reducescatter) X(hcoll_grouped_reducescatter) X(hcoll_barrier)     \
  X(hcoll_join) X(hcoll_test) X(hcoll_wait) X(hcoll_request_output)                            \
  X(hcoll_request_received_splits) X(hcoll_request_error) X(hcoll_request_free)               \
  X(hcoll_version_string) X(hcoll_allgather_into) X(hcoll_grouped_allgather_into)            \
  X(hcoll_alltoall_into) X(hcoll_reducescatter_into) X(hcoll_grouped_reducescatter_into)     \
  X(hcoll_nccl_version) X(hcoll_start_timeline) X(hcoll_stop_timeline)
/* clang-format on */

/* __typeof__ keeps each pointer's type tied to the header's declaration. */
struct hcoll_api {
#define HCOLL_FIELD_(fn) __typeof__(&fn) fn;
  HCOLL_FUNCTIONS(HCOLL_FIELD_)
#undef HCOLL_FIELD_
};

static int loadApi(const char* path, struct hcoll_api* api) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "dlopen(%s): %s\n", path, dlerror());
    return 0;
  }
  int missing = 0;
#define HCOLL_RESOLVE_(fn)                              \
  *(void**)(&api->fn) = dlsym(lib, #fn);                \
  if (api->fn == NULL) {                                \
    fprintf(stderr, "dlsym(%s): %s\n", #fn, dlerror()); \
    ++missing;                                          \
  }
  HCOLL_FUNCTIONS(HCOLL_RESOLVE_)
#undef HCOLL_RESOLVE_
  return missing == 0; /* the handle stays open for the process's lifetime, like a plugin's */
}

static struct hcoll_api H;
static int failures = 0;

#define CHECK(cond)                                                                \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      fprintf(stderr, "%s:%d: check failed: %s (%s)\n", __FILE__, __LINE__, #cond, \
              H.hcoll_last_error());                                               \
      ++failures;                                                                  \
    }                                                                              \
  } while (0)

static hcoll_status_t finish(hcoll_request_t req) {
  hcoll_status_t s = H.hcoll_wait(req, 60.0);
  if (s != HCOLL_SUCCESS) fprintf(stderr, "wait: %s\n", H.hcoll_request_error(req));
  return s;
}

int main(int argc, char** argv) {
  if (!loadApi(argc > 1 ? argv[1] : "libhcoll.so.0", &H)) return 1;
  int major = -1, minor = -1, patch = -1;
  CHECK(H.hcoll_version(&major, &minor, &patch) == HCOLL_SUCCESS && major == 0);
  CHECK(major * 10000 + minor * 100 + patch == HCOLL_VERSION); /* the header matches the library */
  CHECK(strcmp(H.hcoll_version_string(), HCOLL_VERSION_STRING) == 0);
  CHECK(strcmp(H.hcoll_status_string(HCOLL_ERR_TIMEOUT), "timed out") == 0);
  CHECK(H.hcoll_is_initialized() == 0);
  if (H.hcoll_initialize(NULL) != HCOLL_SUCCESS) {
    fprintf(stderr, "initialize: %s\n", H.hcoll_last_error());
    return 1;
  }
  hcoll_comm_t world;
  int rank = -1, size = -1, lrank = -1, lsize = -1;
  CHECK(H.hcoll_comm_world(&world) == HCOLL_SUCCESS);
  CHECK(H.hcoll_comm_rank(world, &rank) == HCOLL_SUCCESS);
  CHECK(H.hcoll_comm_size(world, &size) == HCOLL_SUCCESS);
  CHECK(H.hcoll_comm_local_rank(world, &lrank) == HCOLL_SUCCESS && lrank >= 0);
  CHECK(H.hcoll_comm_local_size(world, &lsize) == HCOLL_SUCCESS && lsize >= 1);
  CHECK(H.hcoll_nccl_built() == 0 || H.hcoll_nccl_built() == 1);
  CHECK((H.hcoll_nccl_version() == 0) == (H.hcoll_nccl_built() == 0));

  /* Grouped allreduce of two tensors: sums of rank + 1 and of 10 * rank. */
  double a[3], b[2];
  for (int i = 0; i < 3; ++i) a[i] = rank + 1;
  for (int i = 0; i < 2; ++i) b[i] = 10.0 * rank;
  int64_t sa[1] = {3}, sb[1] = {2};
  hcoll_tensor_t ts[2] = {{a, HCOLL_FLOAT64, 1, sa, HCOLL_DEVICE_HOST, NULL},
                          {b, HCOLL_FLOAT64, 1, sb, HCOLL_DEVICE_HOST, NULL}};
  hcoll_request_t req;
  CHECK(H.hcoll_grouped_allreduce(world, "plugin.g", 2, ts, ts, HCOLL_SUM, 1.0, 1.0, &req) ==
        HCOLL_SUCCESS);
  CHECK(finish(req) == HCOLL_SUCCESS && H.hcoll_test(req) == HCOLL_SUCCESS);
  CHECK(a[2] == size * (size + 1) / 2.0 && b[1] == 10.0 * size * (size - 1) / 2.0);
  CHECK(H.hcoll_request_free(req) == HCOLL_SUCCESS);

  /* Allgather on a split communicator (everyone, reversed), then read the output. */
  hcoll_comm_t rev;
  CHECK(H.hcoll_comm_split(world, 0, -rank, &rev) == HCOLL_SUCCESS);
  int32_t mine = rank;
  int64_t one[1] = {1};
  hcoll_tensor_t tm = {&mine, HCOLL_INT32, 1, one, HCOLL_DEVICE_HOST, NULL};
  CHECK(H.hcoll_allgather(rev, NULL, &tm, &req) == HCOLL_SUCCESS);
  CHECK(finish(req) == HCOLL_SUCCESS);
  hcoll_tensor_t out;
  CHECK(H.hcoll_request_output(req, 0, &out) == HCOLL_SUCCESS && out.shape[0] == size);
  CHECK(((const int32_t*)out.data)[0] == size - 1); /* new rank 0 is the last world rank */
  H.hcoll_request_free(req);
  /* The same into the caller's own buffer (*_into): no runtime-owned output. */
  int32_t gathered[64] = {0};
  int64_t nrows[1] = {size};
  hcoll_tensor_t tg = {gathered, HCOLL_INT32, 1, nrows, HCOLL_DEVICE_HOST, NULL};
  CHECK(size <= 64 && H.hcoll_allgather_into(rev, NULL, &tm, &tg, NULL, &req) == HCOLL_SUCCESS);
  CHECK(finish(req) == HCOLL_SUCCESS && gathered[0] == size - 1 && gathered[size - 1] == 0);
  H.hcoll_request_free(req);
  hcoll_comm_stats_t st = {HCOLL_COMM_STATS_FIELD_ALL, 0, 0, 0, 0, 0, 0, 0};
  CHECK(H.hcoll_comm_stats(rev, &st) == HCOLL_SUCCESS && st.cycles > 0);
  CHECK(H.hcoll_comm_destroy(rev) == HCOLL_SUCCESS);

  /* Broadcast, alltoall, reducescatter on a created communicator of every rank. */
  int ranks[64];
  for (int i = 0; i < size && i < 64; ++i) ranks[i] = i;
  hcoll_comm_t all;
  CHECK(H.hcoll_comm_create(world, ranks, size, &all) == HCOLL_SUCCESS);
  float v[4] = {(float)rank, (float)rank, (float)rank, (float)rank};
  int64_t s4[1] = {4};
  hcoll_tensor_t tv = {v, HCOLL_FLOAT32, 1, s4, HCOLL_DEVICE_HOST, NULL};
  CHECK(H.hcoll_grouped_broadcast(all, "plugin.bc", 1, &tv, size - 1, &req) == HCOLL_SUCCESS);
  CHECK(finish(req) == HCOLL_SUCCESS && v[3] == (float)(size - 1));
  H.hcoll_request_free(req);
  int64_t rows[1] = {size};
  int64_t x[64];
  for (int i = 0; i < size; ++i) x[i] = 100 * rank + i;
  hcoll_tensor_t tx = {x, HCOLL_INT64, 1, rows, HCOLL_DEVICE_HOST, NULL};
  CHECK(H.hcoll_alltoall(all, "plugin.a2a", &tx, NULL, &req) == HCOLL_SUCCESS);
  CHECK(finish(req) == HCOLL_SUCCESS);
  const int64_t* splits;
  int nsplits;
  CHECK(H.hcoll_request_received_splits(req, 0, &splits, &nsplits) == HCOLL_SUCCESS &&
        nsplits == size && splits[0] == 1);
  CHECK(H.hcoll_request_output(req, 0, &out) == HCOLL_SUCCESS &&
        ((const int64_t*)out.data)[size - 1] == 100 * (size - 1) + rank);
  H.hcoll_request_free(req);
  CHECK(H.hcoll_reducescatter(all, "plugin.rs", &tx, HCOLL_MAX, 1.0, 1.0, &req) == HCOLL_SUCCESS);
  CHECK(finish(req) == HCOLL_SUCCESS);
  CHECK(H.hcoll_request_output(req, 0, &out) == HCOLL_SUCCESS &&
        ((const int64_t*)out.data)[0] == 100 * (size - 1) + rank);
  H.hcoll_request_free(req);
  CHECK(H.hcoll_grouped_reducescatter(all, NULL, 1, &tx, HCOLL_SUM, 1.0, 1.0, &req) ==
        HCOLL_SUCCESS);
  CHECK(finish(req) == HCOLL_SUCCESS);
  H.hcoll_request_free(req);
  CHECK(H.hcoll_grouped_allgather(all, NULL, 1, &tm, &req) == HCOLL_SUCCESS);
  CHECK(finish(req) == HCOLL_SUCCESS);
  H.hcoll_request_free(req);
  CHECK(H.hcoll_broadcast(all, NULL, &tv, 0, &req) == HCOLL_SUCCESS);
  CHECK(finish(req) == HCOLL_SUCCESS && v[0] == (float)(size - 1));
  H.hcoll_request_free(req);
  CHECK(H.hcoll_comm_destroy(all) == HCOLL_SUCCESS);

  /* An error through the pointers: sets a message, returns a negative status. */
  CHECK(H.hcoll_broadcast(world, NULL, &tv, size, &req) == HCOLL_ERR_INVALID_ARGUMENT);
  CHECK(H.hcoll_last_error()[0] != '\0');
  CHECK(H.hcoll_comm_from_mpi(0, NULL) == HCOLL_ERR_INVALID_ARGUMENT); /* no MPI header here */
  CHECK(H.hcoll_request_error(HCOLL_REQUEST_NULL) == NULL);

  /* Barrier, then join: output 0 is the last rank to join, the same everywhere. */
  CHECK(H.hcoll_barrier(world, &req) == HCOLL_SUCCESS && finish(req) == HCOLL_SUCCESS);
  H.hcoll_request_free(req);
  CHECK(H.hcoll_join(world, &req) == HCOLL_SUCCESS && finish(req) == HCOLL_SUCCESS);
  CHECK(H.hcoll_request_output(req, 0, &out) == HCOLL_SUCCESS && out.ndim == 0);
  int last = *(const int32_t*)out.data;
  CHECK(last >= 0 && last < size);
  H.hcoll_request_free(req);

  CHECK(H.hcoll_shutdown() == HCOLL_SUCCESS && H.hcoll_is_initialized() == 0);
  printf("rank %d of %d: plugin resolved every function, %s\n", rank, size,
         failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
