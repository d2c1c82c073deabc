#include "work.h"

#include <stdexcept>

namespace hcoll::torch_c10d {

HcollWork::HcollWork(std::shared_ptr<const HcollLibrary> lib, c10d::OpType type, int rank,
                     std::string call, hcoll_request_t request, std::vector<at::Tensor> outputs,
                     std::vector<at::Tensor> keepAlive, Finalize finalize)
    : c10d::Work(rank, type),
      lib_(std::move(lib)),
      call_(std::move(call)),
      request_(request),
      outputs_(std::move(outputs)),
      keepAlive_(std::move(keepAlive)),
      finalize_(std::move(finalize)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

HcollWork::~HcollWork() {
  // The last reference goes once the Work completed (the CompletionThread holds one until
  // then): the request is freed here, never while another thread may still wait on it.
  if (request_ != nullptr) lib_->hcoll_request_free(request_);
}

bool HcollWork::progress(double seconds) {
  const hcoll_status_t status = lib_->hcoll_wait(request_, seconds);
  if (status == HCOLL_IN_PROGRESS) return false;
  finishOnce(status);
  return true;
}

void HcollWork::finishOnce(hcoll_status_t status) {
  {
    std::lock_guard<std::mutex> lock(finishMutex_);
    if (finishing_) return;
    finishing_ = true;
  }
  std::exception_ptr error;
  if (status != HCOLL_SUCCESS) {
    const char* message = lib_->hcoll_request_error(request_);
    error = std::make_exception_ptr(std::runtime_error(
        "hcoll " + call_ + " failed: " + lib_->hcoll_status_string(status) +
        (message != nullptr && *message != '\0' ? std::string(": ") + message : "")));
  } else if (finalize_) {
    try {
      finalize_(request_);
    } catch (const std::exception& e) {
      error = std::make_exception_ptr(std::runtime_error("hcoll " + call_ + ": " + e.what()));
    }
  }
  keepAlive_.clear();
  complete(error);
}

void HcollWork::complete(std::exception_ptr error) {
  finish(error);  // c10d::Work: completed_, exception_, wakes wait()
  // Outside any lock: the future runs its callbacks (DDP's comm hook continuations) right here.
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

bool HcollWork::wait(std::chrono::milliseconds timeout) {
  const double seconds = timeout == kNoTimeout ? -1.0 : static_cast<double>(timeout.count()) / 1e3;
  // Drives the operation on this thread when hcoll lets a waiting caller do so.
  TORCH_CHECK(progress(seconds), "hcoll ", call_, ": Work.wait timed out after ", timeout.count(),
              " ms (the operation goes on; wait again or check is_completed())");
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return completed_; });  // the other thread may be finishing it
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

CompletionThread::CompletionThread() : thread_([this] { run(); }) {}

CompletionThread::~CompletionThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CompletionThread::enqueue(c10::intrusive_ptr<HcollWork> work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(work));
  }
  cv_.notify_one();
}

void CompletionThread::run() {
  for (;;) {
    c10::intrusive_ptr<HcollWork> head;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      head = queue_.front();
    }
    // hcoll_wait sleeps inside the library (and drives the round when the communicator lets a
    // waiting caller do so); the slice only bounds how long a stop request goes unnoticed.
    // A stopping process group destroyed its communicator first, so every request ends.
    while (!head->progress(1.0)) {
    }
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.pop_front();
  }
}

}  // namespace hcoll::torch_c10d
