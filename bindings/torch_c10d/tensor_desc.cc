#include "tensor_desc.h"

#include "cuda_stream.h"

namespace hcoll::torch_c10d {

hcoll_dtype_t toHcollDtype(at::ScalarType type, const std::string& call) {
  switch (type) {
    case at::kByte:
      return HCOLL_UINT8;
    case at::kChar:
      return HCOLL_INT8;
    case at::kShort:
      return HCOLL_INT16;
    case at::kInt:
      return HCOLL_INT32;
    case at::kLong:
      return HCOLL_INT64;
    case at::kHalf:
      return HCOLL_FLOAT16;
    case at::kBFloat16:
      return HCOLL_BFLOAT16;
    case at::kFloat:
      return HCOLL_FLOAT32;
    case at::kDouble:
      return HCOLL_FLOAT64;
    case at::kBool:
      return HCOLL_BOOL;
    default:
      TORCH_CHECK(false, "hcoll ", call, ": unsupported dtype ", c10::toString(type),
                  " (hcoll supports uint8, int8, int16, int32, int64, float16, bfloat16, "
                  "float32, float64, bool)");
  }
}

hcoll_reduce_op_t toHcollOp(const c10d::ReduceOp& op, const std::string& call) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return HCOLL_SUM;
    case c10d::ReduceOp::AVG:
      return HCOLL_AVERAGE;
    case c10d::ReduceOp::PRODUCT:
      return HCOLL_PRODUCT;
    case c10d::ReduceOp::MIN:
      return HCOLL_MIN;
    case c10d::ReduceOp::MAX:
      return HCOLL_MAX;
    case c10d::ReduceOp::BAND:
      TORCH_CHECK(false, "hcoll ", call, ": ReduceOp.BAND is not supported");
    case c10d::ReduceOp::BOR:
      TORCH_CHECK(false, "hcoll ", call, ": ReduceOp.BOR is not supported");
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK(false, "hcoll ", call, ": ReduceOp.BXOR is not supported");
    case c10d::ReduceOp::PREMUL_SUM:
      TORCH_CHECK(false, "hcoll ", call, ": ReduceOp.PREMUL_SUM is not supported");
    default:
      TORCH_CHECK(false, "hcoll ", call, ": unknown ReduceOp ", static_cast<int>(op.op_));
  }
}

const hcoll_tensor_t* TensorDescs::add(const at::Tensor& t, const std::string& call,
                                       std::vector<int64_t> shape, bool useOwnShape) {
  TORCH_CHECK(t.defined(), "hcoll ", call, ": undefined tensor");
  TORCH_CHECK(t.layout() == at::kStrided, "hcoll ", call,
              ": only dense tensors are supported, got ", t.layout());
  TORCH_CHECK(t.is_contiguous(), "hcoll ", call, ": tensors must be contiguous");
  TORCH_CHECK(t.is_cpu() || t.is_cuda(), "hcoll ", call,
              ": tensors must be on the CPU or a CUDA "
              "device, got ",
              t.device());
  hcoll_tensor_t d{};
  d.data = t.numel() == 0 ? nullptr : t.data_ptr();
  d.dtype = toHcollDtype(t.scalar_type(), call);
  if (useOwnShape) shape = t.sizes().vec();
  shapes_.push_back(std::move(shape));
  d.ndim = static_cast<int32_t>(shapes_.back().size());
  d.shape = shapes_.back().data();
  d.device = HCOLL_DEVICE_HOST;
  d.stream = nullptr;
  if (t.is_cuda()) {
    d.device = static_cast<int32_t>(t.device().index());
    d.stream = currentCudaStream(t.device(), call);
  }
  descs_.push_back(d);
  return &descs_.back();
}

int32_t commonDevice(const std::vector<at::Tensor>& tensors, const std::string& call) {
  TORCH_CHECK(!tensors.empty(), "hcoll ", call, ": no tensors");
  const at::Device first = tensors.front().device();
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(t.device() == first, "hcoll ", call, ": tensors on different devices (", first,
                " and ", t.device(), ")");
  }
  return first.is_cuda() ? static_cast<int32_t>(first.index()) : HCOLL_DEVICE_HOST;
}

std::vector<int64_t> rowsShape(const at::Tensor& t, int64_t rows) {
  std::vector<int64_t> shape{rows};
  for (int64_t d = 1; d < t.dim(); ++d) shape.push_back(t.size(d));
  return shape;
}

}  // namespace hcoll::torch_c10d
