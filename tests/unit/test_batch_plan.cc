// Batches of a fusible run: cut by the fusion threshold and, for reductions, by dtype; a member
// over the threshold runs alone; threshold 0 runs every member alone. Fusion keys.
#include <catch2/catch.hpp>

#include "runtime/batch_plan.h"

using namespace hcoll;
using namespace hcoll::runtime;
using Batches = std::vector<std::pair<size_t, size_t>>;

namespace {

Batches plan(const std::vector<size_t>& bytes, const std::vector<DataType>& dtypes, bool reduces,
             size_t threshold) {
  Batches out{{7, 7}};  // cleared by planBatches: a reused vector starts afresh
  planBatches(
      bytes.size(), [&](size_t i) { return bytes[i]; }, [&](size_t i) { return dtypes[i]; },
      reduces, threshold, &out);
  return out;
}

}  // namespace

TEST_CASE("batch plan: threshold and dtype cut the batches", "[fusion]") {
  const auto f32 = DataType::kFloat32;
  const auto f64 = DataType::kFloat64;
  REQUIRE(plan({}, {}, true, 100).empty());
  REQUIRE(plan({40, 40, 40}, {f32, f32, f32}, true, 100) == Batches{{0, 2}, {2, 3}});
  REQUIRE(plan({40, 60, 1}, {f32, f32, f32}, true, 100) == Batches{{0, 2}, {2, 3}});
  // A member bigger than the threshold is a batch of its own, wherever it is.
  REQUIRE(plan({10, 500, 10}, {f32, f32, f32}, true, 100) ==
          Batches{{0, 1}, {1, 2}, {2, 3}});
  // Reductions need one dtype per buffer; other kinds do not care.
  REQUIRE(plan({8, 8, 8}, {f32, f64, f64}, true, 100) == Batches{{0, 1}, {1, 3}});
  REQUIRE(plan({8, 8, 8}, {f32, f64, f64}, false, 100) == Batches{{0, 3}});
  // Fusion off: one member per batch, empty members included.
  REQUIRE(plan({0, 4, 0}, {f32, f32, f32}, true, 0) == Batches{{0, 1}, {1, 2}, {2, 3}});
}

TEST_CASE("batch plan: fusion keys", "[fusion]") {
  OpSpec a;
  a.kind = OpKind::kAllreduce;
  OpSpec b = a;
  REQUIRE(sameFusionKey(a, b));
  b.op = ReduceOp::kMax;
  REQUIRE(!sameFusionKey(a, b));
  b = a;
  b.postscale = 0.5;
  REQUIRE(!sameFusionKey(a, b));
  b = a;
  b.device = 0;
  REQUIRE(!sameFusionKey(a, b));
  OpSpec x;
  x.kind = OpKind::kBroadcast;
  OpSpec y = x;
  y.root = 1;
  REQUIRE(!sameFusionKey(x, y));
  y.kind = OpKind::kAllgather;
  x.kind = OpKind::kAllgather;
  REQUIRE(sameFusionKey(x, y));  // root means nothing to an allgather
}
