// GPU collective benchmark, nccl-tests style: float32 allreduce (sum), allgather, broadcast (root
// 0) and reducescatter (sum), out of place for NCCL, 4 KiB .. --max-bytes (default 1 GiB),
// through hcoll's NCCL backend and, as the baseline, raw NCCL on the same buffers, stream and
// device in the same run. Each rank uses GPU (local rank); with fewer GPUs than ranks on a node it
// prints SKIPPED and exits 0 (NCCL refuses two ranks on one GPU).
//   hcoll-bench-gpu [--max-bytes N] [--iters N] [--ops allreduce,allgather,...] [--json FILE]
// "size" is nccl-tests' (allreduce/broadcast: the buffer; allgather: the gathered output;
// reducescatter: the input), algbw = size / time and busbw = algbw * (n-1)/n, times 2 for
// allreduce, times 1 for broadcast. Both times are per operation, each waited for on the host:
// hcoll's submitted (named, into caller-provided outputs) and hcoll_wait'ed (its completion is
// device completion), NCCL's enqueued and cudaStreamSynchronize'd. (nccl-tests' own figure,
// iterations back to back timed with events, hides the launch latency a request API pays.)
// #wrong counts elements that differ from the exact result (small integers).

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

enum class Op { kAllreduce, kAllgather, kBroadcast, kReducescatter };
const char* const kOpNames[] = {"allreduce", "allgather", "broadcast", "reducescatter"};

struct Options {
  size_t maxBytes = size_t{1} << 30;
  int iters = 20;
  std::vector<Op> ops{Op::kAllreduce, Op::kAllgather, Op::kBroadcast, Op::kReducescatter};
  std::string json;
};

struct Result {
  double timeUs = 0;
  long wrong = 0;
  bool failed = false;
};

struct Row {
  Op op;
  size_t bytes;
  Result hcoll, nccl;
};

// nccl-tests' bus bandwidth factor.
double busFactor(Op op, int n) {
  switch (op) {
    case Op::kAllreduce:
      return 2.0 * (n - 1) / n;
    case Op::kBroadcast:
      return 1.0;
    default:
      return static_cast<double>(n - 1) / n;
  }
}

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

// The exact result of `op` at element i of this rank's output: inputs are inputValue(j, r).
float expected(Op op, size_t i, int rank, int size, size_t outCount) {
  const float rankSum = static_cast<float>(size * (size - 1) / 2);
  switch (op) {
    case Op::kAllreduce:
      return static_cast<float>(i % 13) * size + rankSum;
    case Op::kAllgather:
      return inputValue(i % (outCount / size), static_cast<int>(i / (outCount / size)));
    case Op::kBroadcast:
      return inputValue(i, 0);
    case Op::kReducescatter:
      return static_cast<float>((rank * outCount + i) % 13) * size + rankSum;
  }
  return 0;
}

// Elements of `out` (count floats, on the device) that are not the exact result.
long countWrong(Op op, const void* out, size_t count, int rank, int size) {
  std::vector<float> host(count);
  CHECK_CUDA(cudaMemcpy(host.data(), out, count * 4, cudaMemcpyDefault));
  long wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    if (host[i] != expected(op, i, rank, size, count)) ++wrong;
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
    } else if (a == "--ops" && i + 1 < argc) {
      o.ops.clear();
      std::string list = argv[++i];
      for (size_t start = 0; start <= list.size();) {
        const size_t end = std::min(list.find(',', start), list.size());
        const std::string name = list.substr(start, end - start);
        bool known = false;
        for (int k = 0; k < 4; ++k) {
          if (name == kOpNames[k]) {
            o.ops.push_back(static_cast<Op>(k));
            known = true;
          }
        }
        if (!known) {
          std::fprintf(stderr, "unknown op '%s'\n", name.c_str());
          std::exit(2);
        }
        start = end + 1;
      }
    } else {
      std::fprintf(stderr,
                   "usage: %s [--max-bytes N] [--iters N] [--ops allreduce,allgather,broadcast,"
                   "reducescatter] [--json FILE]\n",
                   argv[0]);
      std::exit(2);
    }
  }
  return o;
}

// Records in bench/plot.py's "sweep" section: one line per implementation (hcoll, nccl).
void writeJson(const std::string& path, int size, int devices, const std::string& gpu,
               int ncclVersion, const std::vector<Row>& rows) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    return;
  }
  std::fprintf(f,
               "{\n \"bench\": \"hcoll-bench-gpu\",\n \"ranks\": %d,\n \"devices\": %d,\n"
               " \"gpu\": \"%s\",\n \"nccl_version\": %d,\n \"records\": [",
               size, devices, gpu.c_str(), ncclVersion);
  for (size_t k = 0; k < rows.size(); ++k) {
    const Row& r = rows[k];
    const double bf = busFactor(r.op, size);
    const double ha = r.bytes / r.hcoll.timeUs / 1e3, na = r.bytes / r.nccl.timeUs / 1e3;
    std::fprintf(f,
                 "%s\n  {\"name\": \"%s\", \"section\": \"sweep\", \"device\": \"gpu\", "
                 "\"type\": \"float\", \"redop\": \"%s\", \"size\": %zu, \"count\": %zu, "
                 "\"hcoll_time_us\": %.3f, \"hcoll_algbw\": %.4f, \"hcoll_busbw\": %.4f, "
                 "\"nccl_time_us\": %.3f, \"nccl_algbw\": %.4f, \"nccl_busbw\": %.4f, "
                 "\"ratio\": %.4f, \"hcoll_failed\": %s, \"wrong\": %ld}",
                 k == 0 ? "" : ",", kOpNames[static_cast<int>(r.op)],
                 r.op == Op::kAllreduce || r.op == Op::kReducescatter ? "sum" : "none", r.bytes,
                 r.bytes / 4, r.hcoll.timeUs, ha, ha * bf, r.nccl.timeUs, na, na * bf,
                 r.hcoll.timeUs / r.nccl.timeUs, r.hcoll.failed ? "true" : "false",
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
  char gpuName[256] = "?";
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, device) == cudaSuccess)
    std::snprintf(gpuName, sizeof gpuName, "%s", prop.name);
  int ncclVersion = 0;
  ncclGetVersion(&ncclVersion);
  if (rank == 0) {
    std::printf(
        "# hcoll on CUDA tensors vs raw NCCL %d, same buffers: %d rank(s), %d GPU(s) visible, "
        "rank 0 on %s\n",
        ncclVersion, size, devices, gpuName);
    std::printf("# float32; time per operation, each waited for on the host (hcoll_wait / "
                "cudaStreamSynchronize); algbw = size / time, busbw as nccl-tests\n");
  }
  std::vector<Row> rows;
  int failures = 0;
  for (const Op op : opt.ops) {
    const char* opName = kOpNames[static_cast<int>(op)];
    if (rank == 0) {
      std::printf("# %-13s %10s %12s | %10s %9s %9s %7s | %10s %9s %9s %7s | %6s\n", opName, "", "",
                  "hcoll", "", "", "", "nccl", "", "", "", "");
      std::printf("# %-13s %10s %12s | %10s %9s %9s %7s | %10s %9s %9s %7s | %6s\n", "", "size",
                  "count", "time(us)", "algbw", "busbw", "#wrong", "time(us)", "algbw", "busbw",
                  "#wrong", "ratio");
    }
    for (size_t bytes = 4096; bytes <= opt.maxBytes; bytes *= 4) {
      const size_t count = bytes / 4;  // elements of nccl-tests' "size"
      if (count % size != 0) continue;
      const size_t part = count / size;  // one rank's share (allgather input, reducescatter output)
      const size_t outCount = op == Op::kReducescatter ? part : count;
      const int iters = bytes >= (size_t{64} << 20) ? std::max(2, opt.iters / 4) : opt.iters;
      Row row{op, bytes, {}, {}};
      auto ncclOnce = [&]() -> ncclResult_t {
        switch (op) {
          case Op::kAllreduce:
            return ncclAllReduce(in, out, count, ncclFloat32, ncclSum, comm, stream);
          case Op::kAllgather:
            return ncclAllGather(in, out, part, ncclFloat32, comm, stream);
          case Op::kBroadcast:
            return ncclBroadcast(in, out, count, ncclFloat32, 0, comm, stream);
          case Op::kReducescatter:
            return ncclReduceScatter(in, out, part, ncclFloat32, ncclSum, comm, stream);
        }
        return ncclInvalidArgument;
      };

      // Raw NCCL: two warm-up iterations, then `iters` operations, each waited for on the host
      // (cudaStreamSynchronize) as hcoll's are (hcoll_wait): the same per-operation latency.
      // (Back to back without waits NCCL pipelines launches: not what a request API measures.)
      CHECK_CUDA(cudaMemsetAsync(out, 0, bytes, stream));
      for (int w = 0; w < 2; ++w) CHECK_NCCL(ncclOnce());
      CHECK_CUDA(cudaStreamSynchronize(stream));
      MPI_Barrier(MPI_COMM_WORLD);
      double ncclSeconds = 0;
      for (int it = 0; it < iters; ++it) {
        const auto t0 = std::chrono::steady_clock::now();
        CHECK_NCCL(ncclOnce());
        CHECK_CUDA(cudaStreamSynchronize(stream));
        ncclSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
      row.nccl.timeUs = ncclSeconds / iters * 1e6;
      row.nccl.wrong = countWrong(op, out, outCount, rank, size);

      // hcoll: the same buffers and stream; every operation waited for. Broadcast is in place
      // on `out`, which holds root's input on root and zeros elsewhere.
      CHECK_CUDA(cudaMemsetAsync(out, 0, bytes, stream));
      if (op == Op::kBroadcast && rank == 0)
        CHECK_CUDA(cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, stream));
      CHECK_CUDA(cudaStreamSynchronize(stream));
      // Caller-provided outputs (the *_into calls) and named operations: like NCCL's, the
      // buffers are the caller's, and a repeated name is negotiated through the response cache.
      int64_t inShape[1] = {static_cast<int64_t>(op == Op::kAllgather ? part : count)};
      int64_t outShape[1] = {static_cast<int64_t>(outCount)};
      hcoll_tensor_t ti{in, HCOLL_FLOAT32, 1, inShape, device, stream};
      hcoll_tensor_t to{out, HCOLL_FLOAT32, 1, outShape, device, stream};
      const std::string opLabel = std::string("bench.") + opName + "." + std::to_string(bytes);
      const char* name = opLabel.c_str();
      hcoll_request_t last = nullptr;  // the last operation's request: its output is checked
      double seconds = 0;
      for (int it = -2; it < iters && !row.hcoll.failed; ++it) {  // two warm-up iterations
        if (it == 0) MPI_Barrier(MPI_COMM_WORLD);
        const auto t0 = std::chrono::steady_clock::now();
        hcoll_request_t req = nullptr;
        hcoll_status_t st = HCOLL_ERR_INTERNAL;
        switch (op) {
          case Op::kAllreduce:
            st = hcoll_allreduce(world, name, &ti, &to, HCOLL_SUM, 1.0, 1.0, &req);
            break;
          case Op::kAllgather:
            st = hcoll_allgather_into(world, name, &ti, &to, nullptr, &req);
            break;
          case Op::kBroadcast:
            st = hcoll_broadcast(world, name, &to, 0, &req);
            break;
          case Op::kReducescatter:
            st = hcoll_reducescatter_into(world, name, &ti, &to, HCOLL_SUM, 1.0, 1.0, nullptr,
                                          &req);
            break;
        }
        if (st == HCOLL_SUCCESS) st = hcoll_wait(req, 60.0);
        if (st != HCOLL_SUCCESS) {
          std::fprintf(stderr, "rank %d: hcoll %s of %zu bytes: %s (%s)\n", rank, opName, bytes,
                       hcoll_status_string(st),
                       req ? hcoll_request_error(req) : hcoll_last_error());
          if (req) hcoll_request_free(req);
          row.hcoll.failed = true;
          ++failures;
          break;
        }
        if (it >= 0)
          seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (last) hcoll_request_free(last);
        last = req;
      }
      row.hcoll.timeUs = seconds / iters * 1e6;
      if (row.hcoll.failed) {
        row.hcoll.wrong = static_cast<long>(outCount);
      } else if (op == Op::kAllgather || op == Op::kReducescatter) {
        hcoll_tensor_t result{};
        if (hcoll_request_output(last, 0, &result) != HCOLL_SUCCESS || result.ndim != 1 ||
            result.shape[0] != static_cast<int64_t>(outCount)) {
          std::fprintf(stderr, "rank %d: hcoll %s of %zu bytes: no output of %zu elements\n", rank,
                       opName, bytes, outCount);
          row.hcoll.wrong = static_cast<long>(outCount);
        } else {
          row.hcoll.wrong = countWrong(op, result.data, outCount, rank, size);
        }
      } else {
        row.hcoll.wrong = countWrong(op, out, outCount, rank, size);
      }
      if (last) hcoll_request_free(last);
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
        const double f = busFactor(op, size);
        const double ha = bytes / times[0] / 1e3, na = bytes / times[1] / 1e3;  // GB/s
        std::printf(
            "  %-13s %10zu %12zu | %10.1f %9.2f %9.2f %7ld | %10.1f %9.2f %9.2f %7ld | %6.2f\n",
            opName, bytes, count, times[0], ha, ha * f, wrong[0], times[1], na, na * f, wrong[1],
            times[0] / times[1]);
        std::fflush(stdout);
      }
    }
  }
  if (rank == 0 && !opt.json.empty())
    writeJson(opt.json, size, devices, gpuName, ncclVersion, rows);
  if (rank == 0) std::printf("# %s\n", failures == 0 ? "all results correct" : "FAILED");
  cudaFree(in);
  cudaFree(out);
  ncclCommDestroy(comm);
  cudaStreamDestroy(stream);
  hcoll_shutdown();
  return failures == 0 ? 0 : 1;
}
