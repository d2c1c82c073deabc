// Soak: 4 user threads x 3 communicators x many mixed random operations (allreduce, grouped
// allreduce, allgather, broadcast, reducescatter; random sizes, dtypes and names), each result
// checked against a direct computation, with resident memory flat after warm-up.
//   test_soak [ops per thread]   (default 300; CTest runs 2000; by hand e.g. 50000)
// Every rank derives the same op list from (thread, index), so names and specs agree, while
// the threads interleave differently on every rank.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "hcoll/hcoll.h"
#include "support/test_util.h"

namespace {

constexpr int kThreads = 4;
constexpr int kComms = 3;
constexpr int kWindow = 6;  // requests a thread keeps in flight
const hcoll_dtype_t kTypes[] = {HCOLL_FLOAT32, HCOLL_FLOAT64,  HCOLL_INT32, HCOLL_INT64,
                                HCOLL_FLOAT16, HCOLL_BFLOAT16, HCOLL_INT16, HCOLL_UINT8};

std::atomic<int> gFailures{0};
std::atomic<long> gDone{0};

long residentKiB() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  std::fclose(f);
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

enum class Kind { kAllreduce, kGrouped, kAllgather, kBroadcast, kReducescatter };

// One operation in flight and what its outputs must be.
struct Op {
  Kind kind;
  std::string name;
  std::vector<std::unique_ptr<htest::Tensor>> tensors;
  hcoll_request_t req = HCOLL_REQUEST_NULL;
  int n, size, rank, root = 0;
  int64_t rows = 0, width = 0;
  int salt = 0;
};

double valueOf(int rank, int salt, int64_t j) {
  return (rank + 1) * ((j + salt) % 5);
}

void fail(const Op& op, const std::string& why) {
  if (gFailures.fetch_add(1) < 10) {
    std::fprintf(stderr, "FAIL %s: %s (%s)\n", op.name.c_str(), why.c_str(), hcoll_last_error());
  }
}

std::unique_ptr<Op> submit(hcoll_comm_t comm, int thread, int index, std::mt19937& rng) {
  auto op = std::make_unique<Op>();
  hcoll_comm_rank(comm, &op->rank);
  hcoll_comm_size(comm, &op->size);
  op->kind = static_cast<Kind>(rng() % 5);
  op->name = "t" + std::to_string(thread) + ".i" + std::to_string(index);
  op->salt = static_cast<int>(rng() % 7);
  const hcoll_dtype_t dtype = kTypes[rng() % (sizeof kTypes / sizeof kTypes[0])];
  op->width = 1 + static_cast<int64_t>(rng() % 3);
  op->rows = static_cast<int64_t>(rng() % (rng() % 8 == 0 ? 4000 : 40));
  const int r = op->rank, n = op->size;
  auto make = [&](int64_t rows, int salt, int who) {
    auto t = std::make_unique<htest::Tensor>(dtype, std::vector<int64_t>{rows, op->width});
    for (int64_t j = 0; j < t->elements(); ++j) t->set(j, valueOf(who, salt, j));
    return t;
  };
  hcoll_status_t s = HCOLL_SUCCESS;
  switch (op->kind) {
    case Kind::kAllreduce: {
      op->tensors.push_back(make(op->rows, op->salt, r));
      auto d = op->tensors[0]->desc();
      s = hcoll_allreduce(comm, op->name.c_str(), &d, &d, HCOLL_SUM, 1, 1, &op->req);
      break;
    }
    case Kind::kGrouped: {
      op->n = 1 + static_cast<int>(rng() % 3);
      std::vector<hcoll_tensor_t> ds;
      for (int m = 0; m < op->n; ++m) {
        op->tensors.push_back(make(op->rows + m, op->salt + m, r));
        ds.push_back(op->tensors.back()->desc());
      }
      s = hcoll_grouped_allreduce(comm, op->name.c_str(), op->n, ds.data(), ds.data(), HCOLL_SUM, 1,
                                  1, &op->req);
      break;
    }
    case Kind::kAllgather: {
      op->tensors.push_back(make((op->rows + r) % 50, op->salt, r));
      auto d = op->tensors[0]->desc();
      s = hcoll_allgather(comm, op->name.c_str(), &d, &op->req);
      break;
    }
    case Kind::kBroadcast: {
      op->root = static_cast<int>(rng() % static_cast<unsigned>(n));
      op->tensors.push_back(make(op->rows, op->salt, r == op->root ? r : 7));
      auto d = op->tensors[0]->desc();
      s = hcoll_broadcast(comm, op->name.c_str(), &d, op->root, &op->req);
      break;
    }
    case Kind::kReducescatter: {
      op->tensors.push_back(make(op->rows, op->salt, r));
      auto d = op->tensors[0]->desc();
      s = hcoll_reducescatter(comm, op->name.c_str(), &d, HCOLL_SUM, 1, 1, &op->req);
      break;
    }
  }
  if (s != HCOLL_SUCCESS) {
    fail(*op, std::string("submit: ") + hcoll_status_string(s));
    return nullptr;
  }
  return op;
}

void verify(Op& op) {
  hcoll_status_t s = hcoll_wait(op.req, 60);
  if (s != HCOLL_SUCCESS) {
    fail(op, std::string("wait: ") + hcoll_status_string(s) + " " +
                 (s == HCOLL_ERR_TIMEOUT ? "" : hcoll_request_error(op.req)));
    if (s != HCOLL_ERR_TIMEOUT) hcoll_request_free(op.req);
    return;
  }
  const int n = op.size;
  const double sumFactor = n * (n + 1) / 2.0;  // sum over ranks of (rank + 1)
  auto expectEq = [&](double got, double want, int64_t j) {
    if (got != want) {
      fail(op, "element " + std::to_string(j) + " is " + std::to_string(got) + ", expected " +
                   std::to_string(want));
      return false;
    }
    return true;
  };
  switch (op.kind) {
    case Kind::kAllreduce:
    case Kind::kGrouped:
      for (size_t m = 0; m < op.tensors.size(); ++m) {
        for (int64_t j = 0; j < op.tensors[m]->elements(); ++j) {
          double want = sumFactor * ((j + op.salt + static_cast<int>(m)) % 5);
          if (!expectEq(op.tensors[m]->get(j), want, j)) break;
        }
      }
      break;
    case Kind::kAllgather: {
      hcoll_tensor_t out;
      if (hcoll_request_output(op.req, 0, &out) != HCOLL_SUCCESS) {
        fail(op, "no output");
        break;
      }
      int64_t at = 0;
      bool ok = true;
      for (int src = 0; src < n && ok; ++src) {
        const int64_t count = ((op.rows + src) % 50) * op.width;
        for (int64_t j = 0; j < count && ok; ++j) {
          ok = expectEq(htest::outputElement(out, at++), valueOf(src, op.salt, j), j);
        }
      }
      if (ok && htest::outputElements(out) != at) fail(op, "wrong output size");
      break;
    }
    case Kind::kBroadcast:
      for (int64_t j = 0; j < op.tensors[0]->elements(); ++j) {
        if (!expectEq(op.tensors[0]->get(j), valueOf(op.root, op.salt, j), j)) break;
      }
      break;
    case Kind::kReducescatter: {
      hcoll_tensor_t out;
      if (hcoll_request_output(op.req, 0, &out) != HCOLL_SUCCESS) {
        fail(op, "no output");
        break;
      }
      const int64_t d0 = op.rows, r = op.rank;
      const int64_t rows = d0 / n + (r < d0 % n ? 1 : 0);
      const int64_t offset = r * (d0 / n) + std::min<int64_t>(r, d0 % n);
      if (htest::outputElements(out) != rows * op.width) {
        fail(op, "wrong output size");
        break;
      }
      for (int64_t j = 0; j < rows * op.width; ++j) {
        const int64_t g = offset * op.width + j;
        if (!expectEq(htest::outputElement(out, j), sumFactor * ((g + op.salt) % 5), j)) break;
      }
      break;
    }
  }
  hcoll_request_free(op.req);
  gDone.fetch_add(1);
}

void worker(const hcoll_comm_t* comms, int thread, int ops) {
  std::deque<std::unique_ptr<Op>> window;
  for (int i = 0; i < ops && gFailures.load() == 0; ++i) {
    std::mt19937 rng(static_cast<unsigned>(thread * 1000003 + i));  // same on every rank
    hcoll_comm_t comm = comms[rng() % kComms];
    if (auto op = submit(comm, thread, i, rng)) window.push_back(std::move(op));
    if (window.size() >= kWindow) {
      verify(*window.front());
      window.pop_front();
    }
  }
  while (!window.empty()) {
    verify(*window.front());
    window.pop_front();
  }
}

void runPhase(const hcoll_comm_t* comms, int ops) {
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, comms, t, ops);
  for (auto& t : threads) t.join();
}

}  // namespace

int main(int argc, char** argv) {
  const int ops = argc > 1 ? std::atoi(argv[1]) : 300;
  if (hcoll_initialize(nullptr) != HCOLL_SUCCESS) return 2;
  hcoll_comm_t comms[kComms];
  hcoll_comm_world(&comms[0]);
  int rank = 0;
  hcoll_comm_rank(comms[0], &rank);
  hcoll_comm_split(comms[0], 0, rank, &comms[1]);
  hcoll_comm_split(comms[0], 0, -rank, &comms[2]);  // reversed rank order

  const auto start = std::chrono::steady_clock::now();
  runPhase(comms, std::max(1, ops / 5));  // warm-up: pools, caches, MPI internals
  const long warmKiB = residentKiB();
  runPhase(comms, ops);
  const long endKiB = residentKiB();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const long growthKiB = endKiB - warmKiB;
  std::printf(
      "rank %d: %ld ops verified in %.1f s, %d failures; RSS %ld KiB after warm-up, "
      "%ld KiB at the end (growth %ld KiB)\n",
      rank, gDone.load(), secs, gFailures.load(), warmKiB, endKiB, growthKiB);
  // Flat memory: a little allocator noise is fine, a per-op leak is not.
  constexpr long kMaxGrowthKiB = 24 * 1024;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // ASan's quarantine and TSan's shadow keep memory resident by design; LSan checks leaks.
  const bool checkMemory = false;
#else
  const bool checkMemory = true;
#endif
  const bool memoryOk = !checkMemory || growthKiB < kMaxGrowthKiB;
  bool ok = gFailures.load() == 0 && memoryOk;
  if (!memoryOk) std::printf("FAIL: resident memory grew by %ld KiB\n", growthKiB);
  hcoll_comm_destroy(comms[1]);
  hcoll_comm_destroy(comms[2]);
  hcoll_shutdown();
  return ok ? 0 : 1;
}
