#pragma once
// float16/bfloat16 SUM, AVERAGE and PRODUCT in float32. A user-defined MPI op on 16-bit values
// must return 16-bit values, so a reduction tree would round after every pairwise step (at 3
// ranks float16 2048 + 1 + 1 gave 2048). Instead the values are widened into a float32 scratch
// buffer, reduced with MPI's own float operators, and narrowed once when the reduction ended:
// the result is the float32 reduction rounded once. It costs twice the bytes on the wire and a
// scratch buffer of 4 bytes per element; MIN and MAX are exact in 16 bits and are not widened.

#include <cstddef>
#include <memory>
#include <mutex>

#include "backends/backend.h"

namespace hcoll::backends::mpi {

bool reducesInFloat32(DataType dtype, ReduceOp op);

// Scratch float32 values for one widened reduction. Owned by the Pending that narrows them back;
// the reduction runs over data().
class WideBuffer {
 public:
  explicit WideBuffer(size_t count)
      : values_(new float[count > 0 ? count : 1]), capacity_(count > 0 ? count : 1) {}
  float* data() { return values_.get(); }
  size_t capacity() const { return capacity_; }
  // Widens `count` 16-bit values of `dtype` from `src` to data() + offset.
  void widen(const void* src, size_t offset, size_t count, DataType dtype);
  // Narrows `count` values from data() + offset to `dst` (round to nearest even).
  void narrow(size_t offset, size_t count, DataType dtype, void* dst) const;
  // For an operation abandoned while MPI may still write into the buffer: it is never freed.
  void leak() { (void)values_.release(); }

 private:
  std::unique_ptr<float[]> values_;
  size_t capacity_;
};

// Keeps the last scratch buffer for the next widened reduction: first-touching fresh memory
// cost ~200 ms per 64 MiB on the test VM, ten times the conversions themselves, and MPI may have
// registered the old buffer already. One per channel (reductions run one at a time per channel;
// a concurrent one just allocates). Buffers above kMaxPooledBytes are not kept.
class WidePool {
 public:
  static constexpr size_t kMaxPooledBytes = size_t{1} << 30;
  std::unique_ptr<WideBuffer> take(size_t count);
  void give(std::unique_ptr<WideBuffer> buffer);

 private:
  std::mutex mutex_;
  std::unique_ptr<WideBuffer> spare_;
};

// Waits for `inner` (a float32 reduction over `wide`), then narrows `count` values from offset
// `offset` of the buffer into `dst` and gives the buffer back to `pool`.
PendingPtr narrowWhenDone(PendingPtr inner, std::unique_ptr<WideBuffer> wide, size_t offset,
                          size_t count, DataType dtype, void* dst, std::shared_ptr<WidePool> pool);

}  // namespace hcoll::backends::mpi
