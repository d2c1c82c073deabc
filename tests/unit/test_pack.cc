// Scaled copies into and out of fusion buffers (src/fusion/pack.h): integers are scaled in fp64,
// truncated toward zero and saturated to their range (NaN -> 0), floats scale exactly.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <vector>

#include "fusion/pack.h"

using hcoll::DataType;
using hcoll::fusion::scaleCopy;

namespace {

template <class T>
std::vector<T> scaled(std::vector<T> in, DataType dtype, double factor) {
  std::vector<T> out(in.size());
  scaleCopy(out.data(), in.data(), in.size(), dtype, factor);
  return out;
}

}  // namespace

TEST_CASE("pack: integer scaling truncates toward zero", "[pack]") {
  REQUIRE(scaled<int32_t>({7, -7, 3, 0}, DataType::kInt32, 0.5) ==
          std::vector<int32_t>{3, -3, 1, 0});
  REQUIRE(scaled<int64_t>({10, -10}, DataType::kInt64, 1.0 / 3) == std::vector<int64_t>{3, -3});
}

TEST_CASE("pack: integer scaling saturates instead of overflowing", "[pack]") {
  // A negative factor on an unsigned type, and results past either end of the range.
  REQUIRE(scaled<uint8_t>({200, 3, 0}, DataType::kUint8, 2.0) == std::vector<uint8_t>{255, 6, 0});
  REQUIRE(scaled<uint8_t>({5, 0}, DataType::kUint8, -1.0) == std::vector<uint8_t>{0, 0});
  REQUIRE(scaled<int8_t>({100, -100}, DataType::kInt8, 2.0) == std::vector<int8_t>{127, -128});
  REQUIRE(scaled<uint16_t>({40000}, DataType::kUint16, 2.0) == std::vector<uint16_t>{65535});
  REQUIRE(scaled<int16_t>({-20000}, DataType::kInt16, 2.0) == std::vector<int16_t>{-32768});
  const int32_t i32max = std::numeric_limits<int32_t>::max();
  REQUIRE(scaled<int32_t>({i32max, -i32max}, DataType::kInt32, 4.0) ==
          std::vector<int32_t>{i32max, std::numeric_limits<int32_t>::lowest()});
  const int64_t i64max = std::numeric_limits<int64_t>::max();
  REQUIRE(scaled<int64_t>({i64max / 2, -(i64max / 2)}, DataType::kInt64, 3.0) ==
          std::vector<int64_t>{i64max, std::numeric_limits<int64_t>::lowest()});
  // The largest exactly-representable in-range values stay exact.
  REQUIRE(scaled<int32_t>({i32max / 2}, DataType::kInt32, 2.0) == std::vector<int32_t>{i32max - 1});
}

TEST_CASE("pack: a NaN or infinite factor gives 0 or the range's ends for integers", "[pack]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  REQUIRE(scaled<int32_t>({1, 0}, DataType::kInt32, nan) == std::vector<int32_t>{0, 0});
  REQUIRE(scaled<int16_t>({1, -1}, DataType::kInt16, inf) == std::vector<int16_t>{32767, -32768});
}

TEST_CASE("pack: float scaling and in-place copies", "[pack]") {
  REQUIRE(scaled<float>({1.5f, -2.0f}, DataType::kFloat32, 0.5) ==
          std::vector<float>{0.75f, -1.0f});
  REQUIRE(scaled<double>({3.0, 0.25}, DataType::kFloat64, 4.0) == std::vector<double>{12.0, 1.0});
  std::vector<int32_t> v{1, 2, 3};
  scaleCopy(v.data(), v.data(), v.size(), DataType::kInt32, 3.0);
  REQUIRE(v == std::vector<int32_t>{3, 6, 9});
  scaleCopy(v.data(), v.data(), v.size(), DataType::kInt32, 1.0);  // a factor of 1: untouched
  REQUIRE(v == std::vector<int32_t>{3, 6, 9});
}
