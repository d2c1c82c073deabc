#pragma once
// Reference computations for the multi-rank collective tests. Inputs are small integers chosen
// per dtype so that every rank's value and every reduction is exactly representable; expected
// results are computed here directly from the SPEC's formulas, never by hcoll.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "support/test_util.h"

namespace htest::ref {

inline const std::vector<hcoll_dtype_t>& allDtypes() {
  static const std::vector<hcoll_dtype_t> kAll = {
      HCOLL_UINT8,   HCOLL_INT8,    HCOLL_UINT16,  HCOLL_INT16,   HCOLL_INT32, HCOLL_INT64,
      HCOLL_FLOAT16, HCOLL_BFLOAT16, HCOLL_FLOAT32, HCOLL_FLOAT64, HCOLL_BOOL};
  return kAll;
}

// `v` rounded once to float16 (11 significant bits) or bfloat16 (8), to nearest, ties to even:
// what a float32 reduction narrowed once must give. Normal range only (what the tests use).
inline double roundToHalfPrecision(hcoll_dtype_t dtype, double v) {
  if (v == 0) return v;
  const int bits = dtype == HCOLL_FLOAT16 ? 11 : 8;
  const double ulp = std::ldexp(1.0, std::ilogb(v) - (bits - 1));
  return std::nearbyint(v / ulp) * ulp;  // the default rounding mode: ties to even
}

inline const std::vector<hcoll_reduce_op_t>& allOps() {
  static const std::vector<hcoll_reduce_op_t> kAll = {HCOLL_SUM, HCOLL_AVERAGE, HCOLL_MIN,
                                                      HCOLL_MAX, HCOLL_PRODUCT};
  return kAll;
}

inline const char* opName(hcoll_reduce_op_t op) {
  static const char* const kNames[] = {"sum", "average", "min", "max", "product"};
  return kNames[op];
}

inline bool isUnsigned(hcoll_dtype_t t) {
  return t == HCOLL_UINT8 || t == HCOLL_UINT16 || t == HCOLL_BOOL;
}
inline bool isFloat(hcoll_dtype_t t) {
  return t == HCOLL_FLOAT16 || t == HCOLL_BFLOAT16 || t == HCOLL_FLOAT32 || t == HCOLL_FLOAT64;
}

// Input element i on rank r. PRODUCT uses 1..3 so that 4 ranks stay within int8 (3^4 = 81); the
// other ops use a range with negatives for signed types so MIN/MAX and truncation toward zero
// are exercised. bool alternates so that OR and AND differ.
inline double value(hcoll_dtype_t t, hcoll_reduce_op_t op, int r, int64_t i) {
  if (t == HCOLL_BOOL) return ((r + i) % 3) == 0 ? 1 : 0;
  if (op == HCOLL_PRODUCT) return static_cast<double>((r + i) % 3 + 1);
  const int64_t v = (r * 5 + i * 3) % 11;  // 0..10
  return isUnsigned(t) ? static_cast<double>(v) : static_cast<double>(v - 5);
}

// Applies a scale factor the way SPEC says: integers in double and truncated toward zero,
// float32 in float by the factor rounded to float (Horovod's formula), float16/bfloat16 rounded
// back to their type (exact for the factors the tests use).
inline double scaled(hcoll_dtype_t t, double x, double factor) {
  if (factor == 1.0) return x;
  if (t == HCOLL_FLOAT32) return static_cast<float>(x) * static_cast<float>(factor);
  double y = x * factor;
  if (!isFloat(t)) return static_cast<double>(static_cast<int64_t>(y));
  if (t == HCOLL_FLOAT32 || t == HCOLL_FLOAT16 || t == HCOLL_BFLOAT16) {
    return static_cast<double>(static_cast<float>(y));
  }
  return y;
}

// The reduction over ranks 0..n-1 of value(t, op, r, i), scaled.
inline double expected(hcoll_dtype_t t, hcoll_reduce_op_t op, int n, int64_t i,
                       double prescale = 1.0, double postscale = 1.0) {
  double acc = 0;
  for (int r = 0; r < n; ++r) {
    double x = scaled(t, value(t, op, r, i), prescale);
    if (r == 0) {
      acc = x;
      continue;
    }
    switch (op) {
      case HCOLL_SUM: case HCOLL_AVERAGE: acc = t == HCOLL_BOOL ? (acc || x) : acc + x; break;
      case HCOLL_MIN: acc = std::min(acc, x); break;
      case HCOLL_MAX: acc = std::max(acc, x); break;
      case HCOLL_PRODUCT: acc = t == HCOLL_BOOL ? (acc && x) : acc * x; break;
    }
  }
  const double post = op == HCOLL_AVERAGE ? postscale / n : postscale;
  return scaled(t, acc, post);
}

// Integers and bool compare exactly; floats within their precision (AVERAGE over 3 ranks is
// not exact in any float type, and float16/bfloat16 results are rounded to their 11/8 bits).
inline bool close(hcoll_dtype_t t, double got, double want) {
  double tol = 0;
  if (t == HCOLL_FLOAT16) tol = 1e-3 * std::max(1.0, std::abs(want));
  if (t == HCOLL_BFLOAT16) tol = 8e-3 * std::max(1.0, std::abs(want));
  if (t == HCOLL_FLOAT32) tol = 1e-6 * std::max(1.0, std::abs(want));
  if (t == HCOLL_FLOAT64) tol = 1e-12 * std::max(1.0, std::abs(want));
  if (t == HCOLL_BOOL) return (got != 0) == (want != 0);
  return std::abs(got - want) <= tol;
}

// Checks every element of `got` (a Tensor or an output) against `want(i)`; reports the first
// wrong element so a failure names the dtype, index and values.
template <class Get, class Want>
void checkAll(hcoll_dtype_t t, int64_t count, Get got, Want want, const std::string& what) {
  int64_t wrong = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (!close(t, got(i), want(i))) {
      if (wrong == 0) {
        HINFO(what << " [" << dtypeName(t) << "] element " << i << ": got " << got(i)
                  << ", want " << want(i));
        HCHECK(false);
      }
      ++wrong;
    }
  }
  HINFO(what << " [" << dtypeName(t) << "]: " << wrong << " wrong of " << count);
  HREQUIRE(wrong == 0);
}

// reducescatter rows of rank r: c_r = floor(d0/N) + (r < d0 mod N), off_r = sum of c below r.
inline int64_t rsCount(int64_t d0, int n, int r) { return d0 / n + (r < d0 % n ? 1 : 0); }
inline int64_t rsOffset(int64_t d0, int n, int r) {
  int64_t off = 0;
  for (int k = 0; k < r; ++k) off += rsCount(d0, n, k);
  return off;
}

}  // namespace htest::ref
