#pragma once
// Mapping of hcoll element types and reduction operators to MPI, including the user-defined
// float16/bfloat16 types and operators that accumulate in float32.

#include <mpi.h>

#include <string>

#include "common/status.h"
#include "common/types.h"

namespace hcoll::backends::mpi {

// Creates (and frees) the derived types and user operators; MPI must be initialized.
Status createCustomTypes();
void freeCustomTypes();

MPI_Datatype toMpiType(DataType t);
// AVERAGE maps to SUM (the runtime applies 1/N); bool maps SUM/MAX to LOR, MIN/PRODUCT to LAND.
// Floating-point MIN/MAX are user operators whose result does not depend on operand order (a NaN
// wins, -0 < +0), so that every rank gets the same bits.
MPI_Op toMpiOp(ReduceOp op, DataType t);

// "MPI_Xxx failed: <MPI's error string>"
Status mpiError(const char* call, int code);

}  // namespace hcoll::backends::mpi
