// Compiled with -O3 (CMakeLists.txt): GCC's -O2 cost model leaves loops with a run-time trip
// count scalar, and these loops are the point of this file.
#include "backends/mpi/mpi_local_reduce.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "backends/mpi/mpi_types.h"

namespace hcoll::backends::mpi {
namespace {

// Integers add and multiply in their unsigned type: wrap-around is defined there and gives the
// same bits as two's complement signed arithmetic.
template <typename T, bool = std::is_integral_v<T>>
struct ArithmeticOf {
  using type = T;
};
template <typename T>
struct ArithmeticOf<T, true> {
  using type = std::make_unsigned_t<T>;
};
template <typename T>
using Arithmetic = typename ArithmeticOf<T>::type;

struct Sum {
  template <typename T>
  static T apply(T a, T b) {
    using A = Arithmetic<T>;
    return static_cast<T>(static_cast<A>(static_cast<A>(a) + static_cast<A>(b)));
  }
};
struct Product {
  template <typename T>
  static T apply(T a, T b) {
    using A = Arithmetic<T>;
    return static_cast<T>(static_cast<A>(static_cast<A>(a) * static_cast<A>(b)));
  }
};
struct Min {
  template <typename T>
  static T apply(T a, T b) {
    return std::min(a, b);
  }
};
struct Max {
  template <typename T>
  static T apply(T a, T b) {
    return std::max(a, b);
  }
};

template <typename T, typename Op>
void loop(const void* in, void* inout, size_t count) {
  const T* __restrict a = static_cast<const T*>(in);
  T* __restrict b = static_cast<T*>(inout);
  for (size_t i = 0; i < count; ++i) b[i] = Op::apply(a[i], b[i]);
}

template <typename T>
LocalReduceFn loopFor(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:  // a sum here: the executor scales afterwards
      return &loop<T, Sum>;
    case ReduceOp::kProduct:
      return &loop<T, Product>;
    case ReduceOp::kMin:
      return std::is_integral_v<T> ? &loop<T, Min> : nullptr;  // floats: order-free user ops
    case ReduceOp::kMax:
      return std::is_integral_v<T> ? &loop<T, Max> : nullptr;
    case ReduceOp::kAdasum:  // not element-wise (mpi_adasum.cc)
      return nullptr;
  }
  return nullptr;
}

// MPI_Reduce_local takes an int count: longer reductions run in pieces of this many elements.
constexpr size_t kMaxReduceElements = INT_MAX / 16;

}  // namespace

Reduction reductionFor(DataType dtype, ReduceOp op) {
  Reduction r;
  r.type = toMpiType(dtype);
  r.elementSize = dataTypeSize(dtype);
  r.op = toMpiOp(op, dtype);
  switch (dtype) {
    case DataType::kUint8: r.loop = loopFor<uint8_t>(op); break;
    case DataType::kInt8: r.loop = loopFor<int8_t>(op); break;
    case DataType::kUint16: r.loop = loopFor<uint16_t>(op); break;
    case DataType::kInt16: r.loop = loopFor<int16_t>(op); break;
    case DataType::kInt32: r.loop = loopFor<int32_t>(op); break;
    case DataType::kInt64: r.loop = loopFor<int64_t>(op); break;
    case DataType::kFloat32: r.loop = loopFor<float>(op); break;
    case DataType::kFloat64: r.loop = loopFor<double>(op); break;
    default: break;  // 16-bit floats and bool: MPI_Reduce_local with hcoll's or MPI's ops
  }
  return r;
}

Status reduceLocal(const Reduction& reduction, const void* in, void* inout, size_t count) {
  if (reduction.loop != nullptr) {
    reduction.loop(in, inout, count);
    return Status::ok();
  }
  const auto* from = static_cast<const uint8_t*>(in);
  auto* to = static_cast<uint8_t*>(inout);
  for (size_t offset = 0; offset < count; offset += kMaxReduceElements) {
    const size_t n = std::min(kMaxReduceElements, count - offset);
    const size_t at = offset * reduction.elementSize;
    if (int rc = MPI_Reduce_local(from + at, to + at, static_cast<int>(n), reduction.type,
                                  reduction.op);
        rc != MPI_SUCCESS) {
      return mpiError("MPI_Reduce_local", rc);
    }
  }
  return Status::ok();
}

}  // namespace hcoll::backends::mpi
