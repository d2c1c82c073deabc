#include "common/types.h"

#include "common/op_traits.h"

#include <cassert>
#include <limits>

namespace hcoll {

const char* dataTypeName(DataType t) {
  static const char* const kNames[] = {"uint8",   "int8",     "uint16",  "int16",
                                       "int32",   "int64",    "float16", "bfloat16",
                                       "float32", "float64",  "bool"};
  auto i = static_cast<int>(t);
  return i < kNumDataTypes ? kNames[i] : "?";
}

const char* reduceOpName(ReduceOp op) {
  static const char* const kNames[] = {"sum", "average", "min", "max", "product", "adasum"};
  auto i = static_cast<int>(op);
  return i < kNumReduceOps ? kNames[i] : "?";
}

const char* opKindName(OpKind k) {
  auto i = static_cast<int>(k);
  return i < kNumOpKinds ? kOpTraits[i].name : "?";
}

namespace {

bool productOf(const int64_t* begin, const int64_t* end, int64_t* out) {
  int64_t n = 1;
  for (auto it = begin; it != end; ++it) {
    const int64_t d = *it;
    // One multiply with an overflow flag per dim: shapes are checked on every submission, and a
    // division per dim cost ~40 cycles each.
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return false;
  }
  *out = n;
  return true;
}

// Every shape reaching the core was checked (the C API and the wire decoder both reject counts
// that overflow), so an overflow here is a bug; it must still not be signed-overflow UB, and a
// saturated count makes any allocation sized from it fail loudly instead of wrapping to a small
// one.
int64_t checkedProduct(const int64_t* begin, const int64_t* end) {
  int64_t n = 0;
  const bool ok = productOf(begin, end, &n);
  assert(ok && "shape overflows int64: it should have been rejected where it entered");
  return ok ? n : std::numeric_limits<int64_t>::max();
}

}  // namespace

bool elementCount(const Shape& shape, int64_t* out) {
  return elementCount(shape.data(), shape.size(), out);
}

bool elementCount(const int64_t* dims, size_t ndim, int64_t* out) {
  return productOf(dims, dims + ndim, out);
}

bool byteCountsFit(const Shape& shape, DataType t) {
  return byteCountsFit(shape.data(), shape.size(), t);
}

bool byteCountsFit(const int64_t* dims, size_t ndim, DataType t) {
  int64_t elements = 0;
  return checkedCounts(dims, ndim, t, &elements);
}

bool checkedCounts(const int64_t* dims, size_t ndim, DataType t, int64_t* elements) {
  // The row count matters on its own: a shape like [0, 2^62, 2^62] has zero elements, but the
  // executor still computes its row size. Both products left to right, as numElements and
  // rowElements compute them, in one pass; the bytes by a multiply with an overflow flag (a
  // division by the element size was ~40 cycles per tensor of every submission).
  const auto size = static_cast<int64_t>(dataTypeSize(t));
  int64_t n = 1, row = 1, bytes = 0;
  for (size_t i = 0; i < ndim; ++i) {
    const int64_t d = dims[i];
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return false;
    if (i > 0 && __builtin_mul_overflow(row, d, &row)) return false;
  }
  if (__builtin_mul_overflow(n, size, &bytes) || __builtin_mul_overflow(row, size, &bytes)) {
    return false;
  }
  *elements = n;
  return true;
}

int64_t invalidShapeCount() {
  assert(false && "shape overflows int64: it should have been rejected where it entered");
  return std::numeric_limits<int64_t>::max();
}

int64_t rowElements(const Shape& shape) {
  return shape.size() <= 1 ? 1 : checkedProduct(shape.data() + 1, shape.data() + shape.size());
}

std::string rankSequence(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

std::string rankList(const std::vector<int>& ranks) { return "[" + rankSequence(ranks) + "]"; }

std::string shapeString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace hcoll
