#include "backends/nccl/nccl_types.h"

#include <string>

namespace hcoll::backends::nccl {

Status toNccl(DataType dtype, ReduceOp op, ncclDataType_t* type, ncclRedOp_t* redOp) {
  switch (dtype) {
    case DataType::kUint8:
      *type = ncclUint8;
      break;
    case DataType::kInt8:
      *type = ncclInt8;
      break;
    case DataType::kInt32:
      *type = ncclInt32;
      break;
    case DataType::kInt64:
      *type = ncclInt64;
      break;
    case DataType::kFloat16:
      *type = ncclFloat16;
      break;
    case DataType::kBfloat16:
      *type = ncclBfloat16;
      break;
    case DataType::kFloat32:
      *type = ncclFloat32;
      break;
    case DataType::kFloat64:
      *type = ncclFloat64;
      break;
    case DataType::kBool:
      *type = ncclUint8;
      break;
    case DataType::kUint16:
    case DataType::kInt16:
      return Status(Code::kUnsupported, std::string("NCCL has no 16-bit integer type: ") +
                                            dataTypeName(dtype) +
                                            " reductions of CUDA tensors are unsupported");
  }
  if (dtype == DataType::kBool) {
    *redOp = op == ReduceOp::kMin || op == ReduceOp::kProduct ? ncclMin : ncclMax;
    return Status::ok();
  }
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      *redOp = ncclSum;
      break;
    case ReduceOp::kMin:
      *redOp = ncclMin;
      break;
    case ReduceOp::kMax:
      *redOp = ncclMax;
      break;
    case ReduceOp::kProduct:
      *redOp = ncclProd;
      break;
    case ReduceOp::kAdasum:  // refused at submission: Adasum runs on host memory only
      return Status(Code::kUnsupported, "Adasum of CUDA tensors is unsupported (host memory only)");
  }
  return Status::ok();
}

}  // namespace hcoll::backends::nccl
