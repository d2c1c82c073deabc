// LocalOps are recycled per thread (local_op.h): the vectors of a finished operation keep their
// capacity for the next one the thread builds.
#include "runtime/local_op.h"

namespace hcoll::runtime {
namespace {

// A few per thread: a caller that drives its own operations (the common small-operation loop)
// recycles one and builds the next on the same thread; the communicator's thread keeps a few
// that no caller on it will take, which costs nothing more.
constexpr size_t kSpareOps = 8;

// Set when this thread's spares are destroyed (thread exit): an operation finished later on the
// thread (a communicator stopped from an exit handler) is then freed, not kept. Trivially
// destructible, so it stays readable until the thread's storage goes.
thread_local bool tSparesGone = false;

struct Spares {
  Spares() { ops.reserve(kSpareOps); }  // keeping one never allocates
  ~Spares() { tSparesGone = true; }
  std::vector<std::unique_ptr<LocalOp>> ops;
};
thread_local Spares tSpares;

}  // namespace

std::unique_ptr<LocalOp> makeLocalOp() {
  if (tSparesGone || tSpares.ops.empty()) return std::make_unique<LocalOp>();
  std::unique_ptr<LocalOp> op = std::move(tSpares.ops.back());
  tSpares.ops.pop_back();
  return op;
}

void recycleLocalOp(std::unique_ptr<LocalOp> op) {
  if (!op || tSparesGone || tSpares.ops.size() >= kSpareOps) return;
  // (Field by field: assigning a new LocalOp cost as much as the allocations saved.)
  op->clearKeepingStorage();
  tSpares.ops.push_back(std::move(op));
}

}  // namespace hcoll::runtime
