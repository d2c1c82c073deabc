// The Adasum kernels and tree alone (src/common/adasum.h): coefficients (zero vectors included),
// the pairwise formula per dtype, the halving ranges, and reduceAll against an independent
// whole-vector reference at 1..8 ranks; per-tensor dot products in a fused buffer.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/adasum.h"
#include "common/half.h"

using namespace hcoll;
using namespace hcoll::adasum;

namespace {

using Vec = std::vector<double>;

// Written apart from adasum.cc: the formula on whole vectors, Horovod's zero-norm rule.
Vec pairwise(const Vec& a, const Vec& b) {
  double dot = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  const double ca = aa >= std::sqrt(DBL_MIN) ? 1 - dot / (2 * aa) : 1;
  const double cb = bb >= std::sqrt(DBL_MIN) ? 1 - dot / (2 * bb) : 1;
  Vec out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = ca * a[i] + cb * b[i];
  return out;
}

Vec referenceTree(std::vector<Vec> v) {
  size_t p = 1;
  while (p * 2 <= v.size()) p *= 2;
  for (size_t e = p; e < v.size(); ++e) v[e - p] = pairwise(v[e - p], v[e]);
  for (size_t d = 1; d < p; d *= 2) {
    for (size_t r = 0; r < p; r += 2 * d) v[r] = pairwise(v[r], v[r + d]);
  }
  return v[0];
}

Vec input(int rank, size_t count, double scale, double shift) {
  Vec v(count);
  for (size_t i = 0; i < count; ++i) {
    v[i] = scale * (std::sin(0.9 * rank + 0.37 * static_cast<double>(i)) + shift);
  }
  return v;
}

Vec runTree(const std::vector<Vec>& inputs, const std::vector<size_t>& tensorCounts) {
  std::vector<const void*> ptrs;
  for (const Vec& v : inputs) ptrs.push_back(v.data());
  Vec out(inputs[0].size());
  reduceAll(DataType::kFloat64, ptrs, out.size(), tensorCounts, out.data());
  return out;
}

double maxError(const Vec& got, const Vec& want) {
  double e = 0;
  for (size_t i = 0; i < got.size(); ++i) e = std::max(e, std::abs(got[i] - want[i]));
  return e;
}

}  // namespace

TEST_CASE("adasum: coefficients, zero vectors included", "[adasum]") {
  // Identical vectors: a.b = |a|^2, both coefficients 1/2, adasum(a, a) = a.
  Coefficients same = coefficients(Dots{4, 4, 4});
  REQUIRE(same.left == 0.5);
  REQUIRE(same.right == 0.5);
  // Orthogonal vectors: a plain sum.
  Coefficients orth = coefficients(Dots{0, 4, 9});
  REQUIRE(orth.left == 1);
  REQUIRE(orth.right == 1);
  // 0/0: a zero vector's coefficient is 1 (Horovod's sqrt(DBL_MIN) threshold), never NaN.
  Coefficients zero = coefficients(Dots{0, 0, 0});
  REQUIRE(zero.left == 1);
  REQUIRE(zero.right == 1);
  Coefficients oneZero = coefficients(Dots{0, 2, 0});
  REQUIRE(oneZero.left == 1);
  REQUIRE(oneZero.right == 1);
  REQUIRE(coefficients(Dots{-2, 4, 1}).left == 1.25);
  REQUIRE(coefficients(Dots{-2, 4, 1}).right == 2.0);
}

TEST_CASE("adasum: the pairwise formula in every float dtype", "[adasum]") {
  const float a[] = {1.0f, 2.0f, -0.5f, 0.25f};
  const float b[] = {0.5f, -1.0f, 3.0f, 0.0f};
  const Vec want = pairwise(Vec(a, a + 4), Vec(b, b + 4));
  SECTION("float32 and float64 combine in double, dst aliasing an operand") {
    float out[4];
    std::memcpy(out, a, sizeof a);
    const Dots d = dots(DataType::kFloat32, a, b, 4);
    REQUIRE(d.dot == 1.0 * 0.5 - 2.0 - 1.5);
    combine(DataType::kFloat32, out, out, b, 4, coefficients(d));
    for (int i = 0; i < 4; ++i) REQUIRE(out[i] == static_cast<float>(want[i]));
    double x[4], y[4];
    for (int i = 0; i < 4; ++i) x[i] = a[i], y[i] = b[i];
    combine(DataType::kFloat64, y, x, y, 4, coefficients(dots(DataType::kFloat64, x, y, 4)));
    for (int i = 0; i < 4; ++i) REQUIRE(y[i] == want[i]);
  }
  SECTION("float16 and bfloat16 through float32, rounded once") {
    for (DataType t : {DataType::kFloat16, DataType::kBfloat16}) {
      const bool half = t == DataType::kFloat16;
      uint16_t x[4], y[4], out[4];
      for (int i = 0; i < 4; ++i) {
        x[i] = half ? floatToHalf(a[i]) : floatToBfloat16(a[i]);
        y[i] = half ? floatToHalf(b[i]) : floatToBfloat16(b[i]);
      }
      const Coefficients c = coefficients(dots(t, x, y, 4));
      combine(t, out, x, y, 4, c);
      for (int i = 0; i < 4; ++i) {
        const float f = static_cast<float>(c.left) * a[i] + static_cast<float>(c.right) * b[i];
        REQUIRE(out[i] == (half ? floatToHalf(f) : floatToBfloat16(f)));
      }
    }
  }
  REQUIRE(supports(DataType::kFloat16));
  REQUIRE(supports(DataType::kBfloat16));
  REQUIRE_FALSE(supports(DataType::kInt32));
  REQUIRE_FALSE(supports(DataType::kBool));
}

TEST_CASE("adasum: the halving ranges partition the vector at every level", "[adasum]") {
  for (size_t count : {0u, 1u, 2u, 3u, 7u, 1000u}) {
    for (int levels = 0; levels <= 3; ++levels) {
      std::vector<int> owner(count, -1);
      for (int r = 0; r < (1 << levels); ++r) {
        const Range k = keptRange(count, r, levels);
        for (size_t i = k.begin; i < k.end(); ++i) {
          REQUIRE(owner[i] == -1);
          owner[i] = r;
        }
        if (levels > 0) {  // a rank and its last partner split the range they both held
          const Range before = keptRange(count, r, levels - 1);
          const Range partner = keptRange(count, r ^ (1 << (levels - 1)), levels);
          REQUIRE(k.count + partner.count == before.count);
        }
      }
      for (int o : owner) REQUIRE(o >= 0);
    }
  }
  REQUIRE(Tree(3).power == 2);
  REQUIRE(Tree(3).foldPartner(2) == 0);
  REQUIRE(Tree(3).foldPartner(0) == 2);
  REQUIRE(Tree(3).foldPartner(1) == -1);
  REQUIRE(Tree(8).levels == 3);
  REQUIRE(Tree(1).levels == 0);
}

TEST_CASE("adasum: the tree equals the whole-vector reference at 1 to 8 ranks", "[adasum]") {
  for (int n = 1; n <= 8; ++n) {
    for (size_t count : {1u, 5u, 64u, 1001u}) {
      std::vector<Vec> inputs;
      for (int r = 0; r < n; ++r) inputs.push_back(input(r, count, 1.0 + r, 0.2));
      const Vec got = runTree(inputs, {count});
      INFO(n << " ranks, " << count << " elements");
      REQUIRE(maxError(got, referenceTree(inputs)) < 1e-12 * (n + 1) * 4);
    }
  }
}

TEST_CASE("adasum: a fused buffer keeps dot products per tensor", "[adasum]") {
  // Three tensors with different norms and directions: identical on every rank, independent,
  // and opposed. Reduced fused they must equal each reduced alone; fused into one "tensor"
  // (dot products across the boundaries) they must not.
  const std::vector<size_t> counts = {40, 101, 13};
  for (int n : {2, 3, 4}) {
    std::vector<Vec> inputs(static_cast<size_t>(n));
    std::vector<std::vector<Vec>> perTensor(counts.size(),
                                            std::vector<Vec>(static_cast<size_t>(n)));
    for (int r = 0; r < n; ++r) {
      perTensor[0][r] = input(0, counts[0], 3.0, 0.5);
      perTensor[1][r] = input(r, counts[1], 100.0, 0.0);
      perTensor[2][r] = input(0, counts[2], r % 2 ? -0.01 : 0.02, 1.0);
      for (size_t t = 0; t < counts.size(); ++t) {
        inputs[r].insert(inputs[r].end(), perTensor[t][r].begin(), perTensor[t][r].end());
      }
    }
    const Vec fused = runTree(inputs, counts);
    Vec separate;
    for (size_t t = 0; t < counts.size(); ++t) {
      const Vec one = referenceTree(perTensor[t]);
      separate.insert(separate.end(), one.begin(), one.end());
    }
    INFO(n << " ranks");
    REQUIRE(maxError(fused, separate) < 1e-9);
    REQUIRE(maxError(runTree(inputs, {fused.size()}), separate) > 1e-3);
    // Tensor 0 is the same everywhere: adasum(a, a) = a.
    for (size_t i = 0; i < counts[0]; ++i) REQUIRE(fused[i] == Approx(inputs[0][i]));
  }
}

TEST_CASE("adasum: zero vectors are the identity", "[adasum]") {
  const size_t count = 50;
  for (int n : {2, 3, 5}) {
    std::vector<Vec> inputs(static_cast<size_t>(n), Vec(count, 0.0));
    REQUIRE(runTree(inputs, {count}) == Vec(count, 0.0));  // 0/0 gives 0, never NaN
    inputs[1] = input(1, count, 2.0, 0.1);
    REQUIRE(runTree(inputs, {count}) == inputs[1]);  // adasum(a, 0) = a exactly
  }
}
