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

std::vector<std::pair<size_t, size_t>> planBatches(const std::vector<size_t>& memberBytes,
                                                   const std::vector<DataType>& dtypes,
                                                   bool reduces, size_t threshold) {
  std::vector<std::pair<size_t, size_t>> batches;
  size_t begin = 0;
  size_t bytes = 0;
  for (size_t i = 0; i < memberBytes.size(); ++i) {
    const bool fits = bytes + memberBytes[i] <= threshold &&
                      (i == begin || !reduces || dtypes[begin] == dtypes[i]);
    if (!fits && i > begin) {
      batches.emplace_back(begin, i);
      begin = i;
      bytes = 0;
    }
    bytes += memberBytes[i];
  }
  if (begin < memberBytes.size()) batches.emplace_back(begin, memberBytes.size());
  return batches;
}

}  // namespace hcoll::runtime
