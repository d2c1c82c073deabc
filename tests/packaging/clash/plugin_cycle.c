/* A framework plugin's life, twice in one process: dlopen -> initialize -> allreduce -> shutdown
 * -> dlclose -> dlopen -> initialize -> allreduce -> shutdown. Before libhcoll was linked with
 * -z nodelete, dlclose unloaded it (and libmpich with it) while an exit handler of the first load
 * still pointed into that code: the second cycle or the process exit crashed. Now the library
 * must stay resident (RTLD_NOLOAD still finds it) and the second cycle must work.
 * Run: mpiexec.mpich -n 2 hcoll-test-plugin-cycle path/to/libhcoll.so.0 */
#include <dlfcn.h>
#include <hcoll/hcoll.h>
#include <stdio.h>

#include "dl_check.h"

/* One cycle on an open handle: initialize, allreduce, shutdown. */
static int cycle(void* lib, int round) {
  if (SYM(lib, hcoll_is_initialized)() != 0) {
    fprintf(stderr, "round %d: already initialized\n", round);
    return 0;
  }
  if (SYM(lib, hcoll_initialize)(NULL) != HCOLL_SUCCESS) {
    fprintf(stderr, "round %d: hcoll_initialize: %s\n", round, SYM(lib, hcoll_last_error)());
    return 0;
  }
  hcoll_comm_t world;
  int rank = -1, size = -1;
  CHECK(SYM(lib, hcoll_comm_world)(&world) == HCOLL_SUCCESS);
  CHECK(SYM(lib, hcoll_comm_rank)(world, &rank) == HCOLL_SUCCESS);
  CHECK(SYM(lib, hcoll_comm_size)(world, &size) == HCOLL_SUCCESS);
  double x[3] = {rank + 1.0, round, 1.0};
  int64_t shape[1] = {3};
  hcoll_tensor_t t = {x, HCOLL_FLOAT64, 1, shape, HCOLL_DEVICE_HOST, NULL};
  hcoll_request_t req;
  CHECK(SYM(lib, hcoll_allreduce)(world, "cycle", &t, &t, HCOLL_SUM, 1.0, 1.0, &req) ==
        HCOLL_SUCCESS);
  CHECK(SYM(lib, hcoll_wait)(req, 60.0) == HCOLL_SUCCESS);
  CHECK(x[0] == size * (size + 1) / 2.0 && x[1] == (double)round * size && x[2] == size);
  SYM(lib, hcoll_request_free)(req);
  CHECK(SYM(lib, hcoll_shutdown)() == HCOLL_SUCCESS);
  printf("rank %d of %d: round %d done\n", rank, size, round);
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s LIBHCOLL\n", argv[0]);
    return 2;
  }
  for (int round = 1; round <= 2; ++round) {
    void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
      fprintf(stderr, "round %d: dlopen: %s\n", round, dlerror());
      return 1;
    }
    if (!cycle(lib, round)) return 1;
    CHECK(dlclose(lib) == 0);
    /* -z nodelete: still mapped after the last dlclose. */
    void* again = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
    CHECK(again != NULL);
    if (again != NULL) dlclose(again);
  }
  printf("plugin cycle: %s\n", failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
