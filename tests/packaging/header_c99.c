/* The public header compiles on its own as strict C99 (-Wall -Wextra -pedantic -Werror) and
 * does not drag in mpi.h or CUDA: a consumer needs nothing but hcoll's include directory. */
#include <hcoll/hcoll.h>

#if defined(MPI_VERSION) || defined(__CUDA_RUNTIME_H__) || defined(NCCL_H_)
#error "hcoll.h must not include mpi.h, CUDA or NCCL headers"
#endif

/* ABI values are fixed: a change here is an ABI break. */
typedef char check_success[HCOLL_SUCCESS == 0 ? 1 : -1];
typedef char check_internal[HCOLL_ERR_INTERNAL == -12 ? 1 : -1];
typedef char check_bool[HCOLL_BOOL == 10 ? 1 : -1];
typedef char check_product[HCOLL_PRODUCT == 4 ? 1 : -1];
typedef char check_adasum[HCOLL_ADASUM == 5 ? 1 : -1];
typedef char check_undefined[HCOLL_UNDEFINED == -32766 ? 1 : -1];

int main(void) {
  hcoll_tensor_t t = {NULL, HCOLL_FLOAT32, 0, NULL, HCOLL_DEVICE_HOST, NULL};
  hcoll_init_params_t p = {HCOLL_INIT_FIELD_MPI_COMM, 0, NULL, NULL, NULL, NULL, 0};
  hcoll_comm_stats_t s = {HCOLL_COMM_STATS_FIELD_ALL, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  hcoll_status_t (*fn)(const hcoll_init_params_t*) = hcoll_initialize;
  (void)t;
  (void)p;
  (void)s;
  (void)fn;
  return HCOLL_COMM_NULL == HCOLL_COMM_NULL ? 0 : 1;
}
