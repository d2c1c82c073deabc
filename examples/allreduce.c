/* A minimal hcoll program: every rank contributes its rank + 1; the sum is N (N + 1) / 2.
 * Run: mpiexec.mpich -n 2 ./hcoll-example-allreduce */
#include <hcoll/hcoll.h>
#include <stdio.h>

int main(void) {
  if (hcoll_initialize(NULL) != HCOLL_SUCCESS) {
    fprintf(stderr, "init failed: %s\n", hcoll_last_error());
    return 1;
  }
  hcoll_comm_t world;
  int rank, size;
  hcoll_comm_world(&world);
  hcoll_comm_rank(world, &rank);
  hcoll_comm_size(world, &size);

  float data[4];
  for (int i = 0; i < 4; ++i) data[i] = (float)(rank + 1);
  int64_t shape[1] = {4};
  hcoll_tensor_t t = {data, HCOLL_FLOAT32, 1, shape, HCOLL_DEVICE_HOST, NULL};
  hcoll_request_t req;
  hcoll_status_t s = hcoll_allreduce(world, "example", &t, &t, HCOLL_SUM, 1.0, 1.0, &req);
  if (s == HCOLL_SUCCESS) s = hcoll_wait(req, -1);
  if (s != HCOLL_SUCCESS) {
    fprintf(stderr, "allreduce failed: %s\n", hcoll_last_error());
    return 1;
  }
  hcoll_request_free(req);
  int ok = data[0] == (float)(size * (size + 1) / 2);
  printf("rank %d of %d: sum = %g (%s)\n", rank, size, data[0], ok ? "ok" : "WRONG");
  hcoll_shutdown();
  return ok ? 0 : 1;
}
