#pragma once
// The completion state of one submitted operation, shared by the caller's handle and the
// communicator's thread. Outputs are attached by the thread before it completes the request.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/recycled_allocator.h"
#include "common/status.h"
#include "common/types.h"

namespace hcoll::backends {
class Channel;
}

namespace hcoll::runtime {

// Where outputs come from: the user's allocator (then the user owns them) or malloc.
struct OutputAllocator {
  std::function<void*(int32_t device, void* stream, size_t bytes)> alloc;  // empty = malloc
  std::function<void(int32_t device, void* ptr)> free;
  bool userOwned() const { return static_cast<bool>(alloc); }
};

// An output tensor of a request. Runtime-owned data is freed with the request.
struct OutputTensor {
  void* data = nullptr;
  DataType dtype = DataType::kFloat32;
  // Up to Shape::kInline dims inside the object (an allocation fewer per output: a grouped
  // allgather of 3 members made 6 mallocs and frees for them). hcoll_request_output hands the
  // caller a pointer to these dims only once the request succeeded, and the outputs grow only
  // before that (the executor adds outputs, then completes), so the dims no longer move.
  Shape shape;
  int32_t device = kHostDevice;
  void* stream = nullptr;
  bool callerOwned = false;  // a *_into output: the caller's memory, never freed here
};

class Request;

// Lets a caller that waits on a request run its communicator's negotiation and execution itself
// while the communicator's thread is idle (the waiting thread makes progress), instead of two
// thread hand-offs per operation. Implemented by the communicator.
class CallerProgress {
 public:
  virtual ~CallerProgress() = default;
  // Runs rounds until `request` completes, nothing more can run now, or `giveUpAt` passes while
  // peers have not joined; returns at once if another thread is driving. Never blocks on peers
  // beyond `giveUpAt` (a round that already started executing finishes first).
  virtual void drive(const Request& request, std::chrono::steady_clock::time_point giveUpAt) = 0;
};

class Request {
 public:
  static constexpr int kSpinMicros = 50;  // wait() polls this long before sleeping

  explicit Request(std::shared_ptr<const OutputAllocator> allocator)
      : allocator_(std::move(allocator)) {}
  ~Request();
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  // kInProgress until completed, then the final code.
  Code test() const;
  // Blocks up to timeoutSeconds (< 0: forever); kTimeout if still in progress (the C API reports
  // that as HCOLL_IN_PROGRESS: only the wait timed out, not the operation).
  Code wait(double timeoutSeconds) const;
  std::string errorMessage() const;

  // Room for `n` outputs in all (a grouped operation's members: one allocation, not log2(n)).
  void reserveOutputs(size_t n) {
    if (n > 1) moreOutputs_.reserve(n - 1);
  }
  // Allocates an output of `shape` (fails with kNoMemory) and gives its data pointer. Only the
  // communicator's thread calls this, before complete().
  Status addOutput(DataType dtype, const Shape& shape, int32_t device, void* stream,
                   void** data);
  // Records the caller's output of a *_into operation (its memory, viewed with the result's
  // shape) so that hcoll_request_output can describe it. Only the communicator's thread calls it.
  void addCallerOutput(DataType dtype, const Shape& shape, int32_t device, void* stream,
                       void* data);
  // Alltoall's rows from each rank (its one output's). Their storage comes from a per-thread
  // block cache, as the outputs' does: two vectors (a list of one) were two mallocs and frees in
  // every small alltoall.
  static constexpr size_t kKeptSplits = 8;  // ranks: communicators up to this size
  using Splits = std::vector<int64_t, RecycledAllocator<int64_t, kKeptSplits>>;
  void setReceivedSplits(Splits splits) {
    receivedSplits_ = std::move(splits);
    hasReceivedSplits_ = true;
  }
  void setNewChannel(std::unique_ptr<backends::Channel> channel);

  // Set at submission, before the caller sees the request: wait() may drive through it. It must
  // outlive the request (a communicator's seat is never freed: communicator.h).
  void setProgress(CallerProgress* progress) { progress_ = progress; }

  // Marks the request finished; wakes waiters. Later calls are ignored.
  void complete(const Status& status);

  // The caller let go of its handle (hcoll_request_free). If the operation is still in flight,
  // its outputs can never be handed out: a user allocator's buffers then go back through `free`.
  void release();

  // A request's outputs: the first inside the request (nearly every operation has one output or
  // none: no storage to take and give back, ~80 instructions of a small allgather_into), the rest
  // in a vector whose storage comes from a per-thread block cache (common/recycled_allocator.h),
  // blocks of up to kKeptOutputs: its allocation was a malloc and a free (~250 instructions) in
  // every small allgather, reducescatter, alltoall and *_into call, and in a grouped one
  // (SyncBatchNorm's three members).
  static constexpr size_t kKeptOutputs = 4;
  using Outputs = std::vector<OutputTensor, RecycledAllocator<OutputTensor, kKeptOutputs>>;

  // Valid once test() != kInProgress.
  size_t outputCount() const { return outputCount_; }
  // i < outputCount().
  const OutputTensor& output(size_t i) const { return i == 0 ? firstOutput_ : moreOutputs_[i - 1]; }
  // Null if the request has none (not an alltoall).
  const Splits* receivedSplits() const { return hasReceivedSplits_ ? &receivedSplits_ : nullptr; }
  std::unique_ptr<backends::Channel> takeNewChannel();

 private:
  // Appends an output described by the arguments (data still null).
  OutputTensor& newOutput(DataType dtype, const Shape& shape, int32_t device, void* stream);
  // Removes the last output (one whose memory could not be had).
  void dropLastOutput();

  mutable std::mutex mutex_;
  // Made by the first wait() that sleeps (under mutex_): most requests complete while their
  // caller drives or polls, and destroying a condition variable is a locked instruction (~6 ns
  // on this VM) in every small operation.
  mutable std::optional<std::condition_variable> done_;
  // Completion without a message (success) stores the code without mutex_, and takes it only
  // to wake a waiter that sleeps: wait() counts itself in `sleepers_` (under mutex_) before it
  // looks at the code a last time, complete() looks at `sleepers_` after it stored the code
  // (both sequentially consistent), so one of the two sees the other.
  std::atomic<Code> code_{Code::kInProgress};
  mutable std::atomic<int> sleepers_{0};
  std::string message_;  // under mutex_; written only with an error code
  bool releasedInFlight_ = false;  // under mutex_
  std::shared_ptr<const OutputAllocator> allocator_;
  OutputTensor firstOutput_;  // output 0, when outputCount_ > 0
  Outputs moreOutputs_;       // outputs 1, 2, ...
  size_t outputCount_ = 0;
  Splits receivedSplits_;
  bool hasReceivedSplits_ = false;
  std::unique_ptr<backends::Channel> newChannel_;
  CallerProgress* progress_ = nullptr;  // null: only the communicator's thread progresses
};

// A new request. Its block (the request and its shared count) is kept per thread when freed and
// reused by the thread's next one (common/recycled_allocator.h): one per call.
inline std::shared_ptr<Request> makeRequest(std::shared_ptr<const OutputAllocator> allocator) {
  return std::allocate_shared<Request>(RecycledAllocator<Request>(), std::move(allocator));
}

}  // namespace hcoll::runtime
