#include "common/types.h"

#include "common/op_traits.h"

#include <cassert>
#include <limits>

namespace hcoll {

size_t dataTypeSize(DataType t) {
  switch (t) {
    case DataType::kUint8: case DataType::kInt8: case DataType::kBool: return 1;
    case DataType::kUint16: case DataType::kInt16: case DataType::kFloat16:
    case DataType::kBfloat16: return 2;
    case DataType::kInt32: case DataType::kFloat32: return 4;
    case DataType::kInt64: case DataType::kFloat64: return 8;
  }
  return 1;
}

const char* dataTypeName(DataType t) {
  static const char* const kNames[] = {"uint8",   "int8",     "uint16",  "int16",
                                       "int32",   "int64",    "float16", "bfloat16",
                                       "float32", "float64",  "bool"};
  auto i = static_cast<int>(t);
  return i < kNumDataTypes ? kNames[i] : "?";
}

const char* reduceOpName(ReduceOp op) {
  static const char* const kNames[] = {"sum", "average", "min", "max", "product"};
  auto i = static_cast<int>(op);
  return i < kNumReduceOps ? kNames[i] : "?";
}

const char* opKindName(OpKind k) {
  auto i = static_cast<int>(k);
  return i < kNumOpKinds ? kOpTraits[i].name : "?";
}

namespace {

bool productOf(std::vector<int64_t>::const_iterator begin, std::vector<int64_t>::const_iterator end,
               int64_t* out) {
  int64_t n = 1;
  for (auto it = begin; it != end; ++it) {
    const int64_t d = *it;
    if (d < 0) return false;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return false;
    n *= d;
  }
  *out = n;
  return true;
}

// Every shape reaching the core was checked (the C API and the wire decoder both reject counts
// that overflow), so an overflow here is a bug; it must still not be signed-overflow UB, and a
// saturated count makes any allocation sized from it fail loudly instead of wrapping to a small
// one.
int64_t checkedProduct(std::vector<int64_t>::const_iterator begin,
                       std::vector<int64_t>::const_iterator end) {
  int64_t n = 0;
  const bool ok = productOf(begin, end, &n);
  assert(ok && "shape overflows int64: it should have been rejected where it entered");
  return ok ? n : std::numeric_limits<int64_t>::max();
}

}  // namespace

bool elementCount(const std::vector<int64_t>& shape, int64_t* out) {
  return productOf(shape.begin(), shape.end(), out);
}

bool byteCountsFit(const std::vector<int64_t>& shape, DataType t) {
  // The row count matters on its own: a shape like [0, 2^62, 2^62] has zero elements, but the
  // executor still computes its row size.
  const auto size = static_cast<int64_t>(dataTypeSize(t));
  const int64_t limit = std::numeric_limits<int64_t>::max() / size;
  int64_t elements = 0, row = 1;
  return productOf(shape.begin(), shape.end(), &elements) && elements <= limit &&
         (shape.size() <= 1 || (productOf(shape.begin() + 1, shape.end(), &row) && row <= limit));
}

int64_t numElements(const std::vector<int64_t>& shape) {
  return checkedProduct(shape.begin(), shape.end());
}

int64_t rowElements(const std::vector<int64_t>& shape) {
  return shape.size() <= 1 ? 1 : checkedProduct(shape.begin() + 1, shape.end());
}

std::string rankSequence(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

std::string rankList(const std::vector<int>& ranks) { return "[" + rankSequence(ranks) + "]"; }

std::string shapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace hcoll
