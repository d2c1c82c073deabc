#include "backends/mpi/mpi_types.h"

#include <cstddef>

#include "common/reduce.h"

namespace hcoll::backends::mpi {
namespace {

MPI_Datatype gFloat16 = MPI_DATATYPE_NULL;
MPI_Datatype gBfloat16 = MPI_DATATYPE_NULL;
MPI_Op gHalfOps[kNumReduceOps] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL,
                                  MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};

MPI_Op gFloatMin = MPI_OP_NULL;
MPI_Op gFloatMax = MPI_OP_NULL;

// The element type of the user operators' MPI types.
DataType libraryType(MPI_Datatype type) {
  if (type == MPI_DOUBLE) return DataType::kFloat64;
  if (type == MPI_FLOAT) return DataType::kFloat32;
  return type == gBfloat16 ? DataType::kBfloat16 : DataType::kFloat16;
}

// The user operators run the host reduction library (common/reduce.h), so that MPI's own
// collectives combine exactly as the point-to-point schedules and the loopback backend do: float
// MIN/MAX order-free (MPICH's MPI_MIN is `a < b ? a : b`: with a NaN, ranks that combined in
// different orders disagreed), 16-bit floats through float32.
template <ReduceOp kOp>
void libraryOp(void* in, void* inout, int* len, MPI_Datatype* type) {
  reduceInto(libraryType(*type), kOp, in, inout, static_cast<size_t>(*len));
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
  MPI_User_function* fns[kNumReduceOps] = {
      libraryOp<ReduceOp::kSum>, libraryOp<ReduceOp::kAverage>, libraryOp<ReduceOp::kMin>,
      libraryOp<ReduceOp::kMax>, libraryOp<ReduceOp::kProduct>, nullptr};
  for (int i = 0; i < kNumReduceOps; ++i) {
    if (fns[i] == nullptr) continue;
    if (int rc = MPI_Op_create(fns[i], /*commute=*/1, &gHalfOps[i]); rc != MPI_SUCCESS) {
      return mpiError("MPI_Op_create", rc);
    }
  }
  if (int rc = MPI_Op_create(libraryOp<ReduceOp::kMin>, /*commute=*/1, &gFloatMin); rc != MPI_SUCCESS)
    return mpiError("MPI_Op_create", rc);
  if (int rc = MPI_Op_create(libraryOp<ReduceOp::kMax>, /*commute=*/1, &gFloatMax); rc != MPI_SUCCESS)
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
