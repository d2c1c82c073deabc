#include "bindings/c/tensor_checks.h"

#include <algorithm>
#include <cmath>

#include "bindings/c/errors.h"
#include "runtime/runtime.h"

namespace hcoll::bindings {

// The wire decoder rejects specs past the core's limit, so the two must not drift apart.
static_assert(kMaxNdim == HCOLL_MAX_NDIM, "runtime kMaxNdim mirrors HCOLL_MAX_NDIM");

namespace {

hcoll_status_t invalid(const CheckContext& ctx, const std::string& what) {
  return fail(HCOLL_ERR_INVALID_ARGUMENT, std::string(ctx.function) + ": " + ctx.where() + ": " + what);
}

// Checked in place: the success path of a grouped call allocates no shape here.
hcoll_status_t checkDims(const CheckContext& ctx, const int64_t* dims, size_t ndim, DataType dtype,
                         int64_t* elements) {
  for (size_t i = 0; i < ndim; ++i) {
    if (dims[i] < 0) {
      return invalid(ctx, "dimension " + std::to_string(i) + " is negative (" +
                              std::to_string(dims[i]) + ")");
    }
  }
  if (!checkedCounts(dims, ndim, dtype, elements)) {
    return invalid(ctx, "shape " + shapeString(Shape(dims, dims + ndim)) +
                            " overflows the element count");
  }
  return HCOLL_SUCCESS;
}

}  // namespace

hcoll_status_t checkTensor(const CheckContext& ctx, const hcoll_tensor_t* t, TensorDesc* out,
                           bool copyShape, const hcoll_tensor_t* checkedLike) {
  if (t == nullptr) return invalid(ctx, "tensor pointer is NULL");
  const int dtype = rawEnum(t->dtype);
  if (dtype < 0 || dtype >= kNumDataTypes) {
    return invalid(ctx, "dtype " + std::to_string(dtype) + " is not an hcoll_dtype_t");
  }
  if (t->ndim < 0 || t->ndim > HCOLL_MAX_NDIM) {
    return invalid(ctx, "ndim " + std::to_string(t->ndim) + " is outside [0, " +
                            std::to_string(HCOLL_MAX_NDIM) + "]");
  }
  if (t->ndim > 0 && t->shape == nullptr) return invalid(ctx, "shape is NULL but ndim > 0");
  const auto ndim = static_cast<size_t>(t->ndim);
  int64_t elements = 0;
  if (checkedLike != nullptr && rawEnum(checkedLike->dtype) == dtype &&
      checkedLike->ndim == t->ndim && std::equal(t->shape, t->shape + ndim, checkedLike->shape)) {
    elements = numElements(t->shape, ndim);  // the same dims and dtype passed checkDims already
  } else if (hcoll_status_t s = checkDims(ctx, t->shape, ndim, static_cast<DataType>(dtype),
                                          &elements);
             s != HCOLL_SUCCESS) {
    return s;
  }
  if (elements > 0 && t->data == nullptr) return invalid(ctx, "data is NULL for a non-empty tensor");
  if (t->device < HCOLL_DEVICE_HOST) {
    return invalid(ctx, "device " + std::to_string(t->device) + " is neither HCOLL_DEVICE_HOST nor a CUDA ordinal");
  }
  if (t->device != HCOLL_DEVICE_HOST) {
    const void* data = elements > 0 ? t->data : nullptr;  // an empty tensor's pointer is unused
    if (Status s = runtime::Runtime::checkDeviceMemory(t->device, data); !s.isOk()) {
      return toC(Status(s.code(), std::string(ctx.function) + ": " + ctx.where() + ": " +
                                      s.message()));
    }
  }
  out->data = t->data;
  out->dtype = static_cast<DataType>(dtype);
  if (copyShape) out->shape.assign(t->shape, t->shape + ndim);
  out->device = t->device;
  out->stream = t->stream;
  return HCOLL_SUCCESS;
}

hcoll_status_t checkReduceOp(const char* function, int op, double prescale, double postscale) {
  const int v = op;
  if (v < 0 || v >= kNumReduceOps) {
    return fail(HCOLL_ERR_INVALID_ARGUMENT,
                std::string(function) + ": op " + std::to_string(v) + " is not an hcoll_reduce_op_t");
  }
  if (!std::isfinite(prescale) || !std::isfinite(postscale)) {
    return fail(HCOLL_ERR_INVALID_ARGUMENT,
                std::string(function) + ": prescale and postscale must be finite");
  }
  return HCOLL_SUCCESS;
}

hcoll_status_t checkReductionOfType(const CheckContext& ctx, DataType dtype, int op,
                                    double prescale, double postscale) {
  if (dtype == DataType::kBool &&
      (op == HCOLL_AVERAGE || prescale != 1.0 || postscale != 1.0)) {
    return invalid(ctx, "bool tensors cannot be averaged or scaled");
  }
  return HCOLL_SUCCESS;
}

hcoll_status_t checkName(const char* function, const char* name) {
  if (name == nullptr) return HCOLL_SUCCESS;
  size_t length = std::char_traits<char>::length(name);
  if (length == 0) {
    return fail(HCOLL_ERR_INVALID_ARGUMENT,
                std::string(function) + ": name is empty (pass NULL for an automatic name)");
  }
  if (length > kMaxNameLength) {
    return fail(HCOLL_ERR_INVALID_ARGUMENT, std::string(function) + ": name is longer than " +
                                                std::to_string(kMaxNameLength) +
                                                " bytes");
  }
  return HCOLL_SUCCESS;
}

hcoll_status_t checkGroupSize(const char* function, int n, const void* ins) {
  if (n < 1 || n > static_cast<int>(kMaxGroupMembers)) {
    return fail(HCOLL_ERR_INVALID_ARGUMENT, std::string(function) + ": n = " + std::to_string(n) +
                                                " is outside [1, " +
                                                std::to_string(kMaxGroupMembers) + "]");
  }
  if (ins == nullptr) return fail(HCOLL_ERR_INVALID_ARGUMENT, std::string(function) + ": tensor array is NULL");
  return HCOLL_SUCCESS;
}

}  // namespace hcoll::bindings
