/* Calls with out-of-range enum values, made from C: in C an enum object may hold any int, while
 * in C++ merely loading such a value is undefined behaviour (and flagged by UBSan). */
#include "hcoll/hcoll.h"

hcoll_status_t hostileAllreduceOp(hcoll_comm_t comm, const hcoll_tensor_t* t, int op,
                                  hcoll_request_t* req) {
  return hcoll_allreduce(comm, "bad-op", t, t, (hcoll_reduce_op_t)op, 1.0, 1.0, req);
}

hcoll_status_t hostileReducescatterOp(hcoll_comm_t comm, const hcoll_tensor_t* t, int op,
                                      hcoll_request_t* req) {
  return hcoll_reducescatter(comm, "bad-op", t, (hcoll_reduce_op_t)op, 1.0, 1.0, req);
}

/* A copy of `t` whose dtype holds `dtype`, which need not be an hcoll_dtype_t value. */
hcoll_tensor_t hostileDtype(hcoll_tensor_t t, int dtype) {
  t.dtype = (hcoll_dtype_t)dtype;
  return t;
}
