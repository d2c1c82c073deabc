// The response cache: repeated named operations are served by the bit-vector fast path (cache
// hits, no coordinator round), a changed shape invalidates the entry, and capacity 0 turns the
// cache off without changing any result.
#include <cstdlib>
#include <string>
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
