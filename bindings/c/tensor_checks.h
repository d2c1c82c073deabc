#pragma once
// Argument checks of the collectives: every rule that a single rank can check on its own.
// Each check returns HCOLL_SUCCESS or records a message naming the function and the field.

#include <string>
#include <vector>

#include "hcoll/hcoll.h"
#include "runtime/types.h"

namespace hcoll::bindings {

struct CheckContext {
  const char* function;
  std::string where;  // e.g. "ins[3]"
};

// Validates `t` (NULL, dtype, ndim, shape, dims, element-count overflow, data, device) and
// copies it into `out`.
hcoll_status_t checkTensor(const CheckContext& ctx, const hcoll_tensor_t* t, TensorDesc* out);
hcoll_status_t checkReduceOp(const char* function, hcoll_reduce_op_t op, double prescale,
                             double postscale);
// bool has no scaling or AVERAGE.
hcoll_status_t checkReductionOfType(const CheckContext& ctx, DataType dtype, hcoll_reduce_op_t op,
                                    double prescale, double postscale);
hcoll_status_t checkName(const char* function, const char* name);
hcoll_status_t checkGroupSize(const char* function, int n, const void* ins);

}  // namespace hcoll::bindings
