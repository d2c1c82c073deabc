#include "runtime/response_cache.h"

#include <cstring>

#include "common/op_traits.h"

namespace hcoll::runtime {
namespace {

template <typename T>
void append(std::string* key, const T& value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  key->append(bytes, sizeof(T));
}

}  // namespace

std::string ResponseCache::keyOf(const OpSpec& spec) {
  std::string key;
  keyOf(spec, &key);
  return key;
}

void ResponseCache::keyOf(const OpSpec& spec, std::string* key) {
  if (!spec.autoNamed) {
    *key = spec.name;
    return;
  }
  // Only what matchesLocal compares across ranks: a response's spec is the lowest announcing
  // rank's, and every rank must file it under the same key for the slots to agree.
  key->assign(1, '\0');
  append(key, static_cast<uint8_t>(spec.kind));
  append(key, static_cast<uint8_t>(spec.op));
  append(key, spec.prescale);
  append(key, spec.postscale);
  append(key, spec.root);
  append(key, static_cast<uint8_t>(spec.device == kHostDevice));
  const bool dim0Varies = traitsOf(spec.kind).dim0Varies;
  for (const MemberSpec& m : spec.members) {
    append(key, static_cast<uint8_t>(m.dtype));
    append(key, static_cast<uint32_t>(m.shape.size()));
    for (size_t d = dim0Varies ? 1 : 0; d < m.shape.size(); ++d) append(key, m.shape[d]);
  }
}

int ResponseCache::lookup(const OpSpec& local, const std::string& key, int rank,
                          int size) const {
  auto it = byKey_.find(key);
  if (it == byKey_.end()) return -1;
  return slots_[it->second]->response->matchesLocal(local, rank, size) ? it->second : -1;
}

void ResponseCache::put(ResponsePtr response) {
  if (!enabled()) return;
  ++generation_;
  std::string key = keyOf(response->spec);
  if (auto it = byKey_.find(key); it != byKey_.end()) {
    slots_[it->second]->response = std::move(response);
    touch(it->second);
    return;
  }
  if (byKey_.size() >= capacity_) erase(slots_[lru_.back()]->key);
  int slot;
  if (!freeSlots_.empty()) {
    slot = *freeSlots_.begin();
    freeSlots_.erase(freeSlots_.begin());
  } else {
    slot = static_cast<int>(slots_.size());
    slots_.emplace_back();
  }
  lru_.push_front(slot);
  byKey_[key] = slot;
  slots_[slot] = Entry{std::move(response), std::move(key), lru_.begin()};
}

void ResponseCache::touch(int slot) {
  Entry& e = *slots_[slot];
  lru_.splice(lru_.begin(), lru_, e.lruPosition);
}

void ResponseCache::erase(const std::string& key) {
  auto it = byKey_.find(key);
  if (it == byKey_.end()) return;
  ++generation_;
  int slot = it->second;
  lru_.erase(slots_[slot]->lruPosition);
  slots_[slot].reset();
  byKey_.erase(it);
  freeSlots_.insert(slot);
  // Trim trailing holes so the exchanged bit vector stays short.
  while (!slots_.empty() && !slots_.back()) {
    freeSlots_.erase(static_cast<int>(slots_.size()) - 1);
    slots_.pop_back();
  }
}

}  // namespace hcoll::runtime
