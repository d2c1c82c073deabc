#include "fusion/pack.h"

#include <cstdint>
#include <limits>
#include <type_traits>

#include "common/copy_bytes.h"
#include "common/half.h"

namespace hcoll::fusion {
namespace {

// Integers are scaled in fp64 and truncated toward zero. A result outside T's range saturates
// and NaN becomes 0, as CUDA's float-to-integer conversion does on the device path (a plain
// cast would be undefined behaviour, e.g. a negative factor on an unsigned type).
template <class T>
T truncateSaturating(double x) {
  constexpr double kLowest = static_cast<double>(std::numeric_limits<T>::lowest());
  // max + 1 is a power of two, exact in a double (int64's max already rounds up to 2^63).
  constexpr double kPastMax = static_cast<double>(std::numeric_limits<T>::max()) + 1.0;
  if (!(x == x)) return 0;
  if (x <= kLowest) return std::numeric_limits<T>::lowest();
  if (x >= kPastMax) return std::numeric_limits<T>::max();
  return static_cast<T>(x);
}

// float32 is scaled in float by the factor rounded to float, as Horovod scales it (so the
// results are bit-identical to Horovod's); float64 and the integers in fp64.
void scaleFloat(void* dst, const void* src, size_t count, double factor) {
  auto* d = static_cast<float*>(dst);
  auto* s = static_cast<const float*>(src);
  const float f = static_cast<float>(factor);
  for (size_t i = 0; i < count; ++i) d[i] = f * s[i];
}

template <class T>
void scaleAs(void* dst, const void* src, size_t count, double factor) {
  auto* d = static_cast<T*>(dst);
  auto* s = static_cast<const T*>(src);
  for (size_t i = 0; i < count; ++i) {
    const double scaled = static_cast<double>(s[i]) * factor;
    if constexpr (std::is_integral_v<T>) {
      d[i] = truncateSaturating<T>(scaled);
    } else {
      d[i] = static_cast<T>(scaled);
    }
  }
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void scaleHalf(void* dst, const void* src, size_t count, double factor) {
  auto* d = static_cast<uint16_t*>(dst);
  auto* s = static_cast<const uint16_t*>(src);
  const float f = static_cast<float>(factor);
  for (size_t i = 0; i < count; ++i) d[i] = FromFloat(ToFloat(s[i]) * f);
}

}  // namespace

void scaleCopy(void* dst, const void* src, size_t count, DataType dtype, double factor) {
  if (factor == 1.0) {
    moveBytes(dst, src, count * dataTypeSize(dtype));
    return;
  }
  switch (dtype) {
    case DataType::kUint8:
      return scaleAs<uint8_t>(dst, src, count, factor);
    case DataType::kInt8:
      return scaleAs<int8_t>(dst, src, count, factor);
    case DataType::kUint16:
      return scaleAs<uint16_t>(dst, src, count, factor);
    case DataType::kInt16:
      return scaleAs<int16_t>(dst, src, count, factor);
    case DataType::kInt32:
      return scaleAs<int32_t>(dst, src, count, factor);
    case DataType::kInt64:
      return scaleAs<int64_t>(dst, src, count, factor);
    case DataType::kFloat16:
      return scaleHalf<halfToFloat, floatToHalf>(dst, src, count, factor);
    case DataType::kBfloat16:
      return scaleHalf<bfloat16ToFloat, floatToBfloat16>(dst, src, count, factor);
    case DataType::kFloat32:
      return scaleFloat(dst, src, count, factor);
    case DataType::kFloat64:
      return scaleAs<double>(dst, src, count, factor);
    case DataType::kBool:
      return;  // rejected at submission: bool is never scaled
  }
}

void normalizeBool(void* data, size_t count) {
  auto* p = static_cast<uint8_t*>(data);
  for (size_t i = 0; i < count; ++i) p[i] = p[i] != 0;
}

}  // namespace hcoll::fusion
