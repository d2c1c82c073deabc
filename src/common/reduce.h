#pragma once
// The one definition of hcoll's host reductions, used by every host backend (the MPI backend's
// local steps and user operators, the loopback backend's rounds), so that a result cannot depend
// on which backend computed it. Per element:
//   SUM, AVERAGE  a + b (AVERAGE is a SUM here: the runtime applies the 1/N afterwards).
//   PRODUCT       a * b.
//   MIN, MAX      integers as usual. Floats (float16, bfloat16, float32, float64): a NaN on any
//                 rank gives the dtype's canonical quiet NaN (NaN propagates, as torch.minimum),
//                 and -0 orders below +0; the result is therefore the same bits whichever rank
//                 holds which value and in whatever order the operands are combined.
//   bool          SUM and MAX are OR, MIN and PRODUCT are AND; any nonzero byte is true and the
//                 result is 0 or 1.
// Integer sums and products wrap (two's complement, computed unsigned). float16/bfloat16 SUM,
// AVERAGE and PRODUCT accumulate in float32: reduceInputs rounds once per element; reduceInto,
// a pairwise step, rounds after that step (a backend that must round once widens first:
// widenToFloat32 / narrowFromFloat32).

#include <cstddef>
#include <vector>

#include "common/types.h"

namespace hcoll {

// inout[i] = inout[i] op in[i] for i < count. `in` and `inout` do not overlap.
void reduceInto(DataType dtype, ReduceOp op, const void* in, void* inout, size_t count);

// dst[i] = op over k of inputs[k][begin + i], for i < count: every input (one per rank, in rank
// order, all of `dtype`) streamed once. dst must not overlap any input.
void reduceInputs(DataType dtype, ReduceOp op, const std::vector<const void*>& inputs, size_t begin,
                  size_t count, void* dst);

// Whether `op` on `dtype` is a 16-bit float reduction that accumulates in float32.
bool reducesInFloat32(DataType dtype, ReduceOp op);

// float16/bfloat16 (`dtype`) to float32 and back (round to nearest even, NaN stays NaN).
void widenToFloat32(DataType dtype, const void* src, float* dst, size_t count);
void narrowFromFloat32(DataType dtype, const float* src, void* dst, size_t count);

}  // namespace hcoll
