#include "common/adasum.h"

#include <algorithm>
#include <cassert>
#include <cfloat>
#include <cmath>

#include "common/copy_bytes.h"
#include "common/half.h"

namespace hcoll::adasum {
namespace {

// Element access per dtype: read as the type arithmetic is done in, write back rounding once.
struct F32 {
  using Stored = float;
  using Compute = double;
  static double load(float v) { return v; }
  static float store(double v) { return static_cast<float>(v); }
  static double coefficient(double c) { return c; }
};
struct F64 {
  using Stored = double;
  using Compute = double;
  static double load(double v) { return v; }
  static double store(double v) { return v; }
  static double coefficient(double c) { return c; }
};
struct F16 {
  using Stored = uint16_t;
  using Compute = float;
  static float load(uint16_t v) { return halfToFloat(v); }
  static uint16_t store(float v) { return floatToHalf(v); }
  static float coefficient(double c) { return static_cast<float>(c); }
};
struct BF16 {
  using Stored = uint16_t;
  using Compute = float;
  static float load(uint16_t v) { return bfloat16ToFloat(v); }
  static uint16_t store(float v) { return floatToBfloat16(v); }
  static float coefficient(double c) { return static_cast<float>(c); }
};

// Four interleaved partial sums per quantity (element i in lane i % 4, the tail in lane 0),
// added as (0 + 1) + (2 + 3): one chain of dependent additions was latency-bound (a 128 KiB
// slice took longer than moving it). The order is fixed here, so every rank and every backend
// adds in the same order.
constexpr size_t kLanes = 4;

template <typename A>
Dots dotsOf(const void* left, const void* right, size_t n) {
  const auto* a = static_cast<const typename A::Stored*>(left);
  const auto* b = static_cast<const typename A::Stored*>(right);
  double dot[kLanes] = {}, aa[kLanes] = {}, bb[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t l = 0; l < kLanes; ++l) {
      const double x = static_cast<double>(A::load(a[i + l]));
      const double y = static_cast<double>(A::load(b[i + l]));
      dot[l] += x * y;
      aa[l] += x * x;
      bb[l] += y * y;
    }
  }
  for (; i < n; ++i) {
    const double x = static_cast<double>(A::load(a[i]));
    const double y = static_cast<double>(A::load(b[i]));
    dot[0] += x * y;
    aa[0] += x * x;
    bb[0] += y * y;
  }
  auto total = [](const double* s) { return (s[0] + s[1]) + (s[2] + s[3]); };
  return Dots{total(dot), total(aa), total(bb)};
}

// No __restrict__: dst is one of the operands.
template <typename A>
void combineOf(void* dst, const void* left, const void* right, size_t n, const Coefficients& c) {
  const auto* a = static_cast<const typename A::Stored*>(left);
  const auto* b = static_cast<const typename A::Stored*>(right);
  auto* out = static_cast<typename A::Stored*>(dst);
  const typename A::Compute cl = A::coefficient(c.left);
  const typename A::Compute cr = A::coefficient(c.right);
  for (size_t i = 0; i < n; ++i) {
    const typename A::Compute x = cl * A::load(a[i]);
    const typename A::Compute y = cr * A::load(b[i]);
    out[i] = A::store(x + y);
  }
}

template <typename Fn>
auto dispatch(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kFloat16:
      return fn(F16{});
    case DataType::kBfloat16:
      return fn(BF16{});
    case DataType::kFloat64:
      return fn(F64{});
    default:
      assert(dtype == DataType::kFloat32);
      return fn(F32{});
  }
}

}  // namespace

bool supports(DataType dtype) {
  return dtype == DataType::kFloat16 || dtype == DataType::kBfloat16 ||
         dtype == DataType::kFloat32 || dtype == DataType::kFloat64;
}

Coefficients coefficients(const Dots& sums) {
  // Horovod's threshold: a squared norm this small is a zero vector (or underflows to one).
  static const double kZeroNormSq = std::sqrt(DBL_MIN);
  Coefficients c;
  if (sums.leftSq >= kZeroNormSq) c.left = 1.0 - sums.dot / sums.leftSq * 0.5;
  if (sums.rightSq >= kZeroNormSq) c.right = 1.0 - sums.dot / sums.rightSq * 0.5;
  return c;
}

Dots dots(DataType dtype, const void* left, const void* right, size_t n) {
  return dispatch(dtype, [&](auto a) { return dotsOf<decltype(a)>(left, right, n); });
}

void combine(DataType dtype, void* dst, const void* left, const void* right, size_t n,
             const Coefficients& c) {
  dispatch(dtype, [&](auto a) {
    combineOf<decltype(a)>(dst, left, right, n, c);
    return 0;
  });
}

Tree::Tree(int n) : size(n), power(1), levels(0) {
  while (power * 2 <= size) {
    power *= 2;
    ++levels;
  }
}

int Tree::foldPartner(int rank) const {
  if (rank >= power) return rank - power;
  if (rank + power < size) return rank + power;
  return -1;
}

Range keptRange(size_t count, int rank, int levelsDone) {
  Range r{0, count};
  for (int k = 0; k < levelsDone; ++k) {
    const size_t first = r.count / 2;
    if ((rank >> k) & 1) {
      r.begin += first;
      r.count -= first;
    } else {
      r.count = first;
    }
  }
  return r;
}

std::vector<size_t> tensorOffsets(const std::vector<size_t>& tensorCounts) {
  std::vector<size_t> offsets(tensorCounts.size() + 1, 0);
  for (size_t t = 0; t < tensorCounts.size(); ++t) offsets[t + 1] = offsets[t] + tensorCounts[t];
  return offsets;
}

namespace {

// Calls fn(t, first, n) for each tensor t with n > 0 elements inside `range`, `first` counted
// from range.begin.
template <typename Fn>
void forEachPiece(const Range& range, const std::vector<size_t>& offsets, Fn&& fn) {
  for (size_t t = 0; t + 1 < offsets.size(); ++t) {
    const size_t lo = std::max(range.begin, offsets[t]);
    const size_t hi = std::min(range.end(), offsets[t + 1]);
    if (lo < hi) fn(t, lo - range.begin, hi - lo);
  }
}

}  // namespace

void rangeDots(DataType dtype, const void* left, const void* right, const Range& range,
               const std::vector<size_t>& offsets, Dots* out) {
  const size_t es = dataTypeSize(dtype);
  const auto* a = static_cast<const uint8_t*>(left);
  const auto* b = static_cast<const uint8_t*>(right);
  std::fill(out, out + (offsets.size() - 1), Dots{});
  forEachPiece(range, offsets, [&](size_t t, size_t first, size_t n) {
    out[t] = dots(dtype, a + first * es, b + first * es, n);
  });
}

void rangeCombine(DataType dtype, void* dst, const void* left, const void* right,
                  const Range& range, const std::vector<size_t>& offsets, const Dots* sums) {
  const size_t es = dataTypeSize(dtype);
  auto* d = static_cast<uint8_t*>(dst);
  const auto* a = static_cast<const uint8_t*>(left);
  const auto* b = static_cast<const uint8_t*>(right);
  forEachPiece(range, offsets, [&](size_t t, size_t first, size_t n) {
    combine(dtype, d + first * es, a + first * es, b + first * es, n, coefficients(sums[t]));
  });
}

namespace {

// The sum of partials[begin, begin + n) (n a power of two) as the recursive doubling forms it:
// both halves first, lower half on the left.
void treeSum(const std::vector<std::vector<Dots>>& partials, size_t begin, size_t n,
             std::vector<Dots>* out) {
  if (n == 1) {
    *out = partials[begin];
    return;
  }
  std::vector<Dots> higher;
  treeSum(partials, begin, n / 2, out);
  treeSum(partials, begin + n / 2, n / 2, &higher);
  for (size_t t = 0; t < out->size(); ++t) (*out)[t] = add((*out)[t], higher[t]);
}

}  // namespace

void reduceAll(DataType dtype, const std::vector<const void*>& inputs, size_t count,
               const std::vector<size_t>& tensorCounts, void* out) {
  const int size = static_cast<int>(inputs.size());
  const size_t es = dataTypeSize(dtype);
  const size_t bytes = count * es;
  const std::vector<size_t> offsets = tensorOffsets(tensorCounts);
  const size_t tensors = tensorCounts.size();
  const Tree tree(size);
  const Range whole{0, count};
  std::vector<std::vector<uint8_t>> v(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    v[r].resize(bytes);
    copyBytes(v[r].data(), inputs[static_cast<size_t>(r)], bytes);
  }
  std::vector<Dots> sums(tensors);
  for (int e = tree.power; e < size; ++e) {  // 1. fold
    uint8_t* own = v[static_cast<size_t>(e - tree.power)].data();
    rangeDots(dtype, own, v[static_cast<size_t>(e)].data(), whole, offsets, sums.data());
    rangeCombine(dtype, own, own, v[static_cast<size_t>(e)].data(), whole, offsets, sums.data());
  }
  const auto p = static_cast<size_t>(tree.power);
  std::vector<std::vector<Dots>> partials(p, std::vector<Dots>(tensors));
  for (int k = 0; k < tree.levels; ++k) {  // 2. halving; every rank's piece, then their sums
    const int bit = 1 << k;
    for (int r = 0; r < tree.power; ++r) {
      const Range kept = keptRange(count, r, k + 1);
      const size_t at = kept.begin * es;
      rangeDots(dtype, v[static_cast<size_t>(r & ~bit)].data() + at,
                v[static_cast<size_t>(r | bit)].data() + at, kept, offsets,
                partials[static_cast<size_t>(r)].data());
    }
    const size_t group = static_cast<size_t>(bit) * 2;
    for (size_t g = 0; g < p; g += group) {
      treeSum(partials, g, group, &sums);
      for (size_t r = g; r < g + group; ++r) {
        const Range kept = keptRange(count, static_cast<int>(r), k + 1);
        const size_t at = kept.begin * es;
        // Each rank writes only its own kept range, which its partner does not read.
        rangeCombine(dtype, v[r].data() + at, v[r & ~static_cast<size_t>(bit)].data() + at,
                     v[r | static_cast<size_t>(bit)].data() + at, kept, offsets, sums.data());
      }
    }
  }
  auto* result = static_cast<uint8_t*>(out);  // 3. every rank's final piece
  for (int r = 0; r < tree.power; ++r) {
    const Range kept = keptRange(count, r, tree.levels);
    if (kept.count != 0) {
      moveBytes(result + kept.begin * es, v[static_cast<size_t>(r)].data() + kept.begin * es,
                kept.count * es);
    }
  }
}

}  // namespace hcoll::adasum
