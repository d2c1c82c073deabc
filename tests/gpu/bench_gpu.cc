// GPU allreduce benchmark, nccl-tests style: float32 SUM out of place, 4 KiB .. --max-bytes
// (256 MiB), through hcoll's NCCL backend and, as the baseline, raw NCCL on the same buffers,
// stream and device in the same run. Each rank uses GPU (local rank); with fewer GPUs than
// ranks on a node it prints SKIPPED and exits 0 (NCCL refuses two ranks on one GPU).
//   hcoll-bench-gpu [--max-bytes N] [--iters N] [--json FILE]
// hcoll's time is per operation, submitted and waited for (its completion is device
// completion); NCCL's is nccl-tests' (iterations enqueued back to back, timed with events).
// #wrong counts elements that differ from the exact sum (small integers).

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "hcoll/hcoll.h"

namespace {

struct Options {
  size_t maxBytes = size_t{256} << 20;
  int iters = 20;
  std::string json;
};

struct Result {
  double timeUs = 0;
  long wrong = 0;
  bool failed = false;
};

struct Row {
  size_t bytes;
  Result hcoll, nccl;
};

#define CHECK_CUDA(expr)                                                                          \
  do {                                                                                            \
    cudaError_t e_ = (expr);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                               \
    }                                                                                             \
  } while (0)

#define CHECK_NCCL(expr)                                                                          \
  do {                                                                                            \
    ncclResult_t r_ = (expr);                                                                     \
    if (r_ != ncclSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, ncclGetErrorString(r_)); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                               \
    }                                                                                             \
  } while (0)

float inputValue(size_t i, int rank) {
  return static_cast<float>(i % 13 + rank);
}

// Elements of `out` (count floats) that are not the exact sum over `size` ranks.
long countWrong(const void* out, size_t count, int size) {
  std::vector<float> host(count);
  CHECK_CUDA(cudaMemcpy(host.data(), out, count * 4, cudaMemcpyDeviceToHost));
  const float rankSum = static_cast<float>(size * (size - 1) / 2);
  long wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    if (host[i] != static_cast<float>(i % 13) * size + rankSum) ++wrong;
  }
  return wrong;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--max-bytes" && i + 1 < argc) {
      o.maxBytes = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--iters" && i + 1 < argc) {
      o.iters = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--json" && i + 1 < argc) {
      o.json = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--max-bytes N] [--iters N] [--json FILE]\n", argv[0]);
      std::exit(2);
    }
  }
  return o;
}

void writeJson(const std::string& path, int size, int devices, const std::vector<Row>& rows) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    return;
  }
  std::fprintf(f, "{\n \"ranks\": %d,\n \"devices\": %d,\n \"records\": [", size, devices);
  const double busFactor = 2.0 * (size - 1) / size;
  for (size_t k = 0; k < rows.size(); ++k) {
    const Row& r = rows[k];
    const double ha = r.bytes / r.hcoll.timeUs / 1e3, na = r.bytes / r.nccl.timeUs / 1e3;
    std::fprintf(f,
                 "%s\n  {\"name\": \"allreduce\", \"section\": \"gpu\", \"type\": \"float\", "
                 "\"redop\": \"sum\", \"size\": %zu, \"count\": %zu, "
                 "\"hcoll_time_us\": %.3f, \"hcoll_algbw\": %.4f, \"hcoll_busbw\": %.4f, "
                 "\"nccl_time_us\": %.3f, \"nccl_algbw\": %.4f, \"nccl_busbw\": %.4f, "
                 "\"ratio\": %.4f, \"wrong\": %ld}",
                 k == 0 ? "" : ",", r.bytes, r.bytes / 4, r.hcoll.timeUs, ha, ha * busFactor,
                 r.nccl.timeUs, na, na * busFactor, r.hcoll.timeUs / r.nccl.timeUs,
                 r.hcoll.wrong + r.nccl.wrong);
  }
  std::fprintf(f, "\n ]\n}\n");
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  if (hcoll_initialize(nullptr) != HCOLL_SUCCESS) {
    std::fprintf(stderr, "hcoll_initialize: %s\n", hcoll_last_error());
    return 1;
  }
  hcoll_comm_t world;
  hcoll_comm_world(&world);
  int rank = 0, size = 1, localRank = 0, localSize = 1;
  hcoll_comm_rank(world, &rank);
  hcoll_comm_size(world, &size);
  hcoll_comm_local_rank(world, &localRank);
  hcoll_comm_local_size(world, &localSize);
  int ok = devices >= localSize ? 1 : 0, allOk = 0;
  MPI_Allreduce(&ok, &allOk, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!allOk) {
    if (rank == 0 && devices == 0) std::printf("SKIPPED: no CUDA device\n");
    if (rank == 0 && devices > 0) {
      std::printf(
          "SKIPPED: %d ranks on a node but %d visible GPU(s); NCCL needs one GPU per rank\n",
          localSize, devices);
    }
    hcoll_shutdown();
    return 0;
  }
  const int device = localRank;
  CHECK_CUDA(cudaSetDevice(device));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ncclUniqueId id;
  if (rank == 0) CHECK_NCCL(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitRank(&comm, size, id, rank));

  const size_t maxCount = opt.maxBytes / 4;
  void *in = nullptr, *out = nullptr;
  CHECK_CUDA(cudaMalloc(&in, maxCount * 4));
  CHECK_CUDA(cudaMalloc(&out, maxCount * 4));
  {
    std::vector<float> host(maxCount);
    for (size_t i = 0; i < maxCount; ++i) host[i] = inputValue(i, rank);
    CHECK_CUDA(cudaMemcpy(in, host.data(), maxCount * 4, cudaMemcpyHostToDevice));
  }
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  if (rank == 0) {
    char name[256] = "?";
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) == cudaSuccess)
      std::snprintf(name, sizeof name, "%s", prop.name);
    int nv = 0;
    ncclGetVersion(&nv);
    std::printf(
        "# hcoll allreduce on CUDA tensors vs raw NCCL %d, same buffers: %d rank(s), %d GPU(s) "
        "visible, rank 0 on %s\n",
        nv, size, devices, name);
    std::printf("# out of place, float32 sum; time per operation; busbw = algbw * 2(n-1)/n\n");
    std::printf("# %10s %12s %6s %6s | %10s %9s %9s %7s | %10s %9s %9s %7s | %6s\n", "", "", "", "",
                "hcoll", "", "", "", "nccl", "", "", "", "");
    std::printf("# %10s %12s %6s %6s | %10s %9s %9s %7s | %10s %9s %9s %7s | %6s\n", "size",
                "count", "type", "redop", "time(us)", "algbw", "busbw", "#wrong", "time(us)",
                "algbw", "busbw", "#wrong", "ratio");
  }
  std::vector<Row> rows;
  int failures = 0;
  for (size_t bytes = 4096; bytes <= opt.maxBytes; bytes *= 4) {
    const size_t count = bytes / 4;
    const int iters = bytes >= (size_t{64} << 20) ? std::max(2, opt.iters / 4) : opt.iters;
    Row row{bytes, {}, {}};

    // Raw NCCL: two warm-up iterations, then `iters` back to back.
    CHECK_CUDA(cudaMemsetAsync(out, 0, bytes, stream));
    for (int w = 0; w < 2; ++w)
      CHECK_NCCL(ncclAllReduce(in, out, count, ncclFloat32, ncclSum, comm, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_CUDA(cudaEventRecord(start, stream));
    for (int it = 0; it < iters; ++it) {
      CHECK_NCCL(ncclAllReduce(in, out, count, ncclFloat32, ncclSum, comm, stream));
    }
    CHECK_CUDA(cudaEventRecord(stop, stream));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    row.nccl.timeUs = ms * 1e3 / iters;
    row.nccl.wrong = countWrong(out, count, size);

    // hcoll: the same buffers and stream; every operation waited for.
    CHECK_CUDA(cudaMemsetAsync(out, 0, bytes, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    int64_t shape[1] = {static_cast<int64_t>(count)};
    hcoll_tensor_t ti{in, HCOLL_FLOAT32, 1, shape, device, stream};
    hcoll_tensor_t to{out, HCOLL_FLOAT32, 1, shape, device, stream};
    double seconds = 0;
    for (int it = -2; it < iters && !row.hcoll.failed; ++it) {  // two warm-up iterations
      if (it == 0) MPI_Barrier(MPI_COMM_WORLD);
      const auto t0 = std::chrono::steady_clock::now();
      hcoll_request_t req;
      if (hcoll_allreduce(world, nullptr, &ti, &to, HCOLL_SUM, 1.0, 1.0, &req) != HCOLL_SUCCESS ||
          hcoll_wait(req, 60.0) != HCOLL_SUCCESS) {
        std::fprintf(stderr, "rank %d: hcoll allreduce of %zu bytes: %s\n", rank, bytes,
                     hcoll_last_error());
        row.hcoll.failed = true;
        ++failures;
        break;
      }
      hcoll_request_free(req);
      if (it >= 0)
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    row.hcoll.timeUs = seconds / iters * 1e6;
    row.hcoll.wrong = row.hcoll.failed ? static_cast<long>(count) : countWrong(out, count, size);
    // Rank 0 prints the slowest rank's times and every rank's wrong elements.
    double times[2] = {row.hcoll.timeUs, row.nccl.timeUs};
    long wrong[2] = {row.hcoll.wrong, row.nccl.wrong};
    MPI_Allreduce(MPI_IN_PLACE, times, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, wrong, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    row.hcoll.timeUs = times[0];
    row.nccl.timeUs = times[1];
    row.hcoll.wrong = wrong[0];
    row.nccl.wrong = wrong[1];
    if (wrong[0] + wrong[1] != 0) ++failures;
    rows.push_back(row);
    if (rank == 0) {
      const double f = 2.0 * (size - 1) / size;
      const double ha = bytes / times[0] / 1e3, na = bytes / times[1] / 1e3;  // GB/s
      std::printf(
          "  %10zu %12zu %6s %6s | %10.1f %9.2f %9.2f %7ld | %10.1f %9.2f %9.2f %7ld | %6.2f\n",
          bytes, count, "float", "sum", times[0], ha, ha * f, wrong[0], times[1], na, na * f,
          wrong[1], times[0] / times[1]);
      std::fflush(stdout);
    }
  }
  if (rank == 0 && !opt.json.empty()) writeJson(opt.json, size, devices, rows);
  if (rank == 0) std::printf("# %s\n", failures == 0 ? "all results correct" : "FAILED");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(in);
  cudaFree(out);
  ncclCommDestroy(comm);
  cudaStreamDestroy(stream);
  hcoll_shutdown();
  return failures == 0 ? 0 : 1;
}
