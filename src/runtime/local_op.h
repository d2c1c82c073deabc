#pragma once
// An operation this rank submitted and that has not completed yet, as the communicator's thread
// keeps it: the spec it announces, the caller's tensors, and the request to complete.

#include <algorithm>
#include <chrono>
#include <list>
#include <memory>
#include <string>
#include <string_view>
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
  std::chrono::steady_clock::time_point submittedAt;  // coarse unless needed (Communicator::submit)
  // When the communicator's thread first saw it queued (unset: not yet): the claim window starts
  // there (ProgressMode::takeAt).
  std::chrono::steady_clock::time_point firstSeen;
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
  // What every rank's input made, when this operation rode in its round's readiness exchange
  // and every rank kept the result (the small-message fold, negotiator.cc): an allreduce's or a
  // reducescatter's whole reduction, an allgather's every part in rank order, a broadcast's
  // root buffer. The executor then only copies (and scales) it. Valid until the round ends.
  const void* foldedResult = nullptr;

  // Back to a new operation's state, keeping the storage of the name and the vectors
  // (recycleLocalOp). Every field above must be reset here.
  void clearKeepingStorage() {
    spec.clearKeepingStorage();
    inputs.clear();
    outputs.clear();
    markers.clear();
    request.reset();
    submittedAt = {};
    firstSeen = {};
    announced = false;
    autoReplayRefused = false;
    callerDrivable = false;
    payloadBytes = 0;
    flightSeq = 0;
    foldedResult = nullptr;
  }
};

// A new operation, and the end of a finished one. Per thread, a few finished operations are kept
// with their name and vectors emptied but not freed, and the thread's next makeLocalOp takes one:
// a small operation's call then allocates none of them (four allocations of ~10 per call).
std::unique_ptr<LocalOp> makeLocalOp();
void recycleLocalOp(std::unique_ptr<LocalOp> op);

// Pending operations in submission order, findable by name. Owned by one thread.
// Up to kLinearUpTo operations are found by comparing names one by one (a loop of small calls
// has one pending: no hashing, no division by a bucket count); beyond, by a hash map, until the
// list empties again. The list and map nodes of taken operations are kept (up to kSpareNodes of
// each) and reused by later ones: neither a loop of small operations nor a training step's
// burst allocates any per call. Of two operations of one name (never from a communicator: its
// in-flight names are unique) the newest is found.
class PendingOps {
 public:
  using List = std::list<std::unique_ptr<LocalOp>>;
  static constexpr size_t kLinearUpTo = 4;

  // Keeping a node never allocates (take() runs where an exception must not start).
  PendingOps() { spareNames_.reserve(kSpareNodes); }

  void add(std::unique_ptr<LocalOp> op) {
    if (spareOps_.empty()) {
      ops_.push_back(std::move(op));
    } else {
      spareOps_.front() = std::move(op);
      ops_.splice(ops_.end(), spareOps_, spareOps_.begin());
    }
    if (indexed_) {
      index(std::prev(ops_.end()));
    } else if (ops_.size() > kLinearUpTo) {
      for (auto at = ops_.begin(); at != ops_.end(); ++at) index(at);
      indexed_ = true;
    }
  }
  LocalOp* find(std::string_view name) const {
    if (indexed_) {
      auto it = byName_.find(name);
      return it == byName_.end() ? nullptr : it->second->get();
    }
    for (auto at = ops_.rbegin(); at != ops_.rend(); ++at) {
      if ((*at)->spec.name == name) return at->get();
    }
    return nullptr;
  }
  // Removes and returns the operation (null if absent).
  std::unique_ptr<LocalOp> take(std::string_view name) {
    List::iterator at;
    if (indexed_) {
      auto it = byName_.find(name);
      if (it == byName_.end()) return nullptr;
      at = it->second;
      ByName::node_type node = byName_.extract(it);
      if (spareNames_.size() < kSpareNodes) spareNames_.push_back(std::move(node));
    } else {
      auto newest = std::find_if(ops_.rbegin(), ops_.rend(),
                                 [&](const auto& op) { return op->spec.name == name; });
      if (newest == ops_.rend()) return nullptr;
      at = std::prev(newest.base());
    }
    return takeAt(at);
  }
  // The same for an operation known by its address (null if it is not here): a loop of small
  // calls has one pending, found without comparing names.
  std::unique_ptr<LocalOp> take(const LocalOp& op) {
    if (indexed_) return take(std::string_view(op.spec.name));
    for (auto at = ops_.begin(); at != ops_.end(); ++at) {
      if (at->get() == &op) return takeAt(at);
    }
    return nullptr;
  }
  bool empty() const { return ops_.empty(); }
  size_t size() const { return ops_.size(); }
  List& all() { return ops_; }

 private:
  // Keyed by a view of the operation's own name (an operation's name does not change once
  // submitted, and the list owns the operation as long as its entry exists): adding one copies
  // no string.
  using ByName = std::unordered_map<std::string_view, List::iterator>;
  static constexpr size_t kSpareNodes = 64;

  // Removes the operation at `at` (its name entry, if indexed, already extracted) and returns
  // it; its list node is kept for reuse.
  std::unique_ptr<LocalOp> takeAt(List::iterator at) {
    auto op = std::move(*at);
    if (spareOps_.size() < kSpareNodes) {
      spareOps_.splice(spareOps_.end(), ops_, at);
    } else {
      ops_.erase(at);
    }
    if (ops_.empty() && indexed_) {
      // (An older operation of a taken name may have left its entry: not the common case.)
      while (!byName_.empty()) {
        ByName::node_type node = byName_.extract(byName_.begin());
        if (spareNames_.size() < kSpareNodes) spareNames_.push_back(std::move(node));
      }
      indexed_ = false;
    }
    return op;
  }

  void index(List::iterator at) {
    const std::string_view name = (*at)->spec.name;
    std::pair<ByName::iterator, bool> inserted;
    if (spareNames_.empty()) {
      inserted = byName_.emplace(name, at);
    } else {
      ByName::node_type node = std::move(spareNames_.back());
      spareNames_.pop_back();
      node.key() = name;
      node.mapped() = at;
      auto result = byName_.insert(std::move(node));
      inserted = {result.position, result.inserted};
      if (!result.inserted) spareNames_.push_back(std::move(result.node));
    }
    if (!inserted.second) {
      // The same name again: the newest wins, and the key must view the newest's name, which
      // lives as long as its entry.
      ByName::node_type node = byName_.extract(inserted.first);
      node.key() = name;
      node.mapped() = at;
      byName_.insert(std::move(node));
    }
  }

  List ops_;
  bool indexed_ = false;  // byName_ holds every operation of ops_ (more than kLinearUpTo came)
  ByName byName_;
  List spareOps_;                           // nodes holding null
  std::vector<ByName::node_type> spareNames_;
};

}  // namespace hcoll::runtime
