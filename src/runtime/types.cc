#include "runtime/types.h"

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
  static const char* const kNames[] = {"allreduce", "allgather", "broadcast",
                                       "alltoall",  "reducescatter", "barrier",
                                       "join",      "comm_split",    "comm_create"};
  auto i = static_cast<int>(k);
  return i < kNumOpKinds ? kNames[i] : "?";
}

bool isFloatingPoint(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBfloat16 || t == DataType::kFloat32 ||
         t == DataType::kFloat64;
}

bool elementCount(const std::vector<int64_t>& shape, int64_t* out) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return false;
    n *= d;
  }
  *out = n;
  return true;
}

int64_t numElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t rowElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

std::string shapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace hcoll
