#include "cuda_stream.h"

#if HCOLL_C10D_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace hcoll::torch_c10d {

void* currentCudaStream(const at::Device& device, const std::string& call) {
#if HCOLL_C10D_WITH_CUDA
  // The caller's current stream: hcoll orders the collective after the work enqueued on it.
  return static_cast<void*>(c10::cuda::getCurrentCUDAStream(device.index()).stream());
#else
  TORCH_CHECK(false, "hcoll ", call, ": a CUDA tensor (", device,
              "), but this extension was "
              "built against a torch without CUDA");
#endif
}

}  // namespace hcoll::torch_c10d
