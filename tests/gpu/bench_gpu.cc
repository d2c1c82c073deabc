// A small GPU allreduce benchmark through hcoll's NCCL backend (nccl-tests style table):
// float32 SUM, sizes 4 KiB .. 256 MiB, every rank on device (rank % devices).

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "hcoll/hcoll.h"

int main(int argc, char** argv) {
  (void)argc;
  (void)argv;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 0;
  }
  if (hcoll_initialize(nullptr) != HCOLL_SUCCESS) {
    std::fprintf(stderr, "hcoll_initialize: %s\n", hcoll_last_error());
    return 1;
  }
  hcoll_comm_t world;
  hcoll_comm_world(&world);
  int rank = 0, size = 1;
  hcoll_comm_rank(world, &rank);
  hcoll_comm_size(world, &size);
  const int device = rank % devices;
  cudaSetDevice(device);
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  const size_t maxBytes = size_t{256} << 20;
  void* buf = nullptr;
  if (cudaMalloc(&buf, maxBytes) != cudaSuccess) return 1;
  cudaMemset(buf, 0, maxBytes);
  if (rank == 0) {
    std::printf("# hcoll NCCL allreduce, %d ranks on %d device(s)\n", size, devices);
    std::printf("%12s %12s %6s %6s %10s %10s %10s\n", "size", "count", "type", "redop", "time(us)",
                "algbw", "busbw");
  }
  int failures = 0;
  for (size_t bytes = 4096; bytes <= maxBytes; bytes *= 4) {
    int64_t shape[1] = {static_cast<int64_t>(bytes / 4)};
    hcoll_tensor_t t{buf, HCOLL_FLOAT32, 1, shape, device, stream};
    const int iters = bytes >= (size_t{64} << 20) ? 5 : 20;
    double seconds = 0;
    for (int it = -2; it < iters; ++it) {  // two warm-up iterations
      MPI_Barrier(MPI_COMM_WORLD);
      auto start = std::chrono::steady_clock::now();
      hcoll_request_t req;
      if (hcoll_allreduce(world, nullptr, &t, &t, HCOLL_SUM, 1.0, 1.0, &req) != HCOLL_SUCCESS ||
          hcoll_wait(req, 60.0) != HCOLL_SUCCESS) {
        std::fprintf(stderr, "rank %d: allreduce of %zu bytes: %s\n", rank, bytes, hcoll_last_error());
        ++failures;
        break;
      }
      hcoll_request_free(req);
      if (it >= 0) seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    const double t_us = seconds / iters * 1e6;
    const double algbw = bytes / (seconds / iters) / 1e9;
    if (rank == 0) {
      std::printf("%12zu %12zu %6s %6s %10.1f %10.2f %10.2f\n", bytes, bytes / 4, "float", "sum", t_us,
                  algbw, algbw * 2.0 * (size - 1) / size);
    }
  }
  cudaFree(buf);
  cudaStreamDestroy(stream);
  hcoll_shutdown();
  return failures == 0 ? 0 : 1;
}
