#pragma once
// Copies between caller tensors and fusion buffers, applying a scale factor on the way (integers
// are scaled in double, truncated toward zero and saturated to their range; float16/bfloat16
// go through float).

#include <cstddef>

#include "common/types.h"

namespace hcoll::fusion {

// dst[i] = src[i] * factor for `count` elements of `dtype`; dst may equal src. A factor of 1 is
// a plain copy (or nothing when dst == src).
void scaleCopy(void* dst, const void* src, size_t count, DataType dtype, double factor);

// Rewrites bool elements as 0/1 (MPI's logical operators leave other non-zero values alone on
// a single rank).
void normalizeBool(void* data, size_t count);

}  // namespace hcoll::fusion
