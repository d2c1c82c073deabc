#pragma once
// Executes a round's responses on this rank: matches each to the local operation of that name,
// fuses compatible consecutive ones into fusion buffers up to the threshold, drives the backend,
// attaches outputs and completes requests.

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "runtime/config.h"
#include "runtime/local_op.h"
#include "runtime/logging.h"
#include "runtime/message.h"
#include "runtime/stats.h"

namespace hcoll::runtime {

class Executor {
 public:
  using Finish = std::function<void(std::unique_ptr<LocalOp>, const Status&)>;

  Executor(backends::Channel& channel, const Config& config, const std::atomic<bool>& abort,
           CommStats& stats, Finish finish);

  // Runs `responses` in order. Every local op a response names is taken out of `pending` and
  // handed to `finish` with its final status.
  void execute(const std::vector<Response>& responses, PendingOps& pending);

 private:
  struct Item;  // one member tensor of one response
  void runFusible(const std::vector<const Response*>& run, PendingOps& pending);
  Status runBatch(OpKind kind, const std::vector<Item>& items);
  Status allreduceBatch(const std::vector<Item>& items);
  Status allgatherBatch(const std::vector<Item>& items);
  Status broadcastBatch(const std::vector<Item>& items);
  Status reducescatterBatch(const std::vector<Item>& items);
  Status alltoall(const Response& r, LocalOp& op);
  Status commOp(const Response& r, LocalOp* op);
  Status submitAndWait(backends::PendingPtr pending, size_t bytes, size_t tensors);

  backends::Channel& channel_;
  const Config& config_;
  const std::atomic<bool>& abort_;
  CommStats& stats_;
  Finish finish_;
  int rank_;
  int size_;
};

}  // namespace hcoll::runtime
