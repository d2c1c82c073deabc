#pragma once
// Argument checks of the collectives: every rule that a single rank can check on its own.
// Each check returns HCOLL_SUCCESS or records a message naming the function and the field.

#include <cstring>
#include <string>
#include <vector>

#include "hcoll/hcoll.h"
#include "common/types.h"

namespace hcoll::bindings {

// Names the argument being checked; the text is only built when a check fails (the success path
// of a 100-member grouped call must not allocate a string per member).
struct CheckContext {
  const char* function;
  const char* argument;  // "in", "ins", "out", ...
  int index = -1;        // member index for grouped calls, -1 for a plain argument
  std::string where() const {
    return index < 0 ? std::string(argument)
                     : std::string(argument) + "[" + std::to_string(index) + "]";
  }
};

// Validates `t` (NULL, dtype, ndim, shape, dims, element-count overflow, data, device) and
// copies it into `out`; its shape only if `copyShape` (else out->shape is left as it is and the
// caller reads the checked t->shape itself: no allocation). `checkedLike`, when given, is a
// tensor already checked: if `t` has the same dims (an allreduce's output), they are not checked
// a second time.
hcoll_status_t checkTensor(const CheckContext& ctx, const hcoll_tensor_t* t, TensorDesc* out,
                           bool copyShape = true, const hcoll_tensor_t* checkedLike = nullptr);

// The integer a C caller stored in an enum object. A C caller may store any int there, and in
// C++ even loading an enum outside its range is undefined (UBSan's -fsanitize=enum), so enums
// from the caller are only ever read as bytes.
template <class E>
int rawEnum(const E& e) {
  static_assert(sizeof(E) == sizeof(int), "C enums are int-sized");
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// `op` is the caller's hcoll_reduce_op_t as read by rawEnum.
hcoll_status_t checkReduceOp(const char* function, int op, double prescale, double postscale);
// bool has no scaling or AVERAGE.
hcoll_status_t checkReductionOfType(const CheckContext& ctx, DataType dtype, int op,
                                    double prescale, double postscale);
hcoll_status_t checkName(const char* function, const char* name);
hcoll_status_t checkGroupSize(const char* function, int n, const void* ins);

}  // namespace hcoll::bindings
