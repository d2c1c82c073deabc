// Hostile input at the C API: a table of bad calls, each of which must return its documented
// status, set its own hcoll_last_error message (not leave an earlier one), and leave the runtime
// usable (a real operation succeeds after the table). Calls before initialize and after shutdown
// are covered too. Runs on 2 ranks; every rank makes the same calls (destroy/split are collective).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "hcoll/hcoll.h"

extern "C" hcoll_status_t hostileAllreduceOp(hcoll_comm_t, const hcoll_tensor_t*, int,
                                             hcoll_request_t*);
extern "C" hcoll_status_t hostileReducescatterOp(hcoll_comm_t, const hcoll_tensor_t*, int,
                                                 hcoll_request_t*);
// The tensor is only copied and passed on here, never its dtype loaded (which would be UB).
extern "C" hcoll_tensor_t hostileDtype(hcoll_tensor_t t, int dtype);

namespace {

struct BadCall {
  const char* what;
  hcoll_status_t expected;
  std::function<hcoll_status_t()> call;
  hcoll_status_t alsoAccepted = HCOLL_SUCCESS;  // a second documented outcome, if any
};

int gFailures = 0;
int gChecked = 0;

// hcoll_last_error keeps the message of this thread's last failure until the next one, so a bad
// call that failed without setting its own would pass on a leftover message. Before each call a
// sentinel failure leaves a known message, and the call must replace it; where a call's own
// message could equal the sentinel's, a second sentinel from another function decides.
// Returns the sentinel's message.
std::string setSentinel(int which) {
  // Failures in every phase (before init, initialized, after shutdown): a NULL output pointer.
  const hcoll_status_t s =
      which == 0 ? hcoll_comm_world(nullptr) : hcoll_comm_size(HCOLL_COMM_NULL, nullptr);
  const char* m = hcoll_last_error();
  if (s == HCOLL_SUCCESS || m == nullptr || m[0] == '\0') {
    ++gFailures;
    std::fprintf(stderr, "FAIL: sentinel %d did not fail with a message\n", which);
  }
  return m ? m : "";
}

void runTable(const char* phase, const std::vector<BadCall>& table) {
  for (const BadCall& c : table) {
    ++gChecked;
    std::string sentinel = setSentinel(0);
    hcoll_status_t got = c.call();
    std::string message = hcoll_last_error() ? hcoll_last_error() : "";
    if (got != HCOLL_SUCCESS && message == sentinel) {
      // Either no message was set, or the call's own message is the sentinel's text (e.g. the
      // entries that call hcoll_comm_world): decide with the other sentinel.
      sentinel = setSentinel(1);
      got = c.call();
      message = hcoll_last_error() ? hcoll_last_error() : "";
    }
    bool messageOk = got == HCOLL_SUCCESS || (!message.empty() && message != sentinel);
    bool statusOk = got == c.expected || (c.alsoAccepted != HCOLL_SUCCESS && got == c.alsoAccepted);
    if (!statusOk || !messageOk) {
      ++gFailures;
      std::fprintf(stderr, "FAIL [%s] %s: expected %s, got %s (last error: '%s'%s)\n", phase,
                   c.what, hcoll_status_string(c.expected), hcoll_status_string(got),
                   message.c_str(), message == sentinel ? ", left over, not this call's" : "");
    }
  }
}

// A request that completed and was freed: a stale handle.
hcoll_request_t staleRequest(hcoll_comm_t world) {
  hcoll_request_t req = HCOLL_REQUEST_NULL;
  if (hcoll_barrier(world, &req) != HCOLL_SUCCESS) return req;
  hcoll_wait(req, 30);
  hcoll_request_free(req);
  return req;
}

}  // namespace

int main() {
  int64_t shape4[] = {4};
  float data[4] = {1, 2, 3, 4};
  hcoll_tensor_t good{data, HCOLL_FLOAT32, 1, shape4, HCOLL_DEVICE_HOST, nullptr};
  hcoll_request_t req = HCOLL_REQUEST_NULL;
  hcoll_comm_t comm = HCOLL_COMM_NULL;

  // Before initialize: everything that needs the runtime says so.
  runTable("before init",
           {
               {"comm_world before init", HCOLL_ERR_NOT_INITIALIZED,
                [&] { return hcoll_comm_world(&comm); }},
               {"shutdown before init", HCOLL_ERR_NOT_INITIALIZED, [] { return hcoll_shutdown(); }},
               {"allreduce before init", HCOLL_ERR_NOT_INITIALIZED,
                [&] { return hcoll_allreduce(comm, "x", &good, &good, HCOLL_SUM, 1, 1, &req); }},
               {"init with unknown mask bit", HCOLL_ERR_INVALID_ARGUMENT,
                [] {
                  hcoll_init_params_t p{};
                  p.mask = UINT64_C(1) << 40;
                  return hcoll_initialize(&p);
                }},
           });
  if (hcoll_is_initialized()) {
    std::fprintf(stderr, "FAIL: a rejected initialize left hcoll initialized\n");
    return 1;
  }
  if (hcoll_initialize(nullptr) != HCOLL_SUCCESS) {
    std::fprintf(stderr, "hcoll_initialize: %s\n", hcoll_last_error());
    return 2;
  }
  hcoll_comm_t w = HCOLL_COMM_NULL;
  hcoll_comm_world(&w);
  int rank = 0, size = 1;
  hcoll_comm_rank(w, &rank);
  hcoll_comm_size(w, &size);

  // A destroyed communicator and a freed request: stale handles.
  hcoll_comm_t destroyed = HCOLL_COMM_NULL;
  hcoll_comm_split(w, 0, rank, &destroyed);
  hcoll_comm_destroy(destroyed);
  hcoll_request_t freed = staleRequest(w);
  auto garbageComm = reinterpret_cast<hcoll_comm_t>(uintptr_t{0xdeadbeefcafe});
  auto garbageReq = reinterpret_cast<hcoll_request_t>(uintptr_t{0x1234567890ab});

  int64_t negShape[] = {-3};
  int64_t hugeShape[] = {INT64_C(1) << 40, INT64_C(1) << 40};
  int64_t twoByTwo[] = {2, 2};
  int64_t shape3[] = {3};
  int64_t odd[] = {5};
  float odd5[5] = {};
  auto with = [&](auto edit) {
    hcoll_tensor_t t = good;
    edit(t);
    return t;
  };
  hcoll_tensor_t nullData = with([](hcoll_tensor_t& t) { t.data = nullptr; });
  hcoll_tensor_t badDtype = hostileDtype(good, 99);
  hcoll_tensor_t negDtype = hostileDtype(good, -1);
  hcoll_tensor_t negNdim = with([](hcoll_tensor_t& t) { t.ndim = -1; });
  hcoll_tensor_t bigNdim = with([](hcoll_tensor_t& t) { t.ndim = HCOLL_MAX_NDIM + 1; });
  hcoll_tensor_t nullShape = with([](hcoll_tensor_t& t) { t.shape = nullptr; });
  hcoll_tensor_t negDim = with([&](hcoll_tensor_t& t) { t.shape = negShape; });
  hcoll_tensor_t overflow = with([&](hcoll_tensor_t& t) {
    t.ndim = 2;
    t.shape = hugeShape;
  });
  hcoll_tensor_t badDevice = with([](hcoll_tensor_t& t) { t.device = -7; });
  hcoll_tensor_t cuda = with([](hcoll_tensor_t& t) { t.device = 0; });
  hcoll_tensor_t otherShape = with([&](hcoll_tensor_t& t) {
    t.ndim = 2;
    t.shape = twoByTwo;
  });
  hcoll_tensor_t otherDtype = with([](hcoll_tensor_t& t) { t.dtype = HCOLL_INT32; });
  hcoll_tensor_t scalar = with([](hcoll_tensor_t& t) { t.ndim = 0; });
  hcoll_tensor_t boolT = with([](hcoll_tensor_t& t) { t.dtype = HCOLL_BOOL; });
  hcoll_tensor_t oddRows = with([&](hcoll_tensor_t& t) {
    t.data = odd5;
    t.shape = odd;
  });
  hcoll_tensor_t threeRows = with([&](hcoll_tensor_t& t) { t.shape = shape3; });
  hcoll_tensor_t group[2] = {good, cuda};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<int64_t> negSplits(static_cast<size_t>(size), 0);
  negSplits[0] = -1;
  std::vector<int64_t> bigSplits(static_cast<size_t>(size), 4);
  std::string longName(100000, 'n');
  int dupRanks[] = {0, 0};
  int outOfRange[] = {0, 99};
  int out = 0;
  hcoll_tensor_t outTensor;
  const int64_t* splitsOut = nullptr;
  int splitsCount = 0;
  hcoll_comm_stats_t stats{};
  // Without NCCL a CUDA tensor is UNSUPPORTED; with NCCL built it is UNSUPPORTED when no CUDA
  // device is usable, and may be BACKEND when the device cannot be driven.
  const hcoll_status_t cudaAlso = hcoll_nccl_built() ? HCOLL_ERR_BACKEND : HCOLL_SUCCESS;

  std::vector<BadCall> table = {
      // Handles.
      {"allreduce on NULL comm", HCOLL_ERR_INVALID_HANDLE,
       [&] { return hcoll_allreduce(HCOLL_COMM_NULL, "a", &good, &good, HCOLL_SUM, 1, 1, &req); }},
      {"allreduce on garbage comm", HCOLL_ERR_INVALID_HANDLE,
       [&] { return hcoll_allreduce(garbageComm, "a", &good, &good, HCOLL_SUM, 1, 1, &req); }},
      {"allreduce on destroyed comm", HCOLL_ERR_INVALID_HANDLE,
       [&] { return hcoll_allreduce(destroyed, "a", &good, &good, HCOLL_SUM, 1, 1, &req); }},
      {"barrier on destroyed comm", HCOLL_ERR_INVALID_HANDLE,
       [&] { return hcoll_barrier(destroyed, &req); }},
      {"destroy a destroyed comm", HCOLL_ERR_INVALID_HANDLE,
       [&] { return hcoll_comm_destroy(destroyed); }},
      {"destroy the world", HCOLL_ERR_INVALID_ARGUMENT, [&] { return hcoll_comm_destroy(w); }},
      {"rank of garbage comm", HCOLL_ERR_INVALID_HANDLE,
       [&] { return hcoll_comm_rank(garbageComm, &out); }},
      {"size of NULL comm", HCOLL_ERR_INVALID_HANDLE,
       [&] { return hcoll_comm_size(HCOLL_COMM_NULL, &out); }},
      {"rank into NULL", HCOLL_ERR_INVALID_ARGUMENT, [&] { return hcoll_comm_rank(w, nullptr); }},
      {"stats into NULL", HCOLL_ERR_INVALID_ARGUMENT, [&] { return hcoll_comm_stats(w, nullptr); }},
      {"stats of garbage comm", HCOLL_ERR_INVALID_HANDLE,
       [&] { return hcoll_comm_stats(garbageComm, &stats); }},
      {"test NULL request", HCOLL_ERR_INVALID_HANDLE,
       [&] { return hcoll_test(HCOLL_REQUEST_NULL); }},
      {"test freed request", HCOLL_ERR_INVALID_HANDLE, [&] { return hcoll_test(freed); }},
      {"wait garbage request", HCOLL_ERR_INVALID_HANDLE, [&] { return hcoll_wait(garbageReq, 1); }},
      {"free freed request", HCOLL_ERR_INVALID_HANDLE, [&] { return hcoll_request_free(freed); }},
      {"output of freed request", HCOLL_ERR_INVALID_HANDLE,
       [&] { return hcoll_request_output(freed, 0, &outTensor); }},
      {"splits of garbage request", HCOLL_ERR_INVALID_HANDLE,
       [&] { return hcoll_request_received_splits(garbageReq, 0, &splitsOut, &splitsCount); }},
      // NULL pointers.
      {"allreduce req NULL", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_allreduce(w, "a", &good, &good, HCOLL_SUM, 1, 1, nullptr); }},
      {"allreduce in NULL", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_allreduce(w, "a", nullptr, &good, HCOLL_SUM, 1, 1, &req); }},
      {"allreduce out NULL", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_allreduce(w, "a", &good, nullptr, HCOLL_SUM, 1, 1, &req); }},
      {"allgather in NULL", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_allgather(w, "a", nullptr, &req); }},
      {"broadcast buf NULL", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_broadcast(w, "a", nullptr, 0, &req); }},
      {"grouped allreduce ins NULL", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_grouped_allreduce(w, "g", 2, nullptr, nullptr, HCOLL_SUM, 1, 1, &req); }},
      {"barrier req NULL", HCOLL_ERR_INVALID_ARGUMENT, [&] { return hcoll_barrier(w, nullptr); }},
      {"join req NULL", HCOLL_ERR_INVALID_ARGUMENT, [&] { return hcoll_join(w, nullptr); }},
      {"comm_world NULL", HCOLL_ERR_INVALID_ARGUMENT, [&] { return hcoll_comm_world(nullptr); }},
      {"split out NULL", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_comm_split(w, 0, 0, nullptr); }},
      {"create ranks NULL", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_comm_create(w, nullptr, 1, &comm); }},
      // Tensors.
      {"data NULL, non-empty", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_allreduce(w, "a", &nullData, &nullData, HCOLL_SUM, 1, 1, &req); }},
      {"dtype 99", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_allreduce(w, "a", &badDtype, &badDtype, HCOLL_SUM, 1, 1, &req); }},
      {"dtype -1", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_allgather(w, "a", &negDtype, &req); }},
      {"ndim -1", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_allreduce(w, "a", &negNdim, &negNdim, HCOLL_SUM, 1, 1, &req); }},
      {"ndim too large", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_broadcast(w, "a", &bigNdim, 0, &req); }},
      {"shape NULL with ndim 1", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_allgather(w, "a", &nullShape, &req); }},
      {"negative dim", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_allreduce(w, "a", &negDim, &negDim, HCOLL_SUM, 1, 1, &req); }},
      {"element count overflow", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_allreduce(w, "a", &overflow, &overflow, HCOLL_SUM, 1, 1, &req); }},
      {"device -7", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_broadcast(w, "a", &badDevice, 0, &req); }},
      {"CUDA tensor", HCOLL_ERR_UNSUPPORTED,
       [&] { return hcoll_allreduce(w, "a", &cuda, &cuda, HCOLL_SUM, 1, 1, &req); }, cudaAlso},
      {"group mixing host and CUDA", HCOLL_ERR_UNSUPPORTED,
       [&] { return hcoll_grouped_allgather(w, "g", 2, group, &req); },
       hcoll_nccl_built() ? HCOLL_ERR_INVALID_ARGUMENT : HCOLL_SUCCESS},
      {"in/out shapes differ", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_allreduce(w, "a", &good, &otherShape, HCOLL_SUM, 1, 1, &req); }},
      {"in/out dtypes differ", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_allreduce(w, "a", &good, &otherDtype, HCOLL_SUM, 1, 1, &req); }},
      {"allgather of a 0-d tensor", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_allgather(w, "a", &scalar, &req); }},
      {"reducescatter of a 0-d tensor", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_reducescatter(w, "a", &scalar, HCOLL_SUM, 1, 1, &req); }},
      // Caller-provided outputs (*_into) and their options.
      {"allgather_into out NULL", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_allgather_into(w, "a", &good, nullptr, nullptr, &req); }},
      {"allgather_into garbage comm", HCOLL_ERR_INVALID_HANDLE,
       [&] { return hcoll_allgather_into(garbageComm, "a", &good, &good, nullptr, &req); }},
      {"reducescatter_into out dtype 99", HCOLL_ERR_INVALID_ARGUMENT,
       [&] {
         return hcoll_reducescatter_into(w, "a", &good, &badDtype, HCOLL_SUM, 1, 1, nullptr, &req);
       }},
      {"alltoall_into out ndim -1", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_alltoall_into(w, "a", &good, nullptr, &negNdim, nullptr, &req); }},
      {"grouped_allgather_into outs NULL", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_grouped_allgather_into(w, "g", 1, &good, nullptr, nullptr, &req); }},
      {"grouped_reducescatter_into unknown option bits", HCOLL_ERR_INVALID_ARGUMENT,
       [&] {
         hcoll_op_options_t o{};
         o.mask = ~uint64_t{0};
         return hcoll_grouped_reducescatter_into(w, "g", 1, &good, &good, HCOLL_SUM, 1, 1, &o,
                                                 &req);
       }},
      // Enums and scalars.
      {"reduce op 17", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hostileAllreduceOp(w, &good, 17, &req); }},
      {"reduce op -1", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hostileReducescatterOp(w, &good, -1, &req); }},
      {"prescale NaN", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_allreduce(w, "a", &good, &good, HCOLL_SUM, nan, 1, &req); }},
      {"postscale inf", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_allreduce(w, "a", &good, &good, HCOLL_SUM, 1, inf, &req); }},
      {"bool average", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_allreduce(w, "a", &boolT, &boolT, HCOLL_AVERAGE, 1, 1, &req); }},
      {"bool scaled", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_allreduce(w, "a", &boolT, &boolT, HCOLL_SUM, 2, 1, &req); }},
      {"broadcast root -1", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_broadcast(w, "a", &good, -1, &req); }},
      {"broadcast root = size", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_broadcast(w, "a", &good, size, &req); }},
      {"grouped n = 0", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_grouped_broadcast(w, "g", 0, &good, 0, &req); }},
      {"grouped n = -5", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_grouped_reducescatter(w, "g", -5, &good, HCOLL_SUM, 1, 1, &req); }},
      {"prescale -NaN", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_allreduce(w, "a", &good, &good, HCOLL_SUM, -nan, 1, &req); }},
      // Names.
      {"empty name", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_allreduce(w, "", &good, &good, HCOLL_SUM, 1, 1, &req); }},
      {"name longer than the limit", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_allreduce(w, longName.c_str(), &good, &good, HCOLL_SUM, 1, 1, &req); }},
      // Splits.
      {"alltoall NULL splits, dim0 not divisible",
       size > 1 ? HCOLL_ERR_INVALID_ARGUMENT : HCOLL_SUCCESS,
       [&] { return size > 1 ? hcoll_alltoall(w, "a", &oddRows, nullptr, &req) : HCOLL_SUCCESS; }},
      {"alltoall negative split", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_alltoall(w, "a", &good, negSplits.data(), &req); }},
      {"alltoall splits sum past dim0", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_alltoall(w, "a", &threeRows, bigSplits.data(), &req); }},
      {"alltoall of a 0-d tensor", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_alltoall(w, "a", &scalar, nullptr, &req); }},
      // Communicator management.
      {"create with n = 0", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_comm_create(w, dupRanks, 0, &comm); }},
      {"create with duplicate ranks", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_comm_create(w, dupRanks, 2, &comm); }},
      {"create with rank out of range", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_comm_create(w, outOfRange, 2, &comm); }},
      {"create on garbage parent", HCOLL_ERR_INVALID_HANDLE,
       [&] { return hcoll_comm_create(garbageComm, outOfRange, 1, &comm); }},
      {"split on destroyed parent", HCOLL_ERR_INVALID_HANDLE,
       [&] { return hcoll_comm_split(destroyed, 0, 0, &comm); }},
      {"from_mpi with a garbage handle", HCOLL_ERR_INVALID_ARGUMENT,
       [&] { return hcoll_comm_from_mpi(0x7fff1234, &comm); }},
      {"initialize twice", HCOLL_ERR_INVALID_ARGUMENT, [] { return hcoll_initialize(nullptr); }},
  };
  runTable("initialized", table);

  // A named op in flight, then the same name again: DUPLICATE_NAME, the first unaffected.
  float dupData[4] = {1, 1, 1, 1};
  hcoll_tensor_t dupT = with([&](hcoll_tensor_t& t) { t.data = dupData; });
  hcoll_request_t first = HCOLL_REQUEST_NULL;
  hcoll_request_t fence = HCOLL_REQUEST_NULL;
  // Rank 1 submits its 'dup' only after a barrier that rank 0 enters after its second attempt,
  // so the first 'dup' is surely still in flight then (a barrier may overtake named ops).
  if (rank == 0) {
    hcoll_allreduce(w, "dup", &dupT, &dupT, HCOLL_SUM, 1, 1, &first);
    runTable("in flight", {{"second op named 'dup'", HCOLL_ERR_DUPLICATE_NAME, [&] {
                              return hcoll_allreduce(w, "dup", &dupT, &dupT, HCOLL_SUM, 1, 1, &req);
                            }}});
    hcoll_barrier(w, &fence);
    hcoll_wait(fence, 30);
  } else {
    hcoll_barrier(w, &fence);
    hcoll_wait(fence, 30);
    hcoll_allreduce(w, "dup", &dupT, &dupT, HCOLL_SUM, 1, 1, &first);
  }
  hcoll_request_free(fence);
  ++gChecked;
  if (hcoll_wait(first, 30) != HCOLL_SUCCESS || dupData[0] != static_cast<float>(size)) {
    ++gFailures;
    std::fprintf(stderr, "FAIL: the first 'dup' allreduce was affected: %s\n", hcoll_last_error());
  }
  hcoll_request_free(first);

  // The runtime is still usable: a real allreduce succeeds with the right result.
  float v[4] = {1, 2, 3, 4};
  hcoll_tensor_t t = with([&](hcoll_tensor_t& x) { x.data = v; });
  ++gChecked;
  if (hcoll_allreduce(w, "after", &t, &t, HCOLL_SUM, 1, 1, &req) != HCOLL_SUCCESS ||
      hcoll_wait(req, 30) != HCOLL_SUCCESS || v[3] != 4.0f * size) {
    ++gFailures;
    std::fprintf(stderr, "FAIL: allreduce after the table: %s\n", hcoll_last_error());
  }
  hcoll_request_free(req);

  // Calls after shutdown: handles from the finished initialization are gone.
  if (hcoll_shutdown() != HCOLL_SUCCESS) {
    ++gFailures;
    std::fprintf(stderr, "FAIL: shutdown: %s\n", hcoll_last_error());
  }
  runTable("after shutdown",
           {
               {"allreduce after shutdown", HCOLL_ERR_NOT_INITIALIZED,
                [&] { return hcoll_allreduce(w, "x", &good, &good, HCOLL_SUM, 1, 1, &req); }},
               {"comm_world after shutdown", HCOLL_ERR_NOT_INITIALIZED,
                [&] { return hcoll_comm_world(&comm); }},
               {"rank after shutdown", HCOLL_ERR_NOT_INITIALIZED,
                [&] { return hcoll_comm_rank(w, &out); }},
               {"shutdown twice", HCOLL_ERR_NOT_INITIALIZED, [] { return hcoll_shutdown(); }},
               {"test after shutdown", HCOLL_ERR_INVALID_HANDLE, [&] { return hcoll_test(req); },
                HCOLL_ERR_NOT_INITIALIZED},
           });
  std::printf("rank %d: %d hostile calls checked, %d failures\n", rank, gChecked, gFailures);
  return gFailures == 0 ? 0 : 1;
}
