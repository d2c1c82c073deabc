// The host reduction library (common/reduce.h), which every host backend reduces with: every
// builtin type with sum, product, min and max against a reference computed one element at a time
// (integer wrap-around included), counts that exercise the vector loop's tail; the NaN and
// signed-zero rules of MIN/MAX for every float type in either operand order and with the NaN on
// each input in turn; float16/bfloat16 sums that round once.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/half.h"
#include "common/reduce.h"

namespace {

using hcoll::DataType;
using hcoll::reduceInputs;
using hcoll::reduceInto;
using hcoll::ReduceOp;

// The reference: two's complement wrap-around for integers (computed in 64-bit unsigned), IEEE
// arithmetic for floats.
template <typename T>
T reference(ReduceOp op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    const auto x = static_cast<uint64_t>(a), y = static_cast<uint64_t>(b);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        return static_cast<T>(x + y);
      case ReduceOp::kProduct:
        return static_cast<T>(x * y);
      case ReduceOp::kMin:
        return a < b ? a : b;
      case ReduceOp::kMax:
        return a < b ? b : a;
    }
  } else {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        return a + b;
      case ReduceOp::kProduct:
        return a * b;
      default:
        break;
    }
  }
  return T{};
}

template <typename T>
void checkType(DataType dtype) {
  std::mt19937_64 rng(7);
  for (ReduceOp op :
       {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax}) {
    if (!std::is_integral_v<T> && (op == ReduceOp::kMin || op == ReduceOp::kMax)) {
      continue;  // the float MIN/MAX rules have their own cases below
    }
    for (size_t count : {size_t{1}, size_t{7}, size_t{33}, size_t{1000}, size_t{4099}}) {
      std::vector<T> in(count), inout(count), want(count);
      for (size_t i = 0; i < count; ++i) {
        if constexpr (std::is_integral_v<T>) {
          // Near the limits too: sums and products wrap.
          in[i] = static_cast<T>(rng());
          inout[i] = i % 3 == 0 ? std::numeric_limits<T>::max() : static_cast<T>(rng());
        } else {
          in[i] = static_cast<T>(std::uniform_real_distribution<double>(-1e3, 1e3)(rng));
          inout[i] = static_cast<T>(std::uniform_real_distribution<double>(-1e3, 1e3)(rng));
        }
        want[i] = reference(op, in[i], inout[i]);
      }
      reduceInto(dtype, op, in.data(), inout.data(), count);
      INFO("dtype " << static_cast<int>(dtype) << " op " << static_cast<int>(op) << " count "
                    << count);
      CHECK(inout == want);
    }
  }
}

}  // namespace

TEST_CASE("host reductions: the loops equal element-by-element arithmetic", "[reduce]") {
  checkType<uint8_t>(DataType::kUint8);
  checkType<int8_t>(DataType::kInt8);
  checkType<uint16_t>(DataType::kUint16);
  checkType<int16_t>(DataType::kInt16);
  checkType<int32_t>(DataType::kInt32);
  checkType<int64_t>(DataType::kInt64);
  checkType<float>(DataType::kFloat32);
  checkType<double>(DataType::kFloat64);
}

namespace {

// One element of `dtype` from a double, and back (16-bit floats through their conversions).
std::vector<uint8_t> encode(DataType dtype, double v) {
  std::vector<uint8_t> bytes(hcoll::dataTypeSize(dtype));
  switch (dtype) {
    case DataType::kFloat16: {
      const uint16_t h = hcoll::floatToHalf(static_cast<float>(v));
      std::memcpy(bytes.data(), &h, 2);
      break;
    }
    case DataType::kBfloat16: {
      const uint16_t b = hcoll::floatToBfloat16(static_cast<float>(v));
      std::memcpy(bytes.data(), &b, 2);
      break;
    }
    case DataType::kFloat32: {
      const auto f = static_cast<float>(v);
      std::memcpy(bytes.data(), &f, 4);
      break;
    }
    default:
      std::memcpy(bytes.data(), &v, 8);
      break;
  }
  return bytes;
}

double decode(DataType dtype, const std::vector<uint8_t>& bytes) {
  uint16_t h = 0;
  float f = 0;
  double d = 0;
  switch (dtype) {
    case DataType::kFloat16:
      std::memcpy(&h, bytes.data(), 2);
      return hcoll::halfToFloat(h);
    case DataType::kBfloat16:
      std::memcpy(&h, bytes.data(), 2);
      return hcoll::bfloat16ToFloat(h);
    case DataType::kFloat32:
      std::memcpy(&f, bytes.data(), 4);
      return f;
    default:
      std::memcpy(&d, bytes.data(), 8);
      return d;
  }
}

constexpr DataType kFloatTypes[] = {DataType::kFloat16, DataType::kBfloat16, DataType::kFloat32,
                                    DataType::kFloat64};

}  // namespace

TEST_CASE("host reductions: MIN/MAX propagate NaN and order -0 below +0, in either order",
          "[reduce][nan]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Pair {
    double a, b;
    double min, max;  // NaN: a NaN
  };
  const Pair pairs[] = {{1.0, nan, nan, nan},
                        {nan, 1.0, nan, nan},
                        {-0.0, 0.0, -0.0, 0.0},
                        {0.0, -0.0, -0.0, 0.0},
                        {-2.0, 3.0, -2.0, 3.0},
                        {nan, nan, nan, nan},
                        {-std::numeric_limits<double>::infinity(), nan, nan, nan}};
  for (DataType dtype : kFloatTypes) {
    for (const Pair& p : pairs) {
      for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
        auto inout = encode(dtype, p.a);
        const auto in = encode(dtype, p.b);
        reduceInto(dtype, op, in.data(), inout.data(), 1);
        const double want = op == ReduceOp::kMin ? p.min : p.max;
        const double got = decode(dtype, inout);
        INFO("dtype " << static_cast<int>(dtype) << " op " << static_cast<int>(op) << " a " << p.a
                      << " b " << p.b << " got " << got);
        if (std::isnan(want)) {
          CHECK(std::isnan(got));
          // The canonical NaN whichever operand held which: every rank gets the same bits.
          auto swapped = encode(dtype, p.b);
          const auto other = encode(dtype, p.a);
          reduceInto(dtype, op, other.data(), swapped.data(), 1);
          CHECK(swapped == inout);
        } else {
          CHECK(got == want);
          CHECK(std::signbit(got) == std::signbit(want));
        }
      }
    }
  }
}

TEST_CASE("host reductions: over several inputs the NaN or -0 may be on any input",
          "[reduce][nan]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DataType dtype : kFloatTypes) {
    const size_t width = hcoll::dataTypeSize(dtype);
    for (size_t ranks : {size_t{2}, size_t{3}, size_t{5}}) {
      for (size_t holder = 0; holder < ranks; ++holder) {
        // Element 0: NaN on the holder, 1 elsewhere; element 1: -0 on the holder, +0 elsewhere.
        std::vector<std::vector<uint8_t>> storage(ranks);
        std::vector<const void*> inputs;
        for (size_t k = 0; k < ranks; ++k) {
          for (double v : {k == holder ? nan : 1.0, k == holder ? -0.0 : 0.0}) {
            const auto e = encode(dtype, v);
            storage[k].insert(storage[k].end(), e.begin(), e.end());
          }
        }
        for (auto& s : storage) inputs.push_back(s.data());
        for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
          std::vector<uint8_t> out(2 * width);
          reduceInputs(dtype, op, inputs, 0, 2, out.data());
          const double first = decode(dtype, {out.begin(), out.begin() + width});
          const double second = decode(dtype, {out.begin() + width, out.end()});
          INFO("dtype " << static_cast<int>(dtype) << " ranks " << ranks << " holder " << holder);
          CHECK(std::isnan(first));
          CHECK(second == 0.0);
          CHECK(std::signbit(second) == (op == ReduceOp::kMin));
        }
      }
    }
  }
}

TEST_CASE("host reductions: 16-bit float sums over several inputs round once", "[reduce]") {
  // 2048 + 1 + 1 in float16: rounding after each step gives 2048 (2049 is not representable),
  // once at the end 2050.
  for (DataType dtype : {DataType::kFloat16, DataType::kBfloat16}) {
    const double big = dtype == DataType::kFloat16 ? 2048.0 : 256.0;
    const auto a = encode(dtype, big), one = encode(dtype, 1.0);
    std::vector<const void*> inputs = {a.data(), one.data(), one.data()};
    std::vector<uint8_t> out(2);
    reduceInputs(dtype, ReduceOp::kSum, inputs, 0, 1, out.data());
    CHECK(decode(dtype, out) == big + 2);
    // The pairwise step rounds after each addition.
    auto pairwise = a;
    reduceInto(dtype, ReduceOp::kSum, one.data(), pairwise.data(), 1);
    reduceInto(dtype, ReduceOp::kSum, one.data(), pairwise.data(), 1);
    CHECK(decode(dtype, pairwise) == big);
  }
}

TEST_CASE("host reductions: bool is OR/AND of nonzero bytes, giving 0 or 1", "[reduce]") {
  const std::vector<uint8_t> a = {0, 7, 0, 200}, b = {0, 0, 3, 1};
  std::vector<const void*> inputs = {a.data(), b.data()};
  std::vector<uint8_t> out(4);
  reduceInputs(DataType::kBool, ReduceOp::kSum, inputs, 0, 4, out.data());
  CHECK(out == std::vector<uint8_t>{0, 1, 1, 1});
  reduceInputs(DataType::kBool, ReduceOp::kMin, inputs, 0, 4, out.data());
  CHECK(out == std::vector<uint8_t>{0, 0, 0, 1});
  // One input is normalized too.
  reduceInputs(DataType::kBool, ReduceOp::kMax, {a.data()}, 0, 4, out.data());
  CHECK(out == std::vector<uint8_t>{0, 1, 0, 1});
}
