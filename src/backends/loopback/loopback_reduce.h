#pragma once
// The reduction arithmetic of the loopback backend, with the MPI backend's semantics: float16 and
// bfloat16 SUM, AVERAGE and PRODUCT accumulate in float32 and round once (mpi_widen.h), MIN and
// MAX compare the 16-bit values as floats; bool SUM/MAX are OR and MIN/PRODUCT are AND, giving
// 0 or 1; integer sums and products wrap. AVERAGE is a SUM here: the runtime applies the 1/N.

#include <cstddef>
#include <vector>

#include "backends/backend.h"

namespace hcoll::backends::loopback {

// Reduces elements [begin, begin + count) of every buffer in `inputs` (one per rank, in rank
// order, all of `dtype`) into dst[0, count). dst must not overlap any input.
void reduceRange(DataType dtype, ReduceOp op, const std::vector<const void*>& inputs, size_t begin,
                 size_t count, void* dst);

}  // namespace hcoll::backends::loopback
