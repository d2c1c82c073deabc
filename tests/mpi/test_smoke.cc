// One of each collective on the world communicator, and one on a split communicator: the
// quickest check that the runtime works (and the run packaging.timeline traces).
#include "support/test_util.h"

using namespace htest;

TEST_CASE("smoke: one of each collective", "[smoke]") {
  const int r = worldRank();
  const int n = worldSize();
  hcoll_comm_t w = world();
  hcoll_request_t req;

  SECTION("allreduce") {
    Tensor t(HCOLL_FLOAT32, {5});
    for (int i = 0; i < 5; ++i) t.set(i, r + i);
    auto d = t.desc();
    HCOLL_REQUIRE_OK(hcoll_allreduce(w, "ar", &d, &d, HCOLL_SUM, 1.0, 1.0, &req));
    HCOLL_REQUIRE_OK(waitAndFree(req));
    for (int i = 0; i < 5; ++i) REQUIRE(t.get(i) == n * (n - 1) / 2 + n * i);
  }
  SECTION("a small allreduce, again and again") {
    // Cached after the first call, then folded into its rounds' readiness exchange: the
    // timeline check wants those traced too ("ar.again", NEGOTIATE cached, then EXECUTE).
    for (int k = 0; k < 5; ++k) {
      Tensor t(HCOLL_FLOAT64, {1});
      t.set(0, r + k);
      auto d = t.desc();
      HCOLL_REQUIRE_OK(hcoll_allreduce(w, "ar.again", &d, &d, HCOLL_SUM, 1.0, 1.0, &req));
      HCOLL_REQUIRE_OK(waitAndFree(req));
      REQUIRE(t.get(0) == n * (n - 1) / 2 + n * k);
    }
  }
  SECTION("allreduce with a name that is not UTF-8") {
    // Names are bytes: the timeline must still be valid JSON (check_timeline.py parses it and
    // looks for this row as "bad\u00ff\u00fe name" next to the valid "\u00e9" = U+00E9).
    Tensor t(HCOLL_INT32, {2});
    t.set(0, r);
    t.set(1, 1);
    auto d = t.desc();
    HCOLL_REQUIRE_OK(
        hcoll_allreduce(w, "bad\xff\xfe name \xc3\xa9", &d, &d, HCOLL_SUM, 1.0, 1.0, &req));
    HCOLL_REQUIRE_OK(waitAndFree(req));
    REQUIRE(t.get(0) == n * (n - 1) / 2);
    REQUIRE(t.get(1) == n);
  }
  SECTION("allgather") {
    Tensor t(HCOLL_INT32, {r + 1, 2});
    for (int i = 0; i < t.elements(); ++i) t.set(i, r);
    auto d = t.desc();
    HCOLL_REQUIRE_OK(hcoll_allgather(w, "ag", &d, &req));
    HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
    hcoll_tensor_t out;
    HCOLL_REQUIRE_OK(hcoll_request_output(req, 0, &out));
    REQUIRE(out.ndim == 2);
    REQUIRE(out.shape[0] == n * (n + 1) / 2);
    int64_t i = 0;
    for (int src = 0; src < n; ++src) {
      for (int k = 0; k < (src + 1) * 2; ++k) REQUIRE(outputElement(out, i++) == src);
    }
    hcoll_request_free(req);
  }
  SECTION("broadcast") {
    Tensor t(HCOLL_INT64, {3});
    for (int i = 0; i < 3; ++i) t.set(i, r == 1 ? 7 + i : -1);
    auto d = t.desc();
    HCOLL_REQUIRE_OK(hcoll_broadcast(w, "bc", &d, 1, &req));
    HCOLL_REQUIRE_OK(waitAndFree(req));
    for (int i = 0; i < 3; ++i) REQUIRE(t.get(i) == 7 + i);
  }
  SECTION("alltoall") {
    Tensor t(HCOLL_FLOAT64, {n * 2});
    for (int i = 0; i < n * 2; ++i) t.set(i, r * 100 + i);
    auto d = t.desc();
    HCOLL_REQUIRE_OK(hcoll_alltoall(w, "a2a", &d, nullptr, &req));
    HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
    hcoll_tensor_t out;
    HCOLL_REQUIRE_OK(hcoll_request_output(req, 0, &out));
    REQUIRE(out.shape[0] == 2 * n);
    for (int src = 0; src < n; ++src) {
      REQUIRE(outputElement(out, 2 * src) == src * 100 + 2 * r);
      REQUIRE(outputElement(out, 2 * src + 1) == src * 100 + 2 * r + 1);
    }
    const int64_t* splits;
    int count;
    HCOLL_REQUIRE_OK(hcoll_request_received_splits(req, 0, &splits, &count));
    REQUIRE(count == n);
    hcoll_request_free(req);
  }
  SECTION("reducescatter") {
    Tensor t(HCOLL_INT32, {2 * n + 1});
    for (int i = 0; i < t.elements(); ++i) t.set(i, i);
    auto d = t.desc();
    HCOLL_REQUIRE_OK(hcoll_reducescatter(w, "rs", &d, HCOLL_SUM, 1.0, 1.0, &req));
    HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
    hcoll_tensor_t out;
    HCOLL_REQUIRE_OK(hcoll_request_output(req, 0, &out));
    const int64_t rows = 2 + (r < 1 ? 1 : 0);
    REQUIRE(out.shape[0] == rows);
    const int64_t offset = r * 2 + (r < 1 ? r : 1);
    for (int64_t i = 0; i < rows; ++i) REQUIRE(outputElement(out, i) == n * (offset + i));
    hcoll_request_free(req);
  }
  SECTION("barrier and join") {
    HCOLL_REQUIRE_OK(hcoll_barrier(w, &req));
    HCOLL_REQUIRE_OK(waitAndFree(req));
    HCOLL_REQUIRE_OK(hcoll_join(w, &req));
    HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
    hcoll_tensor_t out;
    HCOLL_REQUIRE_OK(hcoll_request_output(req, 0, &out));
    REQUIRE(out.dtype == HCOLL_INT32);
    REQUIRE(outputElement(out, 0) >= 0);
    hcoll_request_free(req);
  }
  SECTION("a split communicator") {
    // Also what the timeline check needs: a second communicator, traced on its own track.
    hcoll_comm_t sub = HCOLL_COMM_NULL;
    HCOLL_REQUIRE_OK(hcoll_comm_split(w, 0, -r, &sub));
    REQUIRE(rankOf(sub) == n - 1 - r);
    Tensor t(HCOLL_INT32, {4});
    for (int i = 0; i < 4; ++i) t.set(i, r * i);
    auto d = t.desc();
    HCOLL_REQUIRE_OK(hcoll_allreduce(sub, "sub.ar", &d, &d, HCOLL_SUM, 1.0, 1.0, &req));
    HCOLL_REQUIRE_OK(waitAndFree(req));
    for (int i = 0; i < 4; ++i) REQUIRE(t.get(i) == i * n * (n - 1) / 2);
    HCOLL_REQUIRE_OK(hcoll_comm_destroy(sub));
  }
  SECTION("grouped allreduce fuses into one backend call") {
    std::vector<Tensor> ts;
    std::vector<hcoll_tensor_t> ds;
    for (int k = 0; k < 10; ++k) ts.emplace_back(HCOLL_FLOAT32, std::vector<int64_t>{16});
    for (int k = 0; k < 10; ++k) {
      for (int i = 0; i < 16; ++i) ts[k].set(i, k + r);
      ds.push_back(ts[k].desc());
    }
    hcoll_comm_stats_t before{HCOLL_COMM_STATS_FIELD_ALL}, after{HCOLL_COMM_STATS_FIELD_ALL};
    HCOLL_REQUIRE_OK(hcoll_comm_stats(w, &before));
    HCOLL_REQUIRE_OK(hcoll_grouped_allreduce(w, "g", 10, ds.data(), ds.data(), HCOLL_SUM, 1.0, 1.0, &req));
    HCOLL_REQUIRE_OK(waitAndFree(req));
    HCOLL_REQUIRE_OK(hcoll_comm_stats(w, &after));
    REQUIRE(after.backend_calls - before.backend_calls == 1);
    for (int k = 0; k < 10; ++k) REQUIRE(ts[k].get(3) == n * k + n * (n - 1) / 2);
  }
}
