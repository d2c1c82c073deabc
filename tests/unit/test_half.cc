// float16 / bfloat16 conversions (src/common/half.h): exact values, round to nearest even,
// subnormals, overflow, infinities and NaN; every half value round-trips through float.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

#include "common/half.h"

using namespace hcoll;

namespace {

float bitsToFloat(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint32_t floatToBits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

}  // namespace

TEST_CASE("half: exact values", "[half]") {
  REQUIRE(floatToHalf(0.0f) == 0x0000);
  REQUIRE(floatToHalf(-0.0f) == 0x8000);
  REQUIRE(floatToHalf(1.0f) == 0x3c00);
  REQUIRE(floatToHalf(-2.0f) == 0xc000);
  REQUIRE(floatToHalf(0.5f) == 0x3800);
  REQUIRE(floatToHalf(65504.0f) == 0x7bff);  // largest finite
  REQUIRE(floatToHalf(2048.0f) == 0x6800);
  REQUIRE(halfToFloat(0x3c00) == 1.0f);
  REQUIRE(halfToFloat(0x7bff) == 65504.0f);
  REQUIRE(halfToFloat(0xc000) == -2.0f);
  REQUIRE(std::signbit(halfToFloat(0x8000)));
  REQUIRE(halfToFloat(0x3555) == Approx(0.333251953125f));
}

TEST_CASE("half: every half value round-trips through float", "[half]") {
  int wrong = 0;
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    float f = halfToFloat(static_cast<uint16_t>(h));
    bool isNan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff) != 0;
    if (isNan) {
      wrong += !std::isnan(f);
      wrong += !std::isnan(halfToFloat(floatToHalf(f)));
    } else {
      wrong += floatToHalf(f) != h;
    }
  }
  REQUIRE(wrong == 0);
}

TEST_CASE("half: round to nearest, ties to even", "[half]") {
  // Between 1 (0x3c00) and the next half 1 + 2^-10 (0x3c01).
  REQUIRE(floatToHalf(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);  // tie -> even (0x3c00)
  REQUIRE(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);  // tie between 01 and 02 -> 02
  REQUIRE(floatToHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)) == 0x3c01);  // above tie
  REQUIRE(floatToHalf(1.0f + std::ldexp(1.0f, -12)) == 0x3c00);  // below tie
  // 2049 is a tie between 2048 and 2050 -> 2048 (even mantissa); 2051 -> 2052.
  REQUIRE(halfToFloat(floatToHalf(2049.0f)) == 2048.0f);
  REQUIRE(halfToFloat(floatToHalf(2051.0f)) == 2052.0f);
  // Rounding up carries into the exponent.
  REQUIRE(floatToHalf(std::nextafter(2.0f, 0.0f)) == 0x4000);
}

TEST_CASE("half: subnormals", "[half]") {
  const float tiny = std::ldexp(1.0f, -24);  // smallest positive subnormal half
  REQUIRE(floatToHalf(tiny) == 0x0001);
  REQUIRE(halfToFloat(0x0001) == tiny);
  REQUIRE(halfToFloat(0x03ff) == std::ldexp(1023.0f, -24));  // largest subnormal
  REQUIRE(halfToFloat(0x0400) == std::ldexp(1.0f, -14));     // smallest normal
  REQUIRE(floatToHalf(std::ldexp(1.0f, -14)) == 0x0400);
  REQUIRE(floatToHalf(std::ldexp(3.0f, -24)) == 0x0003);
  REQUIRE(floatToHalf(-std::ldexp(5.0f, -24)) == 0x8005);
  // Half of the smallest subnormal is a tie -> 0 (even); a bit more rounds up to it.
  REQUIRE(floatToHalf(std::ldexp(1.0f, -25)) == 0x0000);
  REQUIRE(floatToHalf(std::ldexp(1.5f, -25)) == 0x0001);
  REQUIRE(floatToHalf(std::ldexp(3.0f, -25)) == 0x0002);  // 1.5 ulp tie -> 2 (even)
  REQUIRE(floatToHalf(std::ldexp(1.0f, -30)) == 0x0000);  // underflow to zero
  // A float subnormal maps to zero.
  REQUIRE(floatToHalf(std::numeric_limits<float>::denorm_min()) == 0x0000);
  // Largest subnormal + half an ulp rounds up into the smallest normal.
  REQUIRE(floatToHalf(std::ldexp(1023.5f, -24)) == 0x0400);
}

TEST_CASE("half: overflow, infinity and NaN", "[half]") {
  const float inf = std::numeric_limits<float>::infinity();
  REQUIRE(floatToHalf(inf) == 0x7c00);
  REQUIRE(floatToHalf(-inf) == 0xfc00);
  REQUIRE(floatToHalf(65520.0f) == 0x7c00);  // the tie above 65504 rounds to inf
  REQUIRE(floatToHalf(65519.0f) == 0x7bff);
  REQUIRE(floatToHalf(1e10f) == 0x7c00);
  REQUIRE(floatToHalf(-1e10f) == 0xfc00);
  uint16_t n = floatToHalf(std::numeric_limits<float>::quiet_NaN());
  REQUIRE((n & 0x7c00) == 0x7c00);
  REQUIRE((n & 0x3ff) != 0);
  REQUIRE(std::isinf(halfToFloat(0x7c00)));
  REQUIRE(std::isnan(halfToFloat(0x7e00)));
}

TEST_CASE("bfloat16: exact values, rounding, NaN", "[bfloat16]") {
  REQUIRE(floatToBfloat16(1.0f) == 0x3f80);
  REQUIRE(floatToBfloat16(-2.0f) == 0xc000);
  REQUIRE(bfloat16ToFloat(0x3f80) == 1.0f);
  REQUIRE(bfloat16ToFloat(0x4049) == 3.140625f);
  // 1 + 2^-8 is a tie between 0x3f80 and 0x3f81 -> even 0x3f80; 1 + 3*2^-8 -> 0x3f82.
  REQUIRE(floatToBfloat16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);
  REQUIRE(floatToBfloat16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);
  REQUIRE(floatToBfloat16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -16)) == 0x3f81);
  // Largest finite float rounds to infinity; infinity stays infinity.
  REQUIRE(floatToBfloat16(std::numeric_limits<float>::max()) == 0x7f80);
  REQUIRE(floatToBfloat16(std::numeric_limits<float>::infinity()) == 0x7f80);
  // NaN stays NaN, even one whose payload sits only in the low bits.
  uint16_t n = floatToBfloat16(bitsToFloat(0x7f800001u));
  REQUIRE((n & 0x7f80) == 0x7f80);
  REQUIRE((n & 0x7f) != 0);
  // Subnormal floats keep their top bits.
  REQUIRE(floatToBfloat16(bitsToFloat(0x00010000u)) == 0x0001);
  // Every bfloat16 round-trips.
  int wrong = 0;
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    float f = bfloat16ToFloat(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    wrong += floatToBfloat16(f) != b;
    wrong += floatToBits(f) != (b << 16);
  }
  REQUIRE(wrong == 0);
}
