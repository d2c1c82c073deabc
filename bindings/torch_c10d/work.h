#pragma once

// A c10d Work for one hcoll request, and the thread that completes them. hcoll reports
// completion only when asked (hcoll_test/hcoll_wait), while c10d's futures (DDP's comm hooks,
// Work.get_future()) must complete by themselves: each process group owns one CompletionThread
// that waits on its requests in submission order (c10d calls are issued in the same order on
// every rank) and finishes the Work and its Future.

#include "hcoll_library.h"

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace hcoll::torch_c10d {

class HcollWork : public c10d::Work {
 public:
  // What runs once the request succeeded, before the Work completes (copies into the caller's
  // output tensors, checks of received sizes); a throw fails the Work with that message.
  using Finalize = std::function<void(hcoll_request_t)>;

  // `keepAlive`: every tensor the request reads or writes (the caller's and temporaries);
  // `outputs`: the Work's result() and the future's value.
  HcollWork(std::shared_ptr<const HcollLibrary> lib, c10d::OpType type, int rank, std::string call,
            hcoll_request_t request, std::vector<at::Tensor> outputs,
            std::vector<at::Tensor> keepAlive, Finalize finalize);
  ~HcollWork() override;

  bool wait(std::chrono::milliseconds timeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // Waits up to `seconds` (< 0: forever) for the request; returns true once it completed and
  // this Work was finished (or is being finished by the other thread). Called by the
  // CompletionThread and by wait(): a waiting caller drives hcoll's round itself (no thread
  // hand-off), whichever thread sees the completion first finishes the Work, exactly once.
  bool progress(double seconds);

 private:
  void finishOnce(hcoll_status_t status);
  void complete(std::exception_ptr error);

  std::shared_ptr<const HcollLibrary> lib_;
  std::string call_;
  hcoll_request_t request_;
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keepAlive_;
  Finalize finalize_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::mutex finishMutex_;
  bool finishing_ = false;  // under finishMutex_: a thread took the finishing
};

class CompletionThread {
 public:
  CompletionThread();
  ~CompletionThread();  // stops after every queued Work completed
  CompletionThread(const CompletionThread&) = delete;
  CompletionThread& operator=(const CompletionThread&) = delete;

  void enqueue(c10::intrusive_ptr<HcollWork> work);

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<HcollWork>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace hcoll::torch_c10d
