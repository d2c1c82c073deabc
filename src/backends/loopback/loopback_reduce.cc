#include "backends/loopback/loopback_reduce.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/half.h"

namespace hcoll::backends::loopback {
namespace {

// Integers wrap like MPI's: computed in uint64_t (no signed overflow, no promotion of uint16 to
// a signed int that a product could overflow) and truncated to T.
template <class T>
T wrapAdd(T a, T b) {
  return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
template <class T>
T wrapMul(T a, T b) {
  return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// dst = inputs[0]; then dst[i] = combine(dst[i], inputs[k][i]) for every further rank k, one
// input at a time (each input is streamed once).
template <class T, class Combine>
void fold(const std::vector<const void*>& inputs, size_t begin, size_t count, void* dst,
          Combine combine) {
  T* out = static_cast<T*>(dst);
  std::memcpy(out, static_cast<const T*>(inputs[0]) + begin, count * sizeof(T));
  for (size_t k = 1; k < inputs.size(); ++k) {
    const T* in = static_cast<const T*>(inputs[k]) + begin;
    for (size_t i = 0; i < count; ++i) out[i] = combine(out[i], in[i]);
  }
}

template <class T>
void reduceNumbers(ReduceOp op, const std::vector<const void*>& inputs, size_t begin, size_t count,
                   void* dst) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      if constexpr (std::is_integral_v<T>) {
        fold<T>(inputs, begin, count, dst, wrapAdd<T>);
      } else {
        fold<T>(inputs, begin, count, dst, [](T a, T b) { return a + b; });
      }
      return;
    case ReduceOp::kProduct:
      if constexpr (std::is_integral_v<T>) {
        fold<T>(inputs, begin, count, dst, wrapMul<T>);
      } else {
        fold<T>(inputs, begin, count, dst, [](T a, T b) { return a * b; });
      }
      return;
    case ReduceOp::kMin:
      fold<T>(inputs, begin, count, dst, [](T a, T b) { return b < a ? b : a; });
      return;
    case ReduceOp::kMax:
      fold<T>(inputs, begin, count, dst, [](T a, T b) { return a < b ? b : a; });
      return;
    case ReduceOp::kAdasum:  // not element-wise: loopback_pending.cc runs adasum::reduceAll
      return;
  }
}

// 16-bit floats: widen/narrow through float32 (IEEE half or bfloat16).
struct Half {
  static float widen(uint16_t v) { return halfToFloat(v); }
  static uint16_t narrow(float v) { return floatToHalf(v); }
};
struct Bfloat {
  static float widen(uint16_t v) { return bfloat16ToFloat(v); }
  static uint16_t narrow(float v) { return floatToBfloat16(v); }
};

// SUM and PRODUCT in float32, tile by tile, narrowed once per element.
template <class Format>
void reduceWide(ReduceOp op, const std::vector<const void*>& inputs, size_t begin, size_t count,
                void* dst) {
  constexpr size_t kTile = 1024;
  float acc[kTile];
  const bool product = op == ReduceOp::kProduct;
  auto* out = static_cast<uint16_t*>(dst);
  for (size_t t = 0; t < count; t += kTile) {
    const size_t n = std::min(kTile, count - t);
    const uint16_t* first = static_cast<const uint16_t*>(inputs[0]) + begin + t;
    for (size_t i = 0; i < n; ++i) acc[i] = Format::widen(first[i]);
    for (size_t k = 1; k < inputs.size(); ++k) {
      const uint16_t* in = static_cast<const uint16_t*>(inputs[k]) + begin + t;
      if (product) {
        for (size_t i = 0; i < n; ++i) acc[i] *= Format::widen(in[i]);
      } else {
        for (size_t i = 0; i < n; ++i) acc[i] += Format::widen(in[i]);
      }
    }
    for (size_t i = 0; i < n; ++i) out[t + i] = Format::narrow(acc[i]);
  }
}

// MIN and MAX of 16-bit floats: exact, so the winning 16-bit value is kept as it is.
template <class Format>
void reduceHalfOrder(ReduceOp op, const std::vector<const void*>& inputs, size_t begin,
                     size_t count, void* dst) {
  if (op == ReduceOp::kMin) {
    fold<uint16_t>(inputs, begin, count, dst, [](uint16_t a, uint16_t b) {
      return Format::widen(b) < Format::widen(a) ? b : a;
    });
  } else {
    fold<uint16_t>(inputs, begin, count, dst, [](uint16_t a, uint16_t b) {
      return Format::widen(a) < Format::widen(b) ? b : a;
    });
  }
}

template <class Format>
void reduceHalf(ReduceOp op, const std::vector<const void*>& inputs, size_t begin, size_t count,
                void* dst) {
  if (op == ReduceOp::kMin || op == ReduceOp::kMax) {
    reduceHalfOrder<Format>(op, inputs, begin, count, dst);
  } else {
    reduceWide<Format>(op, inputs, begin, count, dst);
  }
}

// Any nonzero byte is true; the result is 0 or 1.
void reduceBool(ReduceOp op, const std::vector<const void*>& inputs, size_t begin, size_t count,
                void* dst) {
  const bool any = op == ReduceOp::kSum || op == ReduceOp::kMax;
  auto* out = static_cast<uint8_t*>(dst);
  const auto* first = static_cast<const uint8_t*>(inputs[0]) + begin;
  for (size_t i = 0; i < count; ++i) out[i] = first[i] != 0;
  for (size_t k = 1; k < inputs.size(); ++k) {
    const auto* in = static_cast<const uint8_t*>(inputs[k]) + begin;
    if (any) {
      for (size_t i = 0; i < count; ++i) out[i] = out[i] | (in[i] != 0);
    } else {
      for (size_t i = 0; i < count; ++i) out[i] = out[i] & (in[i] != 0);
    }
  }
}

}  // namespace

void reduceRange(DataType dtype, ReduceOp op, const std::vector<const void*>& inputs, size_t begin,
                 size_t count, void* dst) {
  if (count == 0 || inputs.empty()) return;
  switch (dtype) {
    case DataType::kUint8:
      return reduceNumbers<uint8_t>(op, inputs, begin, count, dst);
    case DataType::kInt8:
      return reduceNumbers<int8_t>(op, inputs, begin, count, dst);
    case DataType::kUint16:
      return reduceNumbers<uint16_t>(op, inputs, begin, count, dst);
    case DataType::kInt16:
      return reduceNumbers<int16_t>(op, inputs, begin, count, dst);
    case DataType::kInt32:
      return reduceNumbers<int32_t>(op, inputs, begin, count, dst);
    case DataType::kInt64:
      return reduceNumbers<int64_t>(op, inputs, begin, count, dst);
    case DataType::kFloat16:
      return reduceHalf<Half>(op, inputs, begin, count, dst);
    case DataType::kBfloat16:
      return reduceHalf<Bfloat>(op, inputs, begin, count, dst);
    case DataType::kFloat32:
      return reduceNumbers<float>(op, inputs, begin, count, dst);
    case DataType::kFloat64:
      return reduceNumbers<double>(op, inputs, begin, count, dst);
    case DataType::kBool:
      return reduceBool(op, inputs, begin, count, dst);
  }
}

}  // namespace hcoll::backends::loopback
