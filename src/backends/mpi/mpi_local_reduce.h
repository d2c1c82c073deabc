#pragma once
// The local reduction step of the point-to-point reduce-scatter and allreduce (mpi_p2p.h): a
// received contribution reduced into this rank's block, by the host reduction library
// (common/reduce.h: vectorized loops, order-free float MIN/MAX), never MPI_Reduce_local (MPICH's
// builtin loops are scalar: 15.6 against 4.3 us for 200 KiB of float32 on the test VM).

#include <cstddef>

#include "common/reduce.h"
#include "common/types.h"

namespace hcoll::backends::mpi {

// What one reduction combines: `op` on elements of `dtype`.
struct Reduction {
  DataType dtype = DataType::kUint8;
  ReduceOp op = ReduceOp::kSum;
  size_t elementSize = 1;
};

inline Reduction reductionFor(DataType dtype, ReduceOp op) {
  return Reduction{dtype, op, dataTypeSize(dtype)};
}

// inout = inout op in over `count` elements; `in` and `inout` do not overlap.
inline void reduceLocal(const Reduction& reduction, const void* in, void* inout, size_t count) {
  reduceInto(reduction.dtype, reduction.op, in, inout, count);
}

}  // namespace hcoll::backends::mpi
