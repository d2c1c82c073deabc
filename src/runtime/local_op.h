#pragma once
// An operation this rank submitted and that has not completed yet, as the communicator's thread
// keeps it: the spec it announces, the caller's tensors, and the request to complete.

#include <chrono>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/device.h"
#include "runtime/message.h"
#include "runtime/request.h"
#include "common/types.h"

namespace hcoll::runtime {

struct LocalOp {
  OpSpec spec;
  // One per member (broadcast: the buffer). No shape: member i's is spec.members[i].shape.
  std::vector<TensorDesc> inputs;
  // allreduce and *_into: the caller's output of each member; empty: runtime-owned outputs.
  // Allreduce outputs have the input's shape and keep none; *_into outputs keep their own.
  std::vector<TensorDesc> outputs;
  // CUDA tensors: per member, the caller's stream as it was at submission.
  std::vector<backends::StreamMarkerPtr> markers;
  std::shared_ptr<Request> request;
  std::chrono::steady_clock::time_point submittedAt;
  bool announced = false;  // sent to the coordinator in full
  // Automatically named: whether a round refused to replay it from the cache because the ranks'
  // automatically named calls differed; it then goes to the coordinator, which pairs calls by
  // name.
  bool autoReplayRefused = false;
  // A waiting caller may run this operation's rounds on its own thread (Communicator::drive):
  // host memory (no device context on the caller's thread), not join or communicator creation.
  bool callerDrivable = false;
  // What this rank moves (allgather: the gathered result): callers drive only small rounds.
  size_t payloadBytes = 0;
  uint64_t flightSeq = 0;  // this op's entry in the communicator's flight recorder
  // The reduction of every rank's input, when this allreduce rode in its round's readiness
  // exchange and every rank kept the result (the small-message fold, negotiator.cc): the
  // executor then only applies the postscale. Valid until the round ends.
  const void* foldedResult = nullptr;
};

// Pending operations in submission order, findable by name. Owned by one thread.
class PendingOps {
 public:
  using List = std::list<std::unique_ptr<LocalOp>>;

  void add(std::unique_ptr<LocalOp> op) {
    auto name = op->spec.name;
    ops_.push_back(std::move(op));
    byName_[name] = std::prev(ops_.end());
  }
  LocalOp* find(const std::string& name) const {
    auto it = byName_.find(name);
    return it == byName_.end() ? nullptr : it->second->get();
  }
  // Removes and returns the operation (null if absent).
  std::unique_ptr<LocalOp> take(const std::string& name) {
    auto it = byName_.find(name);
    if (it == byName_.end()) return nullptr;
    auto op = std::move(*it->second);
    ops_.erase(it->second);
    byName_.erase(it);
    return op;
  }
  bool empty() const { return ops_.empty(); }
  size_t size() const { return ops_.size(); }
  List& all() { return ops_; }

 private:
  List ops_;
  std::unordered_map<std::string, List::iterator> byName_;
};

}  // namespace hcoll::runtime
