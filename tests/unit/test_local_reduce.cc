// The MPI backend's own element-wise reduction loops (mpi_local_reduce.h), which replace
// MPI_Reduce_local where MPICH's loops are scalar: every builtin type with sum, product, min and
// max against a reference computed one element at a time (integer wrap-around included), counts
// that exercise the vector loop's tail, and which combinations are left to MPI's own operators.

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "backends/mpi/mpi_local_reduce.h"

namespace {

using hcoll::DataType;
using hcoll::ReduceOp;
using hcoll::backends::mpi::reduceLocal;
using hcoll::backends::mpi::reductionFor;

// The reference: two's complement wrap-around for integers (computed in 64-bit unsigned), IEEE
// arithmetic for floats.
template <typename T>
T reference(ReduceOp op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    const auto x = static_cast<uint64_t>(a), y = static_cast<uint64_t>(b);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage: return static_cast<T>(x + y);
      case ReduceOp::kProduct: return static_cast<T>(x * y);
      case ReduceOp::kMin: return a < b ? a : b;
      case ReduceOp::kMax: return a < b ? b : a;
    }
  } else {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage: return a + b;
      case ReduceOp::kProduct: return a * b;
      default: break;
    }
  }
  return T{};
}

template <typename T>
void checkType(DataType dtype) {
  std::mt19937_64 rng(7);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kProduct, ReduceOp::kMin,
                      ReduceOp::kMax}) {
    const auto reduction = reductionFor(dtype, op);
    if (!std::is_integral_v<T> && (op == ReduceOp::kMin || op == ReduceOp::kMax)) {
      // Floats keep the order-free MIN/MAX user ops (NaN and signed zeros, mpi_types.cc).
      CHECK(reduction.loop == nullptr);
      continue;
    }
    REQUIRE(reduction.loop != nullptr);
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
      REQUIRE(reduceLocal(reduction, in.data(), inout.data(), count).isOk());
      INFO("dtype " << static_cast<int>(dtype) << " op " << static_cast<int>(op) << " count "
                    << count);
      CHECK(inout == want);
    }
  }
}

}  // namespace

TEST_CASE("MPI backend local reductions: hcoll's loops equal element-by-element arithmetic",
          "[local_reduce]") {
  checkType<uint8_t>(DataType::kUint8);
  checkType<int8_t>(DataType::kInt8);
  checkType<uint16_t>(DataType::kUint16);
  checkType<int16_t>(DataType::kInt16);
  checkType<int32_t>(DataType::kInt32);
  checkType<int64_t>(DataType::kInt64);
  checkType<float>(DataType::kFloat32);
  checkType<double>(DataType::kFloat64);
}

TEST_CASE("MPI backend local reductions: 16-bit floats and bool keep MPI's operators",
          "[local_reduce]") {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
    CHECK(reductionFor(DataType::kFloat16, op).loop == nullptr);
    CHECK(reductionFor(DataType::kBfloat16, op).loop == nullptr);
    CHECK(reductionFor(DataType::kBool, op).loop == nullptr);
  }
}
