#include "backends/mpi/mpi_types.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "common/half.h"

namespace hcoll::backends::mpi {
namespace {

MPI_Datatype gFloat16 = MPI_DATATYPE_NULL;
MPI_Datatype gBfloat16 = MPI_DATATYPE_NULL;
MPI_Op gHalfOps[kNumReduceOps] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL,
                                  MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};

MPI_Op gFloatMin = MPI_OP_NULL;
MPI_Op gFloatMax = MPI_OP_NULL;

// MIN and MAX whose result does not depend on operand order, so that every rank of a reduction
// ends with the same bits whatever order MPI's algorithm combined them in (MPICH's MPI_MIN is
// `a < b ? a : b`: with a NaN, ranks that combined in different orders disagreed). Any NaN gives
// the canonical quiet NaN (NaN propagates, as torch.minimum/maximum), and -0 orders below +0.
template <typename T>
T orderFreeMin(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  if (a == b) return std::signbit(a) ? a : b;
  return a < b ? a : b;
}
template <typename T>
T orderFreeMax(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}

template <bool kMin>
void floatMinMax(void* in, void* inout, int* len, MPI_Datatype* type) {
  auto apply = [&](auto* a, auto* b) {
    for (int i = 0; i < *len; ++i) {
      b[i] = kMin ? orderFreeMin(a[i], b[i]) : orderFreeMax(a[i], b[i]);
    }
  };
  if (*type == MPI_DOUBLE) {
    apply(static_cast<const double*>(in), static_cast<double*>(inout));
  } else {
    apply(static_cast<const float*>(in), static_cast<float*>(inout));
  }
}

template <class Combine>
void reduceHalves(void* in, void* inout, int* len, MPI_Datatype* type, Combine combine) {
  auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  if (*type == gBfloat16) {
    for (int i = 0; i < *len; ++i) {
      b[i] = floatToBfloat16(combine(bfloat16ToFloat(a[i]), bfloat16ToFloat(b[i])));
    }
  } else {
    for (int i = 0; i < *len; ++i) {
      b[i] = floatToHalf(combine(halfToFloat(a[i]), halfToFloat(b[i])));
    }
  }
}

void halfSum(void* in, void* inout, int* len, MPI_Datatype* t) {
  reduceHalves(in, inout, len, t, [](float x, float y) { return x + y; });
}
void halfMin(void* in, void* inout, int* len, MPI_Datatype* t) {
  reduceHalves(in, inout, len, t, [](float x, float y) { return orderFreeMin(x, y); });
}
void halfMax(void* in, void* inout, int* len, MPI_Datatype* t) {
  reduceHalves(in, inout, len, t, [](float x, float y) { return orderFreeMax(x, y); });
}
void halfProduct(void* in, void* inout, int* len, MPI_Datatype* t) {
  reduceHalves(in, inout, len, t, [](float x, float y) { return x * y; });
}

}  // namespace

Status mpiError(const char* call, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  return backendError(std::string(call) + " failed: " + std::string(text, length));
}

Status createCustomTypes() {
  MPI_Datatype* types[] = {&gFloat16, &gBfloat16};
  for (MPI_Datatype* t : types) {
    if (int rc = MPI_Type_contiguous(2, MPI_BYTE, t); rc != MPI_SUCCESS) {
      return mpiError("MPI_Type_contiguous", rc);
    }
    if (int rc = MPI_Type_commit(t); rc != MPI_SUCCESS) return mpiError("MPI_Type_commit", rc);
  }
  // Adasum is no element-wise operator (mpi_adasum.cc): no MPI_Op.
  MPI_User_function* fns[kNumReduceOps] = {halfSum, halfSum,     halfMin,
                                           halfMax, halfProduct, nullptr};
  for (int i = 0; i < kNumReduceOps; ++i) {
    if (fns[i] == nullptr) continue;
    if (int rc = MPI_Op_create(fns[i], /*commute=*/1, &gHalfOps[i]); rc != MPI_SUCCESS) {
      return mpiError("MPI_Op_create", rc);
    }
  }
  if (int rc = MPI_Op_create(floatMinMax<true>, /*commute=*/1, &gFloatMin); rc != MPI_SUCCESS)
    return mpiError("MPI_Op_create", rc);
  if (int rc = MPI_Op_create(floatMinMax<false>, /*commute=*/1, &gFloatMax); rc != MPI_SUCCESS)
    return mpiError("MPI_Op_create", rc);
  return Status::ok();
}

void freeCustomTypes() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Datatype* t : {&gFloat16, &gBfloat16}) {
    if (*t != MPI_DATATYPE_NULL) MPI_Type_free(t);
  }
  for (MPI_Op& op : gHalfOps) {
    if (op != MPI_OP_NULL) MPI_Op_free(&op);
  }
  for (MPI_Op* op : {&gFloatMin, &gFloatMax}) {
    if (*op != MPI_OP_NULL) MPI_Op_free(op);
  }
}

MPI_Datatype toMpiType(DataType t) {
  switch (t) {
    case DataType::kUint8: return MPI_UINT8_T;
    case DataType::kInt8: return MPI_INT8_T;
    case DataType::kUint16: return MPI_UINT16_T;
    case DataType::kInt16: return MPI_INT16_T;
    case DataType::kInt32: return MPI_INT32_T;
    case DataType::kInt64: return MPI_INT64_T;
    case DataType::kFloat16: return gFloat16;
    case DataType::kBfloat16: return gBfloat16;
    case DataType::kFloat32: return MPI_FLOAT;
    case DataType::kFloat64: return MPI_DOUBLE;
    case DataType::kBool: return MPI_UINT8_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op toMpiOp(ReduceOp op, DataType t) {
  if (t == DataType::kFloat16 || t == DataType::kBfloat16) return gHalfOps[static_cast<int>(op)];
  if (t == DataType::kBool) {
    return (op == ReduceOp::kSum || op == ReduceOp::kMax) ? MPI_LOR : MPI_LAND;
  }
  const bool floating = t == DataType::kFloat32 || t == DataType::kFloat64;
  switch (op) {
    case ReduceOp::kSum: case ReduceOp::kAverage: return MPI_SUM;
    case ReduceOp::kMin: return floating ? gFloatMin : MPI_MIN;
    case ReduceOp::kMax: return floating ? gFloatMax : MPI_MAX;
    case ReduceOp::kProduct: return MPI_PROD;
    case ReduceOp::kAdasum: return MPI_OP_NULL;  // not element-wise (mpi_adasum.cc)
  }
  return MPI_OP_NULL;
}

}  // namespace hcoll::backends::mpi
