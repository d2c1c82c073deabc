#include "runtime/batch_plan.h"

#include "common/op_traits.h"

namespace hcoll::runtime {

bool sameFusionKey(const OpSpec& a, const OpSpec& b) {
  // Responses carry rank 0's spec, so comparing devices gives the same runs on every rank.
  if (a.kind != b.kind || a.device != b.device) return false;
  if (traitsOf(a.kind).reduces) {
    return a.op == b.op && a.prescale == b.prescale && a.postscale == b.postscale;
  }
  if (a.kind == OpKind::kBroadcast) return a.root == b.root;
  return true;
}

}  // namespace hcoll::runtime
