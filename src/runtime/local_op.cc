// LocalOps are recycled per thread (local_op.h): the vectors of a finished operation keep their
// capacity for the next one the thread builds.
#include "runtime/local_op.h"

#include "common/thread_cache.h"

namespace hcoll::runtime {
namespace {

// A few per thread: a caller that drives its own operations (the common small-operation loop)
// recycles one and builds the next on the same thread; the communicator's thread keeps a few
// that no caller on it will take, which costs nothing more.
constexpr size_t kSpareOps = 8;

void disposeLocalOp(LocalOp* op) { delete op; }
struct SpareOpsTag {};
using SpareOps = ThreadCache<LocalOp, kSpareOps, SpareOpsTag, disposeLocalOp>;

}  // namespace

std::unique_ptr<LocalOp> makeLocalOp() {
  if (LocalOp* op = SpareOps::take()) return std::unique_ptr<LocalOp>(op);
  return std::make_unique<LocalOp>();
}

void recycleLocalOp(std::unique_ptr<LocalOp> op) {
  if (!op || !SpareOps::keep(op.get())) return;  // (not kept: freed here)
  // (Field by field: assigning a new LocalOp cost as much as the allocations saved.)
  op.release()->clearKeepingStorage();
}

}  // namespace hcoll::runtime
