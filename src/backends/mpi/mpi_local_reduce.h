#pragma once
// The local reduction step of the point-to-point reduce-scatter and allreduce (mpi_p2p.h): a
// received contribution reduced into this rank's block. MPICH's MPI_Reduce_local runs scalar
// loops for the builtin operators (one float per cycle: 15.6 us for 200 KiB of float32 on the
// test VM); for sums, products, and integer minima/maxima of the builtin types hcoll runs its own
// element-wise loops, vectorized (4.3 us), with the same result element by element (IEEE
// addition and multiplication are commutative; integers wrap as two's complement). Everything
// else (float MIN/MAX's order-free user ops, bool's logical ops, the widened 16-bit floats' ops
// are float32 sums by then) keeps MPI_Reduce_local.

#include <mpi.h>

#include <cstddef>

#include "common/status.h"
#include "common/types.h"

namespace hcoll::backends::mpi {

// inout[i] = in[i] op inout[i] for i < count; `in` and `inout` do not overlap.
using LocalReduceFn = void (*)(const void* in, void* inout, size_t count);

// How one operation reduces locally: hcoll's loop where there is one, else MPI_Reduce_local of
// `op` on `type`.
struct Reduction {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  size_t elementSize = 0;
  MPI_Op op = MPI_OP_NULL;
  LocalReduceFn loop = nullptr;
};

// The Reduction for `op` on `dtype` (as the MPI backend maps them: mpi_types.h).
Reduction reductionFor(DataType dtype, ReduceOp op);

// inout = in op inout over `count` elements (MPI_Reduce_local's int count taken in pieces).
Status reduceLocal(const Reduction& reduction, const void* in, void* inout, size_t count);

}  // namespace hcoll::backends::mpi
