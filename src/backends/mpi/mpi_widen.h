#pragma once
// float16/bfloat16 SUM, AVERAGE and PRODUCT in float32. A user-defined MPI op on 16-bit values
// must return 16-bit values, so a reduction tree would round after every pairwise step (at 3
// ranks float16 2048 + 1 + 1 gave 2048). Instead the values are widened into a float32 scratch
// buffer, reduced with MPI's own float operators, and narrowed once when the reduction ended:
// the result is the float32 reduction rounded once. It costs twice the bytes on the wire and a
// scratch buffer of 4 bytes per element; MIN and MAX are exact in 16 bits and are not widened.

#include <cstddef>
#include <memory>

#include "backends/backend.h"
#include "common/scratch_pool.h"
#include "common/reduce.h"  // reducesInFloat32

namespace hcoll::backends::mpi {

// Scratch float32 values for one widened reduction, in a buffer of the channel's pool (kept
// across calls: common/scratch_pool.h). Owned by the Pending that narrows them back; the reduction runs
// over data().
class WideBuffer {
 public:
  WideBuffer(ScratchPool& pool, size_t count) : storage_(pool.take(count * sizeof(float))) {}
  float* data() { return reinterpret_cast<float*>(storage_.bytes.get()); }
  // Widens `count` 16-bit values of `dtype` from `src` to data() + offset.
  void widen(const void* src, size_t offset, size_t count, DataType dtype);
  // Narrows `count` values from data() + offset to `dst` (round to nearest even).
  void narrow(size_t offset, size_t count, DataType dtype, void* dst);
  // The memory, to give back to the pool.
  ScratchPool::Buffer release() { return std::move(storage_); }
  // For an operation abandoned while MPI may still write into the buffer: it is never freed.
  void leak() { (void)storage_.bytes.release(); }

 private:
  ScratchPool::Buffer storage_;  // new[]'s alignment suits float
};

// Waits for `inner` (a float32 reduction over `wide`), then narrows `count` values from offset
// `offset` of the buffer into `dst` and gives the buffer back to `pool`.
PendingPtr narrowWhenDone(PendingPtr inner, std::unique_ptr<WideBuffer> wide, size_t offset,
                          size_t count, DataType dtype, void* dst,
                          std::shared_ptr<ScratchPool> pool);

}  // namespace hcoll::backends::mpi
