// Soak: 4 user threads x 3 communicators x many mixed random operations (allreduce, allgather,
// broadcast, reducescatter, each single or grouped, and alltoall with random splits; SUM, MIN,
// MAX, PRODUCT and, where exact, AVERAGE; random sizes, dtypes and names; in and out of place),
// each result checked against a direct computation, with resident memory flat after warm-up.
//   test_soak [ops per thread [seed]]   (default 300; CTest runs 2000; by hand e.g. 50000)
// Every rank derives the same op list from (seed, thread, index), so names and specs agree,
// while the threads interleave differently on every rank.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
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

enum class Kind { kAllreduce, kAllgather, kBroadcast, kReducescatter, kAlltoall };
constexpr int kNumKinds = 5;
const hcoll_reduce_op_t kOps[] = {HCOLL_SUM, HCOLL_MIN, HCOLL_MAX, HCOLL_PRODUCT, HCOLL_AVERAGE};

// One operation in flight and what its outputs must be. Everything but `rank` and the tensors'
// contents is the same on every rank (derived from the shared seed, the thread and the index).
struct Op {
  Kind kind;
  bool grouped = false;
  bool outOfPlace = false;
  int members = 1;
  hcoll_reduce_op_t redop = HCOLL_SUM;
  hcoll_dtype_t dtype;
  std::string name;
  std::vector<std::unique_ptr<htest::Tensor>> inputs;   // in place: the outputs too
  std::vector<std::unique_ptr<htest::Tensor>> outputs;  // allreduce out of place
  hcoll_request_t req = HCOLL_REQUEST_NULL;
  int size, rank, root = 0;
  int64_t rows = 0, width = 0;
  int salt = 0;
  uint32_t splitSeed = 0;
};

bool isInteger(hcoll_dtype_t t) {
  return t != HCOLL_FLOAT16 && t != HCOLL_BFLOAT16 && t != HCOLL_FLOAT32 && t != HCOLL_FLOAT64;
}

// Element j of member m on `rank`: small non-negative integers every dtype holds exactly, and
// whose reduction does too (a product over 3 ranks is at most 8; a sum at most 24).
double valueOf(const Op& op, int m, int rank, int64_t j) {
  const int64_t k = j + op.salt + m;
  switch (op.redop) {
    case HCOLL_PRODUCT:
      return 1 + (rank + k) % 2;
    case HCOLL_MIN:
    case HCOLL_MAX:
      return (rank * 3 + k) % 7;  // the extreme moves across ranks
    default:
      return (rank + 1) * (k % 5);
  }
}

// The reduction of element j of member m over all ranks, computed directly.
double reduced(const Op& op, int m, int64_t j) {
  double acc = valueOf(op, m, 0, j);
  for (int r = 1; r < op.size; ++r) {
    const double v = valueOf(op, m, r, j);
    switch (op.redop) {
      case HCOLL_MIN:
        acc = std::min(acc, v);
        break;
      case HCOLL_MAX:
        acc = std::max(acc, v);
        break;
      case HCOLL_PRODUCT:
        acc *= v;
        break;
      default:
        acc += v;
        break;
    }
  }
  // AVERAGE is SUM x 1/N (only drawn when N is a power of two, so the scaling is exact);
  // integers are scaled in fp64 and truncated.
  if (op.redop == HCOLL_AVERAGE)
    acc = isInteger(op.dtype) ? std::trunc(acc / op.size) : acc / op.size;
  return acc;
}

// Allgather: member m's dim0 differs across ranks (0 included).
int64_t gatherRows(const Op& op, int m, int rank) {
  return (op.rows + rank + 3 * m) % 50;
}

// Alltoall: rows rank `src` sends to rank `dst`, and its dim0 (the splits plus ignored rows).
uint32_t mix(uint32_t a, uint32_t b) {
  uint32_t h = a * 0x9e3779b1u ^ (b + 0x7f4a7c15u + (a << 6) + (a >> 2));
  h ^= h >> 15;
  return h * 0x2c1b3c6du;
}
int64_t splitOf(const Op& op, int src, int dst) {
  const uint32_t h = mix(mix(op.splitSeed, static_cast<uint32_t>(src)), static_cast<uint32_t>(dst));
  return (h % 4 == 0) ? 0 : static_cast<int64_t>(h % 7);
}
int64_t alltoallRows(const Op& op, int src) {
  int64_t rows = static_cast<int64_t>(mix(op.splitSeed, 1000u + static_cast<uint32_t>(src)) % 3);
  for (int dst = 0; dst < op.size; ++dst) rows += splitOf(op, src, dst);
  return rows;
}

// A random name, identical on every rank (it comes from the shared generator): any bytes a
// caller might use, of random length. The suffix keeps a thread's in-flight names distinct from
// each other and from other threads'; names recur every kNameCycle ops with a different op, so
// the response cache sees names re-used for other specs.
constexpr int kNameCycle = 61;
std::string randomName(uint32_t seed, int thread, int index) {
  static const char* const kPieces[] = {"a", "b", "x", "Z", "0",        "9",
                                        "_", "-", ".", "/", ":",        "#",
                                        " ", "@", "[", "]", "\xc3\xa9", "\xe2\x82\xac"};
  std::mt19937 rng(mix(seed, static_cast<uint32_t>(thread * kNameCycle + index % kNameCycle)));
  std::string name;
  const int length = static_cast<int>(rng() % (rng() % 10 == 0 ? 200 : 12));
  for (int i = 0; i < length; ++i) name += kPieces[rng() % (sizeof kPieces / sizeof kPieces[0])];
  return name + "|t" + std::to_string(thread) + "." + std::to_string(index % kNameCycle);
}

void fail(const Op& op, const std::string& why) {
  if (gFailures.fetch_add(1) < 10) {
    std::fprintf(stderr, "FAIL '%s': %s (%s)\n", op.name.c_str(), why.c_str(), hcoll_last_error());
  }
}

std::unique_ptr<Op> submit(hcoll_comm_t comm, uint32_t seed, int thread, int index,
                           std::mt19937& rng) {
  auto op = std::make_unique<Op>();
  hcoll_comm_rank(comm, &op->rank);
  hcoll_comm_size(comm, &op->size);
  const int r = op->rank, n = op->size;
  op->kind = static_cast<Kind>(rng() % kNumKinds);
  op->grouped = op->kind != Kind::kAlltoall && rng() % 2 == 0;
  op->members = op->grouped ? 1 + static_cast<int>(rng() % 3) : 1;
  op->outOfPlace = op->kind == Kind::kAllreduce && rng() % 2 == 0;
  if (op->kind == Kind::kAllreduce || op->kind == Kind::kReducescatter) {
    // AVERAGE divides by N: exact only for a power-of-two N.
    const bool averageExact = (n & (n - 1)) == 0;
    do {
      op->redop = kOps[rng() % (sizeof kOps / sizeof kOps[0])];
    } while (op->redop == HCOLL_AVERAGE && !averageExact);
  }
  op->name = randomName(seed, thread, index);
  op->salt = static_cast<int>(rng() % 7);
  op->splitSeed = static_cast<uint32_t>(rng());
  op->dtype = kTypes[rng() % (sizeof kTypes / sizeof kTypes[0])];
  op->width = 1 + static_cast<int64_t>(rng() % 3);
  // Now and then a large tensor; a group's members are smaller, so that the data per op (and
  // the CI time, under ASan and TSan above all) stays what it was before groups were common.
  const unsigned large = op->grouped ? 2000 : 4000;
  op->rows = static_cast<int64_t>(rng() % (rng() % 8 == 0 ? large : 40));
  auto make = [&](int64_t rows, int m, int who) {
    auto t = std::make_unique<htest::Tensor>(op->dtype, std::vector<int64_t>{rows, op->width});
    for (int64_t j = 0; j < t->elements(); ++j) t->set(j, valueOf(*op, m, who, j));
    return t;
  };
  std::vector<hcoll_tensor_t> ins, outs;
  for (int m = 0; m < op->members; ++m) {
    switch (op->kind) {
      case Kind::kAllgather:
        op->inputs.push_back(make(gatherRows(*op, m, r), m, r));
        break;
      case Kind::kBroadcast:
        if (m == 0) op->root = static_cast<int>(rng() % static_cast<unsigned>(n));
        // Non-roots start from another rank's values: the broadcast must overwrite them.
        op->inputs.push_back(make(op->rows + m, m, r == op->root ? r : 7));
        break;
      case Kind::kAlltoall:
        op->inputs.push_back(make(alltoallRows(*op, r), m, r));
        break;
      default:
        op->inputs.push_back(make(op->rows + m, m, r));
        break;
    }
    ins.push_back(op->inputs.back()->desc());
    if (op->outOfPlace) {
      op->outputs.push_back(std::make_unique<htest::Tensor>(op->dtype, op->inputs.back()->shape()));
      outs.push_back(op->outputs.back()->desc());
    }
  }
  const hcoll_tensor_t* out = op->outOfPlace ? outs.data() : ins.data();
  const char* name = op->name.c_str();
  const int k = op->members;
  hcoll_status_t s = HCOLL_SUCCESS;
  switch (op->kind) {
    case Kind::kAllreduce:
      s = op->grouped
              ? hcoll_grouped_allreduce(comm, name, k, ins.data(), out, op->redop, 1, 1, &op->req)
              : hcoll_allreduce(comm, name, ins.data(), out, op->redop, 1, 1, &op->req);
      break;
    case Kind::kAllgather:
      s = op->grouped ? hcoll_grouped_allgather(comm, name, k, ins.data(), &op->req)
                      : hcoll_allgather(comm, name, ins.data(), &op->req);
      break;
    case Kind::kBroadcast:
      s = op->grouped ? hcoll_grouped_broadcast(comm, name, k, ins.data(), op->root, &op->req)
                      : hcoll_broadcast(comm, name, ins.data(), op->root, &op->req);
      break;
    case Kind::kReducescatter:
      s = op->grouped
              ? hcoll_grouped_reducescatter(comm, name, k, ins.data(), op->redop, 1, 1, &op->req)
              : hcoll_reducescatter(comm, name, ins.data(), op->redop, 1, 1, &op->req);
      break;
    case Kind::kAlltoall: {
      std::vector<int64_t> splits;
      for (int dst = 0; dst < n; ++dst) splits.push_back(splitOf(*op, r, dst));
      s = hcoll_alltoall(comm, name, ins.data(), splits.data(), &op->req);
      break;
    }
  }
  if (s != HCOLL_SUCCESS) {
    fail(*op, std::string("submit: ") + hcoll_status_string(s));
    return nullptr;
  }
  return op;
}

bool expectEq(const Op& op, int m, double got, double want, int64_t j) {
  if (got == want) return true;
  fail(op, "member " + std::to_string(m) + " element " + std::to_string(j) + " is " +
               std::to_string(got) + ", expected " + std::to_string(want));
  return false;
}

// Checks output `m` of the request: `count` elements, element i expected `want(i)`.
template <class Want>
void checkOutput(const Op& op, int m, int64_t count, Want want) {
  hcoll_tensor_t out;
  if (hcoll_request_output(op.req, m, &out) != HCOLL_SUCCESS) return fail(op, "no output");
  if (htest::outputElements(out) != count) return fail(op, "wrong output size");
  for (int64_t i = 0; i < count; ++i) {
    if (!expectEq(op, m, htest::outputElement(out, i), want(i), i)) return;
  }
}

void verify(Op& op) {
  hcoll_status_t s = hcoll_wait(op.req, 60);
  if (s != HCOLL_SUCCESS) {
    fail(op, std::string("wait: ") + hcoll_status_string(s) + " " +
                 (s == HCOLL_IN_PROGRESS ? "" : hcoll_request_error(op.req)));
    if (s != HCOLL_IN_PROGRESS) hcoll_request_free(op.req);
    return;
  }
  const int n = op.size, me = op.rank;
  for (int m = 0; m < op.members; ++m) {
    switch (op.kind) {
      case Kind::kAllreduce: {
        const htest::Tensor& t = op.outOfPlace ? *op.outputs[m] : *op.inputs[m];
        for (int64_t j = 0; j < t.elements(); ++j) {
          if (!expectEq(op, m, t.get(j), reduced(op, m, j), j)) break;
        }
        break;
      }
      case Kind::kBroadcast: {
        const htest::Tensor& t = *op.inputs[m];
        for (int64_t j = 0; j < t.elements(); ++j) {
          if (!expectEq(op, m, t.get(j), valueOf(op, m, op.root, j), j)) break;
        }
        break;
      }
      case Kind::kAllgather: {
        std::vector<std::pair<int, int64_t>> from;  // (source rank, its element index)
        for (int src = 0; src < n; ++src) {
          for (int64_t j = 0; j < gatherRows(op, m, src) * op.width; ++j) from.emplace_back(src, j);
        }
        checkOutput(op, m, static_cast<int64_t>(from.size()),
                    [&](int64_t i) { return valueOf(op, m, from[i].first, from[i].second); });
        break;
      }
      case Kind::kReducescatter: {
        const int64_t d0 = op.rows + m;
        const int64_t rows = d0 / n + (me < d0 % n ? 1 : 0);
        const int64_t offset = me * (d0 / n) + std::min<int64_t>(me, d0 % n);
        checkOutput(op, m, rows * op.width,
                    [&](int64_t i) { return reduced(op, m, offset * op.width + i); });
        break;
      }
      case Kind::kAlltoall: {
        std::vector<std::pair<int, int64_t>> from;
        for (int src = 0; src < n; ++src) {
          int64_t row = 0;
          for (int dst = 0; dst < me; ++dst) row += splitOf(op, src, dst);
          for (int64_t j = 0; j < splitOf(op, src, me) * op.width; ++j) {
            from.emplace_back(src, row * op.width + j);
          }
        }
        checkOutput(op, 0, static_cast<int64_t>(from.size()),
                    [&](int64_t i) { return valueOf(op, 0, from[i].first, from[i].second); });
        const int64_t* received = nullptr;
        int count = 0;
        if (hcoll_request_received_splits(op.req, 0, &received, &count) != HCOLL_SUCCESS ||
            count != n) {
          fail(op, "no received splits");
          break;
        }
        for (int src = 0; src < n; ++src) {
          if (received[src] != splitOf(op, src, me)) {
            fail(op, "received_splits[" + std::to_string(src) + "] is " +
                         std::to_string(received[src]) + ", expected " +
                         std::to_string(splitOf(op, src, me)));
            break;
          }
        }
        break;
      }
    }
  }
  hcoll_request_free(op.req);
  gDone.fetch_add(1);
}

void worker(const hcoll_comm_t* comms, uint32_t seed, int thread, int ops) {
  std::deque<std::unique_ptr<Op>> window;
  for (int i = 0; i < ops && gFailures.load() == 0; ++i) {
    std::mt19937 rng(mix(seed, static_cast<uint32_t>(thread * 1000003 + i)));  // same on every rank
    hcoll_comm_t comm = comms[rng() % kComms];
    if (auto op = submit(comm, seed, thread, i, rng)) window.push_back(std::move(op));
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

void runPhase(const hcoll_comm_t* comms, uint32_t seed, int ops) {
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, comms, seed, t, ops);
  for (auto& t : threads) t.join();
}

}  // namespace

int main(int argc, char** argv) {
  const int ops = argc > 1 ? std::atoi(argv[1]) : 300;
  // The shared seed every rank derives the same ops and names from (a failure prints it).
  const auto seed = static_cast<uint32_t>(argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 20240611);
  if (hcoll_initialize(nullptr) != HCOLL_SUCCESS) return 2;
  hcoll_comm_t comms[kComms];
  hcoll_comm_world(&comms[0]);
  int rank = 0;
  hcoll_comm_rank(comms[0], &rank);
  hcoll_comm_split(comms[0], 0, rank, &comms[1]);
  hcoll_comm_split(comms[0], 0, -rank, &comms[2]);  // reversed rank order

  const auto start = std::chrono::steady_clock::now();
  runPhase(comms, seed, std::max(1, ops / 5));  // warm-up: pools, caches, MPI internals
  const long warmKiB = residentKiB();
  runPhase(comms, mix(seed, 1), ops);
  const long endKiB = residentKiB();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const long growthKiB = endKiB - warmKiB;
  std::printf(
      "rank %d: %ld ops verified in %.1f s, %d failures (seed %u); RSS %ld KiB after warm-up, "
      "%ld KiB at the end (growth %ld KiB)\n",
      rank, gDone.load(), secs, gFailures.load(), seed, warmKiB, endKiB, growthKiB);
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
