// mpi-peer: the sweep's raw-MPI baseline alone, for another MPI library than the one hcoll was
// built with (Open MPI: scripts/bench-openmpi.sh builds it with mpicxx.openmpi and runs it under
// mpiexec.openmpi), so that hcoll's ratio to that library is measured on this machine, in the
// same session, rather than quoted. The same sizes, buffers and timing as bench/sweep.cc (blocks
// of calls, the median block, the slowest rank), and (d)'s 8-byte allreduce (median of single
// calls). Writes JSON records like hcoll-bench's: {"section", "name", "size", "time_us"}.
// Usage: mpiexec -n 2 mpi-peer OUT.json [MAX_BYTES]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace {

double maxAcrossRanks(double v) {
  double out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return out;
}

// Seconds per call: blocks of calls as hcoll-bench's timeInterleaved, the median block.
double timeBlocks(const std::function<void()>& body) {
  body();
  body();
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  body();
  const double one = maxAcrossRanks(MPI_Wtime() - t0);
  const int iters = std::clamp(static_cast<int>(0.2 / std::max(one, 1e-7)), 2, 20000);
  int counts[2] = {std::clamp(iters / 2, 1, iters >= 2000 ? 21 : 5), 0};
  counts[1] = std::max(1, iters / counts[0]);
  MPI_Bcast(counts, 2, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<double> blocks;
  for (int r = 0; r < counts[0]; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (int i = 0; i < counts[1]; ++i) body();
    blocks.push_back(maxAcrossRanks((MPI_Wtime() - t0) / counts[1]));
  }
  std::sort(blocks.begin(), blocks.end());
  return blocks[blocks.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc < 2) {
    if (rank == 0) std::fprintf(stderr, "usage: mpi-peer OUT.json [MAX_BYTES]\n");
    MPI_Finalize();
    return 2;
  }
  const size_t maxBytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : size_t{4} << 20;
  std::vector<size_t> sizes;
  for (size_t b = 8; b <= maxBytes; b *= 4) sizes.push_back(b);
  if (maxBytes >= (size_t{4} << 20)) sizes.push_back(size_t{4} << 20);
  std::sort(sizes.begin(), sizes.end());
  std::string json = "{\n  \"ranks\": " + std::to_string(n) + ",\n  \"records\": [\n";
  auto add = [&](const char* section, const std::string& name, size_t size, double seconds) {
    char line[256];
    std::snprintf(
        line, sizeof line,
        "    {\"section\": \"%s\", \"name\": \"%s\", \"size\": %zu, \"time_us\": %.6g},\n", section,
        name.c_str(), size, seconds * 1e6);
    json += line;
    if (rank == 0) std::printf("%-14s %10zu %10.2f us\n", name.c_str(), size, seconds * 1e6);
  };
  for (const std::string coll :
       {"allreduce", "allgather", "broadcast", "alltoall", "reducescatter"}) {
    for (size_t bytes : sizes) {
      size_t elems = std::max<size_t>(1, bytes / sizeof(float));
      if (coll == "allgather" || coll == "alltoall" || coll == "reducescatter") {
        elems = std::max<size_t>(static_cast<size_t>(n), elems / n * n);
      }
      const int share = static_cast<int>(elems / static_cast<size_t>(n));
      std::vector<float> in(coll == "allgather" ? static_cast<size_t>(share) : elems, 1.f);
      std::vector<float> out(coll == "reducescatter" ? static_cast<size_t>(share) : elems, 0.f);
      const int count = static_cast<int>(elems);
      std::function<void()> body;
      if (coll == "allreduce") {
        body = [&] {
          MPI_Allreduce(in.data(), out.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        };
      } else if (coll == "allgather") {
        body = [&] {
          MPI_Allgather(in.data(), share, MPI_FLOAT, out.data(), share, MPI_FLOAT, MPI_COMM_WORLD);
        };
      } else if (coll == "broadcast") {
        body = [&] { MPI_Bcast(in.data(), count, MPI_FLOAT, 0, MPI_COMM_WORLD); };
      } else if (coll == "alltoall") {
        body = [&] {
          MPI_Alltoall(in.data(), share, MPI_FLOAT, out.data(), share, MPI_FLOAT, MPI_COMM_WORLD);
        };
      } else {
        body = [&] {
          MPI_Reduce_scatter_block(in.data(), out.data(), share, MPI_FLOAT, MPI_SUM,
                                   MPI_COMM_WORLD);
        };
      }
      add("sweep", coll, elems * sizeof(float), timeBlocks(body));
    }
  }
  // (d): single calls of an 8-byte allreduce, the slowest rank's median like medianTime.
  float a[2] = {1.f, 2.f}, b[2];
  std::vector<double> samples;
  for (int i = 0; i < 3000; ++i) {
    const double t0 = MPI_Wtime();
    MPI_Allreduce(a, b, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    samples.push_back(MPI_Wtime() - t0);
  }
  std::sort(samples.begin(), samples.end());
  add("scenario", "d.latency", 8, maxAcrossRanks(samples[samples.size() / 2]));
  json.resize(json.size() - 2);  // the last record's ",\n"
  json += "\n  ]\n}\n";
  if (rank == 0) {
    FILE* f = std::fopen(argv[1], "w");
    if (f == nullptr || std::fputs(json.c_str(), f) < 0) {
      std::fprintf(stderr, "could not write %s\n", argv[1]);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    std::fclose(f);
  }
  MPI_Finalize();
  return 0;
}
