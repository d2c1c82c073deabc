#pragma once

// torch tensors described as hcoll_tensor_t, and c10d's reduce ops as hcoll's. Every check here
// is local to the calling rank; the process group turns a failure into an exception on every
// rank (see ProcessGroupHcoll::failLocally).

#include <hcoll/hcoll.h>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <deque>
#include <string>
#include <vector>

namespace hcoll::torch_c10d {

hcoll_dtype_t toHcollDtype(at::ScalarType type, const std::string& call);
hcoll_reduce_op_t toHcollOp(const c10d::ReduceOp& op, const std::string& call);

// Descriptors of a call's tensors. The descriptors point into this object (shapes) and into the
// tensors (data), which the caller keeps alive until the request completes; hcoll copies the
// descriptors themselves at the call.
class TensorDescs {
 public:
  // Describes `t` (dense, C-contiguous, CPU or CUDA) with shape `shape` (default: t's own; a
  // 0-d tensor may be described as [1]); throws c10::Error naming `call` otherwise.
  const hcoll_tensor_t* add(const at::Tensor& t, const std::string& call,
                            std::vector<int64_t> shape = {}, bool useOwnShape = true);
  const hcoll_tensor_t* data() const { return descs_.data(); }
  int size() const { return static_cast<int>(descs_.size()); }
  const hcoll_tensor_t& operator[](size_t i) const { return descs_[i]; }

 private:
  std::deque<std::vector<int64_t>> shapes_;  // deque: stable addresses as it grows
  std::vector<hcoll_tensor_t> descs_;
};

// The tensors of one call must all be CPU, or all be CUDA on one device; returns the device
// (HCOLL_DEVICE_HOST or the CUDA ordinal) or throws naming `call`.
int32_t commonDevice(const std::vector<at::Tensor>& tensors, const std::string& call);

// Shape `t` as [rows, ...] with t's trailing dimensions (a 0-d tensor is [1]).
std::vector<int64_t> rowsShape(const at::Tensor& t, int64_t rows);

}  // namespace hcoll::torch_c10d
