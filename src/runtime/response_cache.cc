#include "runtime/response_cache.h"

namespace hcoll::runtime {

int ResponseCache::lookup(const OpSpec& local, int rank, int size) const {
  auto it = byName_.find(local.name);
  if (it == byName_.end()) return -1;
  return slots_[it->second]->response->matchesLocal(local, rank, size) ? it->second : -1;
}

void ResponseCache::put(ResponsePtr response) {
  if (!enabled()) return;
  const std::string& name = response->spec.name;
  if (auto it = byName_.find(name); it != byName_.end()) {
    slots_[it->second]->response = response;
    touch(it->second);
    return;
  }
  if (byName_.size() >= capacity_) erase(slots_[lru_.back()]->response->spec.name);
  int slot;
  if (!freeSlots_.empty()) {
    slot = *freeSlots_.begin();
    freeSlots_.erase(freeSlots_.begin());
  } else {
    slot = static_cast<int>(slots_.size());
    slots_.emplace_back();
  }
  lru_.push_front(slot);
  byName_[name] = slot;
  slots_[slot] = Entry{std::move(response), lru_.begin()};
}

void ResponseCache::touch(int slot) {
  Entry& e = *slots_[slot];
  lru_.splice(lru_.begin(), lru_, e.lruPosition);
}

void ResponseCache::erase(const std::string& name) {
  auto it = byName_.find(name);
  if (it == byName_.end()) return;
  int slot = it->second;
  lru_.erase(slots_[slot]->lruPosition);
  slots_[slot].reset();
  byName_.erase(it);
  freeSlots_.insert(slot);
  // Trim trailing holes so the exchanged bit vector stays short.
  while (!slots_.empty() && !slots_.back()) {
    freeSlots_.erase(static_cast<int>(slots_.size()) - 1);
    slots_.pop_back();
  }
}

}  // namespace hcoll::runtime
