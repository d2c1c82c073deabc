#pragma once
// The stream/event operations the NCCL backend orders work with, behind an interface so that
// the bookkeeping (StreamOrder) is unit-tested with a fake on machines without a GPU. Streams
// and events are opaque pointers here (cudaStream_t / cudaEvent_t in the CUDA implementation).

#include "common/status.h"

namespace hcoll::backends::nccl {

enum class EventState { kDone, kNotReady, kFailed };

class EventApi {
 public:
  virtual ~EventApi() = default;
  virtual Status createEvent(void** event) = 0;
  virtual void destroyEvent(void* event) = 0;
  virtual Status record(void* event, void* stream) = 0;
  // `stream` waits (on the device) for the last record of `event`.
  virtual Status streamWait(void* stream, void* event) = 0;
  virtual EventState query(void* event, Status* failure) = 0;
};

// The CUDA implementation (events without timing).
EventApi& cudaEventApi();

}  // namespace hcoll::backends::nccl
