/* Loads NVIDIA-shaped libhcoll.so.1 (a stand-in) and our libhcoll.so.0 into one process, both
 * RTLD_GLOBAL, in the order given; checks that each library's functions return their own results
 * whoever comes first, then runs an allreduce through ours. Under mpiexec.mpich -n 2.
 * Usage: hcoll-test-clash LIBHCOLL_SO_0 STANDIN_SO_1 hcoll-first|standin-first */
#include <dlfcn.h>
#include <hcoll/hcoll.h>
#include <stdio.h>
#include <string.h>

#include "dl_check.h"

static void* open_global(const char* path) {
  void* h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (h == NULL) fprintf(stderr, "dlopen(%s): %s\n", path, dlerror());
  return h;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s LIBHCOLL STANDIN hcoll-first|standin-first\n", argv[0]);
    return 2;
  }
  int hcoll_first = strcmp(argv[3], "hcoll-first") == 0;
  void* ours = NULL;
  void* theirs = NULL;
  if (hcoll_first) {
    ours = open_global(argv[1]);
    theirs = open_global(argv[2]);
  } else {
    theirs = open_global(argv[2]);
    ours = open_global(argv[1]);
  }
  if (ours == NULL || theirs == NULL) return 1;

  /* Theirs: the process-wide names resolve to the stand-in, and return its results. */
  typedef const char* (*version_fn)(void);
  typedef int (*init_fn)(void);
  version_fn their_version = (version_fn)dlsym(RTLD_DEFAULT, "hcoll_get_version");
  init_fn their_init = (init_fn)dlsym(RTLD_DEFAULT, "hcoll_init");
  version_fn probe = (version_fn)dlsym(theirs, "standin_open_mpi_probe");
  CHECK(their_version != NULL && their_version == (version_fn)dlsym(theirs, "hcoll_get_version"));
  CHECK(their_init != NULL && their_init == (init_fn)dlsym(theirs, "hcoll_init"));
  CHECK(their_version != NULL && strcmp(their_version(), "nvidia-standin-4.8") == 0);
  CHECK(their_init != NULL && their_init() == 4242);
  CHECK(probe != NULL && strcmp(probe(), "nvidia-standin-4.8") == 0);
  /* Ours defines neither name (dlsym on a handle searches that library and its dependencies). */
  CHECK(dlsym(ours, "hcoll_get_version") == NULL);
  CHECK(dlsym(ours, "hcoll_init") == NULL);

  /* Ours: the API works, and returns our results. */
  int major = -1, minor = -1, patch = -1;
  CHECK(SYM(ours, hcoll_version)(&major, &minor, &patch) == HCOLL_SUCCESS);
  CHECK(major == HCOLL_VERSION_MAJOR && minor == HCOLL_VERSION_MINOR &&
        patch == HCOLL_VERSION_PATCH);
  CHECK(strcmp(SYM(ours, hcoll_version_string)(), HCOLL_VERSION_STRING) == 0);
  if (SYM(ours, hcoll_initialize)(NULL) != HCOLL_SUCCESS) {
    fprintf(stderr, "hcoll_initialize: %s\n", SYM(ours, hcoll_last_error)());
    return 1;
  }
  hcoll_comm_t world;
  int rank = -1, size = -1;
  CHECK(SYM(ours, hcoll_comm_world)(&world) == HCOLL_SUCCESS);
  CHECK(SYM(ours, hcoll_comm_rank)(world, &rank) == HCOLL_SUCCESS);
  CHECK(SYM(ours, hcoll_comm_size)(world, &size) == HCOLL_SUCCESS);
  int64_t x[4];
  for (int i = 0; i < 4; ++i) x[i] = rank + i;
  int64_t shape[1] = {4};
  hcoll_tensor_t t = {x, HCOLL_INT64, 1, shape, HCOLL_DEVICE_HOST, NULL};
  hcoll_request_t req;
  CHECK(SYM(ours, hcoll_allreduce)(world, "clash", &t, &t, HCOLL_SUM, 1.0, 1.0, &req) ==
        HCOLL_SUCCESS);
  CHECK(SYM(ours, hcoll_wait)(req, 60.0) == HCOLL_SUCCESS);
  for (int i = 0; i < 4; ++i) CHECK(x[i] == (int64_t)size * (size - 1) / 2 + (int64_t)size * i);
  SYM(ours, hcoll_request_free)(req);
  /* Theirs still answers after ours initialized MPI and started its threads. */
  CHECK(strcmp(probe(), "nvidia-standin-4.8") == 0 && their_init() == 4242);
  CHECK(SYM(ours, hcoll_shutdown)() == HCOLL_SUCCESS);
  printf("rank %d of %d (%s): %s\n", rank, size, argv[3], failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
