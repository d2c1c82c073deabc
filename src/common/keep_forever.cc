// The process-wide list behind keepForever (keep_forever.h): created on first use, never freed,
// so that it outlives every static destructor that could still be running with MPI active.
#include "common/keep_forever.h"

#include <mutex>
#include <vector>

namespace hcoll {
namespace {

struct KeptList {
  std::mutex mutex;
  std::vector<std::unique_ptr<keep_forever_detail::Kept>> kept;
};

KeptList& keptList() {
  static KeptList* list = new KeptList();  // never destroyed: reachable until the process ends
  return *list;
}

}  // namespace

namespace keep_forever_detail {
void keep(std::unique_ptr<Kept> kept) {
  KeptList& list = keptList();
  std::lock_guard<std::mutex> lock(list.mutex);
  list.kept.push_back(std::move(kept));
}
}  // namespace keep_forever_detail

size_t keptForeverCount() {
  KeptList& list = keptList();
  std::lock_guard<std::mutex> lock(list.mutex);
  return list.kept.size();
}

}  // namespace hcoll
