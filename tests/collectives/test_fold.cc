// The small-message fold (negotiator.cc, backend.h's FoldedCollective): a lone cached small
// collective (allreduce, allgather, broadcast, alltoall, reducescatter) rides in its round's
// readiness exchange, and its result stands only when the exchanged bits say every rank would
// run exactly it. Results must be right whatever each rank
// does: ranks that submit in different orders, the same name with a different shape on one rank
// (an error on every rank, the communicator still usable), a rank late by milliseconds,
// postscale and Average, in place. hcoll_comm_stats' `folded` counts folded operations: on
// loopback and on the MPI backend with the shared-memory control block (one node) most of a loop
// folds; where the channel cannot fold (HCOLL_MPI_SHM_SMALL=0) none does and nothing else
// changes.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "support/test_util.h"

using namespace htest;

namespace {

// Whether this run's channel can fold: loopback always, the MPI backend with its control block
// (all ranks on this node, the block not turned off).
bool channelFolds() {
  if (ranksOnThreads()) return true;  // loopback
  const char* off = std::getenv("HCOLL_MPI_SHM_SMALL");
  const char* shm = std::getenv("HCOLL_MPI_SHM");
  if ((off != nullptr && std::string(off) == "0") || (shm != nullptr && std::string(shm) == "0")) {
    return false;
  }
  int local = 0;
  HCOLL_REQUIRE_OK(hcoll_comm_local_size(world(), &local));
  return local == worldSize() && worldSize() > 1;
}

// An 8-byte (two float32) allreduce of (rank + 1, k) named `name`, waited for and checked.
void sumOf(const std::string& name, int k, hcoll_reduce_op_t op = HCOLL_SUM,
           double postscale = 1.0, bool inPlace = false) {
  Tensor in(HCOLL_FLOAT32, {2}), out(HCOLL_FLOAT32, {2});
  in.set(0, worldRank() + 1);
  in.set(1, k);
  hcoll_tensor_t din = in.desc(), dout = inPlace ? in.desc() : out.desc();
  hcoll_request_t req = HCOLL_REQUEST_NULL;
  const char* given = name.empty() ? nullptr : name.c_str();  // empty: an automatic name
  HCOLL_REQUIRE_OK(hcoll_allreduce(world(), given, &din, &dout, op, 1.0, postscale, &req));
  HCOLL_REQUIRE_OK(waitAndFree(req));
  const Tensor& result = inPlace ? in : out;
  const double n = worldSize();
  const double sum0 = n * (n + 1) / 2, sum1 = n * k;
  const double scale = op == HCOLL_AVERAGE ? postscale / n : postscale;
  HINFO(name << " call " << k);
  HREQUIRE(result.get(0) == static_cast<float>(sum0 * scale));
  HREQUIRE(result.get(1) == static_cast<float>(sum1 * scale));
}

// kCalls 8-byte allreduces named `name` ("": automatic names), each checked; then that each call
// either folded or called the backend once, that folded ones were cache replays, and that most
// folded where the channel can fold (the first call is not cached yet; a round that happened to
// carry more does not fold).
void loopFolds(const std::string& name) {
  const auto before = commStats(world());
  constexpr int kCalls = 200;
  for (int k = 0; k < kCalls; ++k) sumOf(name, k);
  const auto after = commStats(world());
  const uint64_t folded = after.folded - before.folded;
  const uint64_t calls = after.backend_calls - before.backend_calls;
  const uint64_t hits = after.cache_hits - before.cache_hits;
  HINFO("folded " << folded << " of " << kCalls << ", backend calls " << calls << ", cache hits "
                  << hits);
  HREQUIRE(folded + calls == kCalls);
  HREQUIRE(hits >= folded);
  if (channelFolds()) {
    HREQUIRE(folded >= kCalls / 2);
  } else {
    HREQUIRE(folded == 0);
  }
}

}  // namespace

HTEST_CASE("fold: a loop of one named small allreduce folds and stays right", "[fold]") {
  loopFolds("fold.loop");
}

HTEST_CASE("fold: a loop of unnamed small allreduces folds, replayed under each call's name",
           "[fold]") {
  // Automatically named calls of one shape share a cache slot, replayed under each call's own
  // name: a folded round hands the operation the slot's response renamed to it.
  loopFolds("");
  // The ranks' automatic names stayed aligned: a named call and another unnamed one still match.
  sumOf("fold.after_unnamed", 0);
  sumOf("", 1);
}

HTEST_CASE("fold: in place, postscale, Average, MIN and MAX", "[fold]") {
  for (int k = 0; k < 20; ++k) {
    sumOf("fold.inplace", k, HCOLL_SUM, 1.0, /*inPlace=*/true);
    sumOf("fold.postscale", k, HCOLL_SUM, 0.5);
    sumOf("fold.average", k, HCOLL_AVERAGE);
  }
  for (int k = 0; k < 20; ++k) {
    Tensor t(HCOLL_INT64, {3});
    for (int i = 0; i < 3; ++i) t.set(i, (worldRank() + 1) * (i + 1) * (k % 2 ? -1 : 1));
    hcoll_tensor_t d = t.desc();
    hcoll_request_t req = HCOLL_REQUEST_NULL;
    const hcoll_reduce_op_t op = k % 2 ? HCOLL_MIN : HCOLL_MAX;
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), k % 2 ? "fold.min" : "fold.max", &d, &d, op, 1, 1,
                                     &req));
    HCOLL_REQUIRE_OK(waitAndFree(req));
    const int n = worldSize();
    for (int i = 0; i < 3; ++i) HREQUIRE(t.get(i) == (k % 2 ? -n * (i + 1) : n * (i + 1)));
  }
}

HTEST_CASE("fold: ranks that submit in different orders", "[fold]") {
  // Two cached operations, submitted in rank-dependent order and waited for in the other: a
  // round may see one on one rank and the other elsewhere (the fold is then discarded), or both.
  for (int k = 0; k < 50; ++k) sumOf(k % 2 ? "fold.order.a" : "fold.order.b", k);  // cache both
  for (int k = 0; k < 100; ++k) {
    const bool flip = (worldRank() + k) % 2 == 1;
    Tensor a(HCOLL_FLOAT32, {2}), b(HCOLL_FLOAT32, {2});
    a.set(0, 1);
    a.set(1, k);
    b.set(0, 2);
    b.set(1, -k);
    hcoll_tensor_t da = a.desc(), db = b.desc();
    hcoll_request_t ra = HCOLL_REQUEST_NULL, rb = HCOLL_REQUEST_NULL;
    if (flip) {
      HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "fold.order.b", &db, &db, HCOLL_SUM, 1, 1, &rb));
      if (k % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
      HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "fold.order.a", &da, &da, HCOLL_SUM, 1, 1, &ra));
      HCOLL_REQUIRE_OK(waitAndFree(ra));
      HCOLL_REQUIRE_OK(waitAndFree(rb));
    } else {
      HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "fold.order.a", &da, &da, HCOLL_SUM, 1, 1, &ra));
      HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "fold.order.b", &db, &db, HCOLL_SUM, 1, 1, &rb));
      HCOLL_REQUIRE_OK(waitAndFree(rb));
      HCOLL_REQUIRE_OK(waitAndFree(ra));
    }
    const float n = static_cast<float>(worldSize());
    HINFO("iteration " << k);
    HREQUIRE(a.get(0) == n);
    HREQUIRE(a.get(1) == n * k);
    HREQUIRE(b.get(0) == 2 * n);
    HREQUIRE(b.get(1) == -n * k);
  }
}

HTEST_CASE("fold: a rank late by milliseconds", "[fold]") {
  for (int k = 0; k < 10; ++k) {
    if (worldRank() == k % worldSize()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    sumOf("fold.late", k);
  }
}

HTEST_CASE("fold: the same name with another shape on one rank fails everywhere, then works",
           "[fold]") {
  for (int k = 0; k < 5; ++k) sumOf("fold.shape", k);  // cached with shape {2}
  // The last rank submits {3} under the cached name: its call is not in the cache, so the round
  // goes to the coordinator, which finds the shapes differ; every rank's call fails.
  const bool odd = worldRank() == worldSize() - 1;
  Tensor t(HCOLL_FLOAT32, {odd ? 3 : 2});
  hcoll_tensor_t d = t.desc();
  hcoll_request_t req = HCOLL_REQUEST_NULL;
  HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "fold.shape", &d, &d, HCOLL_SUM, 1, 1, &req));
  const hcoll_status_t status = waitAndFree(req);
  HINFO("mismatched call: " << hcoll_status_string(status));
  HREQUIRE(status == HCOLL_ERR_MISMATCH);
  for (int k = 0; k < 5; ++k) sumOf("fold.shape", k);  // still right afterwards
}

namespace {

// The output of a completed request `req` (freed here), checked element by element with
// `want(i)`; returns how many differ.
template <typename Want>
int64_t wrongOutputs(hcoll_request_t req, Want&& want) {
  HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
  hcoll_tensor_t out;
  HCOLL_REQUIRE_OK(hcoll_request_output(req, 0, &out));
  int64_t wrong = 0;
  for (int64_t i = 0; i < outputElements(out); ++i) wrong += outputElement(out, i) != want(i);
  HCOLL_REQUIRE_OK(hcoll_request_free(req));
  return wrong;
}

uint64_t foldedSoFar() { return commStats(world()).folded; }

}  // namespace

HTEST_CASE("fold: allgather, broadcast, alltoall and reducescatter fold and stay right",
           "[fold]") {
  const int n = worldSize();
  const int me = worldRank();
  constexpr int kCalls = 40;
  const uint64_t before = foldedSoFar();
  for (int k = 0; k < kCalls; ++k) {
    HINFO("call " << k);
    // Allgather of 2 elements per rank: rank r's part is (100 r + k, 100 r + k + 1).
    Tensor ag(HCOLL_FLOAT32, {2});
    for (int i = 0; i < 2; ++i) ag.set(i, 100 * me + k + i);
    hcoll_tensor_t dag = ag.desc();
    hcoll_request_t req = HCOLL_REQUEST_NULL;
    HCOLL_REQUIRE_OK(hcoll_allgather(world(), "fold.allgather", &dag, &req));
    HREQUIRE(wrongOutputs(req, [&](int64_t i) { return 100.0 * (i / 2) + k + i % 2; }) == 0);

    // Broadcast from the first and from the last rank (one name each: the root is negotiated).
    for (int root : {0, n - 1}) {
      Tensor bc(HCOLL_FLOAT64, {3});
      for (int i = 0; i < 3; ++i) bc.set(i, me == root ? 10 * root + k + i : -1);
      hcoll_tensor_t dbc = bc.desc();
      const std::string name = "fold.broadcast." + std::to_string(root);
      HCOLL_REQUIRE_OK(hcoll_broadcast(world(), name.c_str(), &dbc, root, &req));
      HCOLL_REQUIRE_OK(waitAndFree(req));
      for (int i = 0; i < 3; ++i) HREQUIRE(bc.get(i) == 10 * root + k + i);
    }

    // Alltoall of 2n rows whose splits differ by rank (3 rows to itself, 1 to the next rank,
    // 2 to the others; with 2 ranks: 3 and 1): row t of rank r is 1000 r + t + k.
    std::vector<int64_t> splits(static_cast<size_t>(n), 2);
    auto splitOf = [n](int from, int to) {
      if (n == 1) return 2;
      return to == from ? 3 : to == (from + 1) % n ? 1 : 2;
    };
    for (int j = 0; j < n; ++j) splits[static_cast<size_t>(j)] = splitOf(me, j);
    Tensor a2a(HCOLL_INT32, {2 * n});
    for (int t = 0; t < 2 * n; ++t) a2a.set(t, 1000 * me + t + k);
    hcoll_tensor_t da2a = a2a.desc();
    HCOLL_REQUIRE_OK(hcoll_alltoall(world(), "fold.alltoall", &da2a, splits.data(), &req));
    std::vector<double> want;
    for (int j = 0; j < n; ++j) {
      int offset = 0;
      for (int t = 0; t < me; ++t) offset += splitOf(j, t);
      for (int t = 0; t < splitOf(j, me); ++t) want.push_back(1000.0 * j + offset + t + k);
    }
    HREQUIRE(wrongOutputs(req, [&](int64_t i) {
               return static_cast<size_t>(i) < want.size() ? want[static_cast<size_t>(i)] : -1;
             }) == 0);

    // Reducescatter of n + 1 rows of 2 (rank 0 gets two rows): element e of rank r's input is
    // (r + 1)(e + 1) + k, so the sum is n(n + 1)/2 (e + 1) + n k.
    Tensor rs(HCOLL_FLOAT32, {n + 1, 2});
    for (int e = 0; e < 2 * (n + 1); ++e) rs.set(e, (me + 1) * (e + 1) + k);
    hcoll_tensor_t drs = rs.desc();
    HCOLL_REQUIRE_OK(
        hcoll_reducescatter(world(), "fold.reducescatter", &drs, HCOLL_SUM, 1.0, 1.0, &req));
    // hcoll_reducescatter's rows: the first (rows % n) ranks get one more.
    const int64_t first = 2 * (me * ((n + 1) / n) + std::min(me, (n + 1) % n));
    HREQUIRE(wrongOutputs(req, [&](int64_t i) {
               return n * (n + 1) / 2.0 * (first + i + 1) + n * k;
             }) == 0);
  }
  const uint64_t folded = foldedSoFar() - before;
  HINFO("folded " << folded << " of " << 5 * kCalls);
  if (channelFolds()) {
    HREQUIRE(folded >= 5 * kCalls / 2);  // the first call of each is not cached yet
  } else {
    HREQUIRE(folded == 0);
  }
}

HTEST_CASE("fold: *_into outputs, rows of several elements, Average and received splits",
           "[fold]") {
  // The folded results go straight into the outputs (executor_folded.cc): the caller's here,
  // with rows of 3 elements, a reducescatter's Average and postscale, an alltoall's received
  // splits, and an allgather in place at this rank's own block.
  const int n = worldSize();
  const int me = worldRank();
  constexpr int kCalls = 20;
  const uint64_t before = foldedSoFar();
  for (int k = 0; k < kCalls; ++k) {
    HINFO("call " << k);
    // Allgather of 2 rows of 3 in place: rank r's rows sit at rows [2r, 2r + 2) of the output.
    Tensor ag(HCOLL_INT32, {2 * n, 3});
    for (int e = 0; e < 6 * n; ++e) ag.set(e, e / 6 == me ? 100 * me + e % 6 + k : -1);
    hcoll_tensor_t dout = ag.desc(), din = dout;
    const int64_t partShape[2] = {2, 3};
    din.data = static_cast<int32_t*>(ag.data()) + 6 * me;
    din.shape = partShape;
    hcoll_request_t req = HCOLL_REQUEST_NULL;
    HCOLL_REQUIRE_OK(hcoll_allgather_into(world(), "fold.into.allgather", &din, &dout, nullptr,
                                          &req));
    HCOLL_REQUIRE_OK(waitAndFree(req));
    for (int e = 0; e < 6 * n; ++e) HREQUIRE(ag.get(e) == 100 * (e / 6) + e % 6 + k);

    // Reducescatter of n rows of 3, Average, postscale 2: each rank's row of the mean, doubled.
    // Element e of rank r's input is (r + 1) e + k: the mean is (n + 1) / 2 e + k.
    Tensor rs(HCOLL_FLOAT64, {n, 3}), mine(HCOLL_FLOAT64, {1, 3});
    for (int e = 0; e < 3 * n; ++e) rs.set(e, (me + 1) * e + k);
    hcoll_tensor_t drs = rs.desc(), dmine = mine.desc();
    HCOLL_REQUIRE_OK(hcoll_reducescatter_into(world(), "fold.into.reducescatter", &drs, &dmine,
                                              HCOLL_AVERAGE, 1.0, 2.0, nullptr, &req));
    HCOLL_REQUIRE_OK(waitAndFree(req));
    for (int i = 0; i < 3; ++i) {
      const int e = 3 * me + i;
      HREQUIRE(mine.get(i) == 2 * ((n + 1) / 2.0 * e + k));
    }

    // Alltoall into a buffer one row larger than needed: rank r sends 2 rows of 3 to each
    // rank, row t of rank r is 1000 r + t + k; the extra row stays untouched.
    Tensor a2a(HCOLL_INT32, {2 * n, 3}), got(HCOLL_INT32, {2 * n + 1, 3});
    for (int e = 0; e < 6 * n; ++e) a2a.set(e, 1000 * me + e / 3 + k);
    for (int e = 0; e < 3 * (2 * n + 1); ++e) got.set(e, -7);
    hcoll_tensor_t da2a = a2a.desc(), dgot = got.desc();
    HCOLL_REQUIRE_OK(hcoll_alltoall_into(world(), "fold.into.alltoall", &da2a, nullptr, &dgot,
                                         nullptr, &req));
    HCOLL_REQUIRE_OK(hcoll_wait(req, -1));
    const int64_t* received = nullptr;
    int count = 0;
    HCOLL_REQUIRE_OK(hcoll_request_received_splits(req, 0, &received, &count));
    HREQUIRE(count == n);
    for (int j = 0; j < n; ++j) HREQUIRE(received[j] == 2);
    hcoll_tensor_t filled;
    HCOLL_REQUIRE_OK(hcoll_request_output(req, 0, &filled));
    HREQUIRE(filled.shape[0] == 2 * n);
    HCOLL_REQUIRE_OK(hcoll_request_free(req));
    for (int j = 0; j < n; ++j) {
      for (int e = 0; e < 6; ++e) HREQUIRE(got.get(6 * j + e) == 1000 * j + 2 * me + e / 3 + k);
    }
    for (int e = 6 * n; e < 3 * (2 * n + 1); ++e) HREQUIRE(got.get(e) == -7);
  }
  const uint64_t folded = foldedSoFar() - before;
  HINFO("folded " << folded << " of " << 3 * kCalls);
  if (channelFolds()) {
    HREQUIRE(folded >= 3 * kCalls / 2);  // the first call of each is not cached yet
  } else {
    HREQUIRE(folded == 0);
  }
}

HTEST_CASE("fold: an allgather of parts that differ in size is never folded", "[fold]") {
  // Every rank folds its own part: the headers differ (count), so no rank uses a result and the
  // data plane gathers.
  const int me = worldRank();
  const uint64_t before = foldedSoFar();
  for (int k = 0; k < 20; ++k) {
    Tensor in(HCOLL_FLOAT32, {me + 1});
    for (int i = 0; i <= me; ++i) in.set(i, 10 * me + i + k);
    hcoll_tensor_t d = in.desc();
    hcoll_request_t req = HCOLL_REQUEST_NULL;
    HCOLL_REQUIRE_OK(hcoll_allgather(world(), "fold.unequal", &d, &req));
    // Rank r's part starts after r(r + 1)/2 elements.
    std::vector<double> want;
    for (int r = 0; r < worldSize(); ++r) {
      for (int i = 0; i <= r; ++i) want.push_back(10.0 * r + i + k);
    }
    HINFO("call " << k);
    HREQUIRE(wrongOutputs(req, [&](int64_t i) {
               return static_cast<size_t>(i) < want.size() ? want[static_cast<size_t>(i)] : -1;
             }) == 0);
  }
  if (worldSize() > 1) HREQUIRE(foldedSoFar() == before);
}

HTEST_CASE("fold: a 2 KiB allreduce folds too", "[fold]") {
  // The largest fold (negotiator.h's kMaxFoldBytes): 512 float32.
  const uint64_t before = foldedSoFar();
  constexpr int kCalls = 20;
  for (int k = 0; k < kCalls; ++k) {
    Tensor t(HCOLL_FLOAT32, {512});
    for (int i = 0; i < 512; ++i) t.set(i, (worldRank() + 1) * (i % 7) + k);
    hcoll_tensor_t d = t.desc();
    hcoll_request_t req = HCOLL_REQUEST_NULL;
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "fold.2k", &d, &d, HCOLL_SUM, 1.0, 1.0, &req));
    HCOLL_REQUIRE_OK(waitAndFree(req));
    const int n = worldSize();
    int wrong = 0;
    for (int i = 0; i < 512; ++i) wrong += t.get(i) != n * (n + 1) / 2.0 * (i % 7) + n * k;
    HINFO("call " << k);
    HREQUIRE(wrong == 0);
  }
  const uint64_t folded = foldedSoFar() - before;
  if (channelFolds()) {
    HREQUIRE(folded >= kCalls / 2);
  } else {
    HREQUIRE(folded == 0);
  }
}

HTEST_CASE("fold: a grouped allgather folds, members of mixed dtypes and rows", "[fold]") {
  // A SyncBatchNorm-like group (a count, a mean, an invstd of another dtype), and members whose
  // rows differ by rank while every rank's total is the same: the headers agree, and each
  // member's rows must come out of every rank's packed part at the negotiated offsets.
  const int n = worldSize();
  const int me = worldRank();
  const uint64_t before = foldedSoFar();
  constexpr int kCalls = 20;
  auto rowsOf = [](int member, int rank) { return member == 3 ? 1 + rank % 2 : 2 - rank % 2; };
  for (int k = 0; k < kCalls; ++k) {
    HINFO("call " << k);
    std::vector<Tensor> ins;
    ins.emplace_back(HCOLL_FLOAT32, std::vector<int64_t>{1});
    ins.emplace_back(HCOLL_FLOAT32, std::vector<int64_t>{1, 16});
    ins.emplace_back(HCOLL_FLOAT64, std::vector<int64_t>{1, 16});
    ins.emplace_back(HCOLL_INT32, std::vector<int64_t>{rowsOf(3, me), 2});
    ins.emplace_back(HCOLL_INT32, std::vector<int64_t>{rowsOf(4, me), 2});
    std::vector<hcoll_tensor_t> ds;
    for (size_t m = 0; m < ins.size(); ++m) {
      for (int64_t i = 0; i < ins[m].elements(); ++i) ins[m].set(i, 1000 * me + 100 * m + i + k);
      ds.push_back(ins[m].desc());
    }
    hcoll_request_t req = HCOLL_REQUEST_NULL;
    HCOLL_REQUIRE_OK(hcoll_grouped_allgather(world(), "fold.group", static_cast<int>(ds.size()),
                                             ds.data(), &req));
    HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
    for (size_t m = 0; m < ins.size(); ++m) {
      hcoll_tensor_t out;
      HCOLL_REQUIRE_OK(hcoll_request_output(req, static_cast<int>(m), &out));
      const int64_t row = m == 0 ? 1 : m < 3 ? 16 : 2;
      int64_t at = 0, wrong = 0;
      for (int r = 0; r < n; ++r) {
        const int64_t rows = m < 3 ? 1 : rowsOf(static_cast<int>(m), r);
        for (int64_t i = 0; i < rows * row; ++i) {
          wrong += outputElement(out, at++) != 1000.0 * r + 100.0 * m + i + k;
        }
      }
      HINFO("member " << m);
      HREQUIRE(at == outputElements(out));
      HREQUIRE(wrong == 0);
    }
    HCOLL_REQUIRE_OK(hcoll_request_free(req));
  }
  const uint64_t folded = foldedSoFar() - before;
  if (channelFolds()) {
    HREQUIRE(folded >= kCalls / 2);
  } else {
    HREQUIRE(folded == 0);
  }
}
