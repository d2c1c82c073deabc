#include "runtime/request.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "backends/backend.h"
#include "backends/device.h"
#include "runtime/output_pool.h"

namespace hcoll::runtime {
namespace {

// Runtime-owned outputs: the output pool on the host, the device backend's memory on a device.
void* allocateOutput(int32_t device, size_t bytes) {
  if (device == kHostDevice) return OutputPool::instance().allocate(bytes);
  backends::DeviceBackend* backend = backends::deviceBackend();
  return backend ? backend->allocate(device, bytes) : nullptr;
}

// `bytes`: what allocateOutput was asked for.
void releaseOutput(int32_t device, void* data, size_t bytes) {
  if (device == kHostDevice) return OutputPool::instance().release(data, bytes);
  if (backends::DeviceBackend* backend = backends::deviceBackend()) backend->release(device, data);
}

}  // namespace

Request::~Request() {
  bool userOwned = allocator_ && allocator_->userOwned();
  // A user allocator's outputs belong to the user once they could be retrieved: the operation
  // succeeded while the caller still held the request.
  bool handedOut = code_ == Code::kSuccess && !releasedInFlight_;
  for (size_t i = 0; i < outputCount_; ++i) {
    const OutputTensor& t = output(i);
    if (t.data == nullptr || t.callerOwned) continue;
    if (!userOwned) {
      const size_t bytes = static_cast<size_t>(numElements(t.shape)) * dataTypeSize(t.dtype);
      releaseOutput(t.device, t.data, bytes == 0 ? 1 : bytes);  // as addOutput asked
    } else if (!handedOut && allocator_->free) {
      allocator_->free(t.device, t.data);  // never given to the user: give it back
    }
  }
}

Code Request::test() const {
  return code_.load(std::memory_order_acquire);
}

Code Request::wait(double timeoutSeconds) const {
  using Clock = std::chrono::steady_clock;
  // Beyond ~30 years a deadline is "forever"; converting such a value (or infinity) to the
  // clock's nanoseconds would overflow into a deadline in the past.
  constexpr double kForeverSeconds = 1e9;
  const bool forever = timeoutSeconds < 0 || !(timeoutSeconds < kForeverSeconds);
  const auto deadline =
      forever ? Clock::time_point::max()
              : Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(timeoutSeconds));
  // The caller drives its own operation when the communicator's thread is idle. Not a wait that
  // only polls (a timeout shorter than the spin below): that one would hold up other callers.
  if (progress_ && code_.load(std::memory_order_acquire) == Code::kInProgress &&
      (forever || timeoutSeconds >= kSpinMicros * 1e-6)) {
    progress_->drive(*this, deadline);
    if (Code c = code_.load(std::memory_order_acquire); c != Code::kInProgress) return c;
  }
  // A small collective completes within microseconds of the wait: poll briefly before paying for
  // a futex sleep and wake-up, yielding so the communicator's thread is never starved of a core.
  const auto spinUntil = std::min(Clock::now() + std::chrono::microseconds(kSpinMicros), deadline);
  while (Clock::now() < spinUntil) {
    Code c = code_.load(std::memory_order_acquire);
    if (c != Code::kInProgress) return c;
    std::this_thread::yield();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (!done_) done_.emplace();
  auto finished = [this] { return code_ != Code::kInProgress; };
  struct Sleeping {
    std::atomic<int>& count;
    explicit Sleeping(std::atomic<int>& c) : count(c) { count.fetch_add(1); }
    ~Sleeping() { count.fetch_sub(1); }
  } sleeping(sleepers_);
  if (forever) {
    done_->wait(lock, finished);
    return code_;
  }
  if (!done_->wait_until(lock, deadline, finished)) return Code::kTimeout;
  return code_;
}

std::string Request::errorMessage() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return message_;
}

OutputTensor& Request::newOutput(DataType dtype, const Shape& shape, int32_t device,
                                 void* stream) {
  OutputTensor* at = &firstOutput_;
  if (outputCount_ > 0) {
    // A whole kept block at once, and the output built in it: growing from nothing moved a
    // temporary into a fresh block (~140 instructions of a small grouped call's ~5000).
    if (moreOutputs_.capacity() == 0) moreOutputs_.reserve(kKeptOutputs);
    at = &moreOutputs_.emplace_back();
  }
  ++outputCount_;
  OutputTensor& t = *at;
  t.data = nullptr;
  t.dtype = dtype;
  t.shape = shape;
  t.device = device;
  t.stream = stream;
  t.callerOwned = false;
  return t;
}

Status Request::addOutput(DataType dtype, const Shape& shape, int32_t device, void* stream,
                          void** data) {
  // The entry first: if that throws, nothing was allocated yet.
  OutputTensor& t = newOutput(dtype, shape, device, stream);
  const size_t bytes = static_cast<size_t>(numElements(shape)) * dataTypeSize(dtype);
  // Always hand out a real pointer, even for empty outputs, so callers can tell "no output".
  const size_t allocBytes = bytes == 0 ? 1 : bytes;
  t.data = allocator_ && allocator_->userOwned() ? allocator_->alloc(device, stream, allocBytes)
                                                 : allocateOutput(device, allocBytes);
  if (t.data == nullptr) {
    dropLastOutput();
    return Status(Code::kNoMemory,
                  "could not allocate an output of " + std::to_string(bytes) + " bytes");
  }
  *data = t.data;
  return Status::ok();
}

void Request::dropLastOutput() {
  if (outputCount_ > 1) moreOutputs_.pop_back();
  --outputCount_;
}

void Request::addCallerOutput(DataType dtype, const Shape& shape, int32_t device,
                              void* stream, void* data) {
  OutputTensor& t = newOutput(dtype, shape, device, stream);
  t.data = data;
  t.callerOwned = true;
}

void Request::setNewChannel(std::unique_ptr<backends::Channel> channel) {
  newChannel_ = std::move(channel);
}

std::unique_ptr<backends::Channel> Request::takeNewChannel() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::move(newChannel_);
}

void Request::complete(const Status& status) {
  if (status.message().empty()) {  // the usual success: nothing for mutex_ to guard
    Code expected = Code::kInProgress;
    if (!code_.compare_exchange_strong(expected, status.code())) return;
    if (sleepers_.load() == 0) return;
    // The sleeper made done_ and is in its wait (it held mutex_ for both).
    std::lock_guard<std::mutex> lock(mutex_);
    done_->notify_all();
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (code_ != Code::kInProgress) return;
  message_ = status.message();
  Code expected = Code::kInProgress;
  if (!code_.compare_exchange_strong(expected, status.code())) {
    message_.clear();  // completed meanwhile without a message: later calls are ignored
    return;
  }
  if (done_) done_->notify_all();  // (none made: no one sleeps, and a later wait sees the code)
}

void Request::release() {
  // Completed (the usual case at hcoll_request_free): a code never returns to in progress, so
  // there is nothing to mark and no lock to take.
  if (code_.load(std::memory_order_acquire) != Code::kInProgress) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (code_ == Code::kInProgress) releasedInFlight_ = true;
}

}  // namespace hcoll::runtime
