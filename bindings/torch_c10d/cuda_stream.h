#pragma once

// The current CUDA stream of a device, as the cudaStream_t that hcoll_tensor_t.stream takes.
// Available when the extension is built against a torch with CUDA (HCOLL_C10D_WITH_CUDA);
// otherwise CUDA tensors are refused with a message saying so.

#include <ATen/ATen.h>

#include <string>

namespace hcoll::torch_c10d {

void* currentCudaStream(const at::Device& device, const std::string& call);

}  // namespace hcoll::torch_c10d
