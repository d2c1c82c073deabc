/* A stand-in for NVIDIA/Mellanox HCOLL (libhcoll.so.1): the two names most likely to meet ours,
 * with NVIDIA's shapes (hcoll/api/hcoll_api.h). Open MPI's coll/hcoll calls hcoll_get_version()
 * through the PLT; standin_open_mpi_probe() does the same from inside this object, so if
 * libhcoll.so.0 ever exported that name again (loaded first, RTLD_GLOBAL) the call would land in
 * ours. Built as tests/packaging/nvidia_standin/libhcoll.so.1. */
#include <stddef.h>

#define STANDIN_VERSION "nvidia-standin-4.8"

__attribute__((visibility("default"))) const char* hcoll_get_version(void) {
  return STANDIN_VERSION;
}

/* NVIDIA: int hcoll_init(void). Returns a value no hcoll_status_t has. */
__attribute__((visibility("default"))) int hcoll_init(void) {
  return 4242;
}

/* What Open MPI does: call hcoll_get_version() by name, resolved by the dynamic linker. */
__attribute__((visibility("default"))) const char* standin_open_mpi_probe(void) {
  const char* (*volatile fn)(void) = hcoll_get_version; /* taken by address: through the GOT */
  return fn();
}
