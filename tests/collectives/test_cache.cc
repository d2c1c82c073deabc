// The response cache: repeated named operations are served by the bit-vector fast path (cache
// hits, no coordinator round), a changed shape invalidates the entry, and capacity 0 turns the
// cache off without changing any result. Unnamed calls ("<op>.<n>") are cached by shape: the same
// calls in the same order hit, and ranks whose unnamed calls differ are paired by name as
// without the cache (never one call's data with another's).
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/test_util.h"

using namespace htest;

namespace {

struct StepDelta {
  uint64_t hits, slow;
};

// One "training step": `count` named allreduces submitted in a loop, then all waited for.
// Each tensor k holds rank + k; checks the sums and returns how the counters moved.
StepDelta namedStep(const std::string& prefix, int count, int64_t elems) {
  const int r = worldRank(), n = worldSize();
  std::vector<Tensor> ts;
  for (int k = 0; k < count; ++k) ts.emplace_back(HCOLL_FLOAT32, std::vector<int64_t>{elems + k});
  std::vector<hcoll_tensor_t> ds;
  for (int k = 0; k < count; ++k) {
    for (int64_t i = 0; i < ts[k].elements(); ++i) ts[k].set(i, r + k);
    ds.push_back(ts[k].desc());
  }
  auto before = commStats(world());
  std::vector<hcoll_request_t> reqs(count);
  for (int k = 0; k < count; ++k) {
    const std::string name = prefix + "." + std::to_string(k);
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), name.c_str(), &ds[k], &ds[k], HCOLL_SUM, 1.0, 1.0, &reqs[k]));
  }
  for (auto req : reqs) HCOLL_REQUIRE_OK(waitAndFree(req));
  auto after = commStats(world());
  for (int k = 0; k < count; ++k) {
    HREQUIRE(ts[k].get(0) == n * (n - 1) / 2 + n * k);
    HREQUIRE(ts[k].get(ts[k].elements() - 1) == n * (n - 1) / 2 + n * k);
  }
  return {after.cache_hits - before.cache_hits, after.slow_path_negotiations - before.slow_path_negotiations};
}

// One step of unnamed calls: allreduces of `count` sizes, a broadcast and an allgather, each
// tensor holding values that tell the calls apart; checks every result, returns the counters.
StepDelta unnamedStep(int count, int step) {
  const int r = worldRank(), n = worldSize();
  std::vector<std::unique_ptr<Tensor>> ts;
  std::vector<hcoll_request_t> reqs;
  auto before = commStats(world());
  for (int k = 0; k < count; ++k) {
    ts.push_back(std::make_unique<Tensor>(HCOLL_FLOAT32, std::vector<int64_t>{8 + k}));
    for (int64_t i = 0; i < 8 + k; ++i) ts.back()->set(i, r + 10 * k + 1000 * step);
    auto d = ts.back()->desc();
    reqs.emplace_back();
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), nullptr, &d, &d, HCOLL_SUM, 1.0, 1.0, &reqs.back()));
  }
  Tensor bc(HCOLL_INT32, {4});
  for (int64_t i = 0; i < 4; ++i) bc.set(i, r == 0 ? step : -1);
  auto bd = bc.desc();
  reqs.emplace_back();
  HCOLL_REQUIRE_OK(hcoll_broadcast(world(), nullptr, &bd, 0, &reqs.back()));
  Tensor ag(HCOLL_INT32, {2});
  for (int64_t i = 0; i < 2; ++i) ag.set(i, r + step);
  auto agd = ag.desc();
  hcoll_request_t agReq;
  HCOLL_REQUIRE_OK(hcoll_allgather(world(), nullptr, &agd, &agReq));
  for (auto req : reqs) HCOLL_REQUIRE_OK(waitAndFree(req));
  HCOLL_REQUIRE_OK(hcoll_wait(agReq, 30));
  hcoll_tensor_t out;
  HCOLL_REQUIRE_OK(hcoll_request_output(agReq, 0, &out));
  HREQUIRE(outputElements(out) == 2 * n);
  for (int q = 0; q < n; ++q) HREQUIRE(outputElement(out, 2 * q + 1) == q + step);
  hcoll_request_free(agReq);
  auto after = commStats(world());
  for (int k = 0; k < count; ++k) {
    HREQUIRE(ts[k]->get(7 + k) == n * (n - 1) / 2 + n * (10 * k + 1000 * step));
  }
  HREQUIRE(bc.get(3) == step);
  return {after.cache_hits - before.cache_hits,
          after.slow_path_negotiations - before.slow_path_negotiations};
}

// An unnamed float32 allreduce of `elems` elements, all `value`; returns its request.
hcoll_request_t unnamedAllreduce(Tensor& t, float value) {
  for (int64_t i = 0; i < t.elements(); ++i) t.set(i, value);
  auto d = t.desc();
  hcoll_request_t req;
  HCOLL_REQUIRE_OK(hcoll_allreduce(world(), nullptr, &d, &d, HCOLL_SUM, 1.0, 1.0, &req));
  return req;
}

bool cacheDisabled() {
  const char* env = std::getenv("HCOLL_CACHE_CAPACITY");
  return env != nullptr && std::string(env) == "0";
}

}  // namespace

HTEST_CASE("cache: step 2+ of a repeated named loop takes the fast path", "[cache]") {
  if (cacheDisabled()) return;  // covered by the [no_cache] case
  StepDelta first = namedStep("cache.loop", 20, 16);
  HCHECK(first.slow >= 1);  // nothing cached yet: the coordinator negotiated them
  for (int step = 1; step < 5; ++step) {
    HINFO("step " << step);
    StepDelta d = namedStep("cache.loop", 20, 16);
    HCHECK(d.hits == 20);
    HCHECK(d.slow == 0);
  }
}

HTEST_CASE("cache: a changed shape invalidates the entry and still gives right results", "[cache]") {
  if (cacheDisabled()) return;
  namedStep("cache.shape", 4, 8);
  StepDelta same = namedStep("cache.shape", 4, 8);
  HCHECK(same.hits == 4);
  HCHECK(same.slow == 0);
  StepDelta changed = namedStep("cache.shape", 4, 32);  // every member gets a new shape
  HCHECK(changed.hits == 0);
  HCHECK(changed.slow >= 1);
  StepDelta again = namedStep("cache.shape", 4, 32);  // the new shape is cached in turn
  HCHECK(again.hits == 4);
  HCHECK(again.slow == 0);

  // Only one rank changes: the cached response does not match its spec, so it must go to the
  // coordinator, which sees different shapes and reports a mismatch to every rank.
  const int r = worldRank();
  Tensor t(HCOLL_FLOAT32, {r == 0 ? 5 : 32});
  for (int64_t i = 0; i < t.elements(); ++i) t.set(i, 1);
  auto d = t.desc();
  hcoll_request_t req;
  HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "cache.shape.0", &d, &d, HCOLL_SUM, 1.0, 1.0, &req));
  HREQUIRE(waitAndFree(req) == HCOLL_ERR_MISMATCH);
  // And the communicator keeps working with the shape all ranks agree on.
  StepDelta after = namedStep("cache.shape", 4, 32);
  HCHECK(after.slow + after.hits >= 1);
}

HTEST_CASE("cache: grouped operations are cached as one entry", "[cache]") {
  if (cacheDisabled()) return;
  const int r = worldRank(), n = worldSize();
  std::vector<Tensor> ts;
  for (int k = 0; k < 10; ++k) ts.emplace_back(HCOLL_INT32, std::vector<int64_t>{3});
  std::vector<hcoll_tensor_t> ds;
  for (auto& t : ts) ds.push_back(t.desc());
  for (int step = 0; step < 3; ++step) {
    for (int k = 0; k < 10; ++k)
      for (int i = 0; i < 3; ++i) ts[k].set(i, r + k);
    auto before = commStats(world());
    hcoll_request_t req;
    HCOLL_REQUIRE_OK(hcoll_grouped_allreduce(world(), "cache.group", 10, ds.data(), ds.data(),
                                             HCOLL_SUM, 1.0, 1.0, &req));
    HCOLL_REQUIRE_OK(waitAndFree(req));
    auto after = commStats(world());
    for (int k = 0; k < 10; ++k) HREQUIRE(ts[k].get(2) == n * (n - 1) / 2 + n * k);
    if (step > 0) {
      HCHECK(after.cache_hits - before.cache_hits == 1);
      HCHECK(after.slow_path_negotiations == before.slow_path_negotiations);
      HCHECK(after.backend_calls - before.backend_calls == 1);
    }
  }
}

HTEST_CASE("cache: unnamed calls in the same order on every rank take the fast path", "[cache]") {
  if (cacheDisabled()) return;
  StepDelta first = unnamedStep(5, 0);
  HCHECK(first.slow >= 1);
  for (int step = 1; step < 5; ++step) {
    HINFO("step " << step);
    StepDelta d = unnamedStep(5, step);
    HCHECK(d.hits == 7);  // 5 allreduces, the broadcast, the allgather
    HCHECK(d.slow == 0);
  }
}

HTEST_CASE("cache: a burst of unnamed calls of one shape runs in a few rounds, not one each",
           "[cache]") {
  if (cacheDisabled()) return;
  const int r = worldRank(), n = worldSize();
  constexpr int kCalls = 12;
  for (int step = 0; step < 4; ++step) {
    std::vector<std::unique_ptr<Tensor>> ts;
    std::vector<hcoll_request_t> reqs;
    auto before = commStats(world());
    for (int k = 0; k < kCalls; ++k) {
      ts.push_back(std::make_unique<Tensor>(HCOLL_FLOAT32, std::vector<int64_t>{5}));
      reqs.push_back(unnamedAllreduce(*ts.back(), static_cast<float>(r + 100 * k)));
    }
    for (auto req : reqs) HCOLL_REQUIRE_OK(waitAndFree(req));
    auto after = commStats(world());
    for (int k = 0; k < kCalls; ++k) HREQUIRE(ts[k]->get(4) == n * (n - 1) / 2 + n * 100 * k);
    // One slot holds one call of a shape: the others of the burst take the coordinator's round
    // together (fused) instead of a round each.
    HINFO("step " << step);
    HCHECK(after.cycles - before.cycles < kCalls);
  }
}

HTEST_CASE("cache: a rank a call ahead still pairs unnamed calls by name", "[cache]") {
  if (cacheDisabled()) return;
  const int r = worldRank(), n = worldSize();
  Tensor warm(HCOLL_FLOAT32, {6});
  HCOLL_REQUIRE_OK(waitAndFree(unnamedAllreduce(warm, 1)));  // the shape is cached from here on
  HCOLL_REQUIRE_OK(waitAndFree(unnamedAllreduce(warm, 1)));
  for (int step = 0; step < 5; ++step) {
    // Rank 0 submits two calls of the cached shape at once; the others submit the second only
    // after the first completed, a moment later: rounds see rank 0 one call ahead.
    Tensor a(HCOLL_FLOAT32, {6}), b(HCOLL_FLOAT32, {6});
    hcoll_request_t qa = unnamedAllreduce(a, 1.0f + static_cast<float>(r));
    hcoll_request_t qb = 0;
    if (r == 0) qb = unnamedAllreduce(b, 100.0f * static_cast<float>(r + 1));
    HCOLL_REQUIRE_OK(waitAndFree(qa));
    if (r != 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      qb = unnamedAllreduce(b, 100.0f * static_cast<float>(r + 1));
    }
    HCOLL_REQUIRE_OK(waitAndFree(qb));
    HREQUIRE(a.get(5) == n * (n + 1) / 2);
    HREQUIRE(b.get(5) == 100 * n * (n + 1) / 2);
  }
}

HTEST_CASE("cache: ranks whose unnamed calls differ fail with MISMATCH, never swap data",
           "[cache]") {
  if (cacheDisabled()) return;
  const int r = worldRank(), n = worldSize();
  Tensor small(HCOLL_FLOAT32, {4});
  HCOLL_REQUIRE_OK(waitAndFree(unnamedAllreduce(small, 1)));  // shape {4} cached
  HCOLL_REQUIRE_OK(waitAndFree(unnamedAllreduce(small, 1)));
  // Rank 0 makes an extra unnamed call of another shape first: its {4} call is the next name
  // on, so on every rank call <n> pairs {8} with {4} (MISMATCH), although both ranks' {4} calls
  // hit the cache and the slot alone would have paired them.
  Tensor extra(HCOLL_FLOAT32, {8}), mine(HCOLL_FLOAT32, {4});
  hcoll_request_t qExtra = 0;
  if (r == 0) qExtra = unnamedAllreduce(extra, 5);
  hcoll_request_t qMine = unnamedAllreduce(mine, 7);
  if (r == 0) {
    HREQUIRE(waitAndFree(qExtra) == HCOLL_ERR_MISMATCH);
  } else {
    HREQUIRE(waitAndFree(qMine) == HCOLL_ERR_MISMATCH);
    HREQUIRE(mine.get(3) == 7);  // nothing written
    // The other ranks catch up: their next unnamed call pairs with rank 0's pending one.
    qMine = unnamedAllreduce(mine, 9);
  }
  HCOLL_REQUIRE_OK(waitAndFree(qMine));
  HREQUIRE(mine.get(3) == 7 + 9 * (n - 1));
  // And the cache serves the agreed calls again.
  for (int step = 0; step < 3; ++step) {
    auto before = commStats(world());
    HCOLL_REQUIRE_OK(waitAndFree(unnamedAllreduce(small, static_cast<float>(r))));
    HREQUIRE(small.get(3) == n * (n - 1) / 2);
    if (step > 0) HCHECK(commStats(world()).cache_hits - before.cache_hits == 1);
  }
}

// With one slot every new shape evicts the last, so the slot's response changes under the copy
// the negotiator renames for each unnamed replay (Negotiator::renamedReplay): a replay must run
// with the response the slot holds now. Small shapes ride in the readiness exchange (the fold),
// the larger ones (over 256 bytes) do not.
HTEST_CASE("cache: at capacity 1 an unnamed replay follows the response its slot holds now",
           "[.][capacity_one]") {
  const int r = worldRank(), n = worldSize();
  const auto before = commStats(world());
  uint64_t replays = 0;
  for (int pass = 0; pass < 3; ++pass) {
    for (int64_t elems : {5, 7, 100, 130}) {
      // The second call replays the first's response through a new copy (the slot's response
      // changed), the third renames that copy in place.
      for (int call = 0; call < 3; ++call) {
        HINFO("pass " << pass << ", " << elems << " elements, call " << call);
        Tensor t(HCOLL_FLOAT32, {elems});
        HCOLL_REQUIRE_OK(waitAndFree(unnamedAllreduce(t, static_cast<float>(r + 10 * call))));
        for (int64_t i = 0; i < elems; ++i) HREQUIRE(t.get(i) == n * (n - 1) / 2 + 10 * n * call);
        replays += call > 0 ? 1 : 0;
      }
    }
  }
  HCHECK(commStats(world()).cache_hits - before.cache_hits == replays);
}

HTEST_CASE("cache: at capacity 1 an unnamed call whose entry a named call evicted is not replayed",
           "[.][capacity_one]") {
  // The negotiator remembers the last unnamed call's slot while the cache is unchanged: the named
  // call in between replaces the only entry, so the next unnamed call of the same shape must
  // look again (and negotiate), not replay what the slot holds now.
  const int r = worldRank(), n = worldSize();
  for (int pass = 0; pass < 3; ++pass) {
    HINFO("pass " << pass);
    for (int call = 0; call < 2; ++call) {
      Tensor t(HCOLL_FLOAT32, {5});
      HCOLL_REQUIRE_OK(waitAndFree(unnamedAllreduce(t, static_cast<float>(r + call))));
      for (int64_t i = 0; i < 5; ++i) HREQUIRE(t.get(i) == n * (n - 1) / 2 + n * call);
    }
    Tensor named(HCOLL_FLOAT32, {9});
    for (int64_t i = 0; i < 9; ++i) named.set(i, r + 100);
    hcoll_tensor_t d = named.desc();
    hcoll_request_t req = HCOLL_REQUEST_NULL;
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "cache.evicts", &d, &d, HCOLL_SUM, 1.0, 1.0, &req));
    HCOLL_REQUIRE_OK(waitAndFree(req));
    for (int64_t i = 0; i < 9; ++i) HREQUIRE(named.get(i) == n * (n - 1) / 2 + 100 * n);
  }
}

HTEST_CASE("cache: HCOLL_CACHE_CAPACITY=0 turns the cache off and everything still works",
          "[.][no_cache]") {
  HREQUIRE(cacheDisabled());
  for (int step = 0; step < 4; ++step) {
    StepDelta d = namedStep("nocache.loop", 10, 8);
    HCHECK(d.hits == 0);
    HCHECK(d.slow >= 1);  // every step asks the coordinator
  }
  const int r = worldRank(), n = worldSize();
  Tensor t(HCOLL_INT64, {r + 1});
  for (int64_t i = 0; i <= r; ++i) t.set(i, r);
  auto d = t.desc();
  for (int step = 0; step < 3; ++step) {
    hcoll_request_t req;
    HCOLL_REQUIRE_OK(hcoll_allgather(world(), "nocache.ag", &d, &req));
    HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
    hcoll_tensor_t out;
    HCOLL_REQUIRE_OK(hcoll_request_output(req, 0, &out));
    HREQUIRE(outputElements(out) == n * (n + 1) / 2);
    HREQUIRE(outputElement(out, outputElements(out) - 1) == n - 1);
    hcoll_request_free(req);
  }
}
