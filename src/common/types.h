#pragma once
// Element types, reduction operators, operation kinds and tensor descriptors of the core. The
// numeric values equal the public C enums so the bindings translate by cast after a range check.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/shape.h"

namespace hcoll {

enum class DataType : uint8_t {
  kUint8 = 0, kInt8, kUint16, kInt16, kInt32, kInt64, kFloat16, kBfloat16, kFloat32, kFloat64, kBool
};
constexpr int kNumDataTypes = 11;

enum class ReduceOp : uint8_t { kSum = 0, kAverage, kMin, kMax, kProduct, kAdasum };
constexpr int kNumReduceOps = 6;

enum class OpKind : uint8_t {
  kAllreduce = 0, kAllgather, kBroadcast, kAlltoall, kReducescatter, kBarrier, kJoin,
  kCommSplit, kCommCreate
};
constexpr int kNumOpKinds = 9;

constexpr int32_t kHostDevice = -1;
constexpr int kMaxNdim = 32;  // HCOLL_MAX_NDIM (the bindings static_assert that they agree)
// Longest operation name and largest group a submission may have (the wire format's bounds).
constexpr uint32_t kMaxNameLength = 4096;
constexpr uint32_t kMaxGroupMembers = 1u << 16;

// Inline: called per member on the submission and execution paths.
inline size_t dataTypeSize(DataType t) {
  switch (t) {
    case DataType::kUint8: case DataType::kInt8: case DataType::kBool: return 1;
    case DataType::kUint16: case DataType::kInt16: case DataType::kFloat16:
    case DataType::kBfloat16: return 2;
    case DataType::kInt32: case DataType::kFloat32: return 4;
    case DataType::kInt64: case DataType::kFloat64: return 8;
  }
  return 1;
}
const char* dataTypeName(DataType t);
const char* reduceOpName(ReduceOp op);
const char* opKindName(OpKind k);

// Product of dims; false on a negative dim or overflow of int64.
bool elementCount(const Shape& shape, int64_t* out);
bool elementCount(const int64_t* dims, size_t ndim, int64_t* out);
// Whether the element count and the row (dims[1:]) count of `shape`, in bytes of `t`, fit int64:
// what every shape entering the core (C API or wire) must satisfy.
bool byteCountsFit(const Shape& shape, DataType t);
bool byteCountsFit(const int64_t* dims, size_t ndim, DataType t);
// elementCount and byteCountsFit in one pass: false where either is, else the element count.
bool checkedCounts(const int64_t* dims, size_t ndim, DataType t, int64_t* elements);
// What numElements returns for a shape that overflows (or has a negative dim): asserts, then
// INT64_MAX.
int64_t invalidShapeCount();
// Product of dims of a shape already checked at the C API or the wire decoder; an overflow is
// a bug (asserted) and saturates at INT64_MAX rather than wrapping. Inline: the executor asks for
// it several times per member of a fused batch.
inline int64_t numElements(const int64_t* dims, size_t ndim) {
  int64_t n = 1;
  for (size_t i = 0; i < ndim; ++i) {
    if (dims[i] < 0 || __builtin_mul_overflow(n, dims[i], &n)) return invalidShapeCount();
  }
  return n;
}
inline int64_t numElements(const Shape& shape) { return numElements(shape.data(), shape.size()); }
inline int64_t numElements(const std::vector<int64_t>& shape) {
  return numElements(shape.data(), shape.size());
}
// Elements of one row (dims[1:]); 1 for a 0-d or 1-d shape.
int64_t rowElements(const Shape& shape);
// Rows of a reducescatter's dim 0 that rank r of `size` receives, and where they start.
inline int64_t scatterRows(int64_t d0, int size, int r) {
  return d0 / size + (r < d0 % size ? 1 : 0);
}
inline int64_t scatterOffset(int64_t d0, int size, int r) {
  return static_cast<int64_t>(r) * (d0 / size) + (r < d0 % size ? r : d0 % size);
}
std::string shapeString(const Shape& shape);
// Ranks for messages: "0, 1, 3" and "[0, 1, 3]".
std::string rankSequence(const std::vector<int>& ranks);
std::string rankList(const std::vector<int>& ranks);

// A caller's tensor as the core sees it: descriptor copied at submission, data borrowed. The
// inputs (and allreduce outputs) of a LocalOp leave `shape` empty: a member's shape lives once,
// in its OpSpec's MemberSpec (see local_op.h).
struct TensorDesc {
  void* data = nullptr;
  DataType dtype = DataType::kFloat32;
  // Filled only for *_into outputs (see above); inline up to Shape::kInline dims: as a vector it
  // was a malloc and a free in every *_into call (LocalOp recycling keeps the descriptors' vector,
  // not what each descriptor owned).
  Shape shape;
  int32_t device = kHostDevice;
  void* stream = nullptr;

  int64_t elements() const { return numElements(shape); }
  size_t bytes() const { return static_cast<size_t>(elements()) * dataTypeSize(dtype); }
};

}  // namespace hcoll
