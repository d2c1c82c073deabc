#pragma once
// Responses of past operations, by name, so that a repeated operation is scheduled with one bit
// in a bit-vector AND instead of a trip through the coordinator. Every rank applies the same
// responses in the same order, so slot numbers and LRU order agree everywhere without messages.

#include <cstdint>
#include <list>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/message.h"

namespace hcoll::runtime {

class ResponseCache {
 public:
  explicit ResponseCache(uint32_t capacity) : capacity_(capacity) {}

  bool enabled() const { return capacity_ > 0; }
  // One past the highest slot in use: the number of bits every rank exchanges.
  size_t slotCount() const { return slots_.size(); }
  size_t size() const { return byName_.size(); }

  // The slot whose response this rank's `local` op would replay, or -1.
  int lookup(const OpSpec& local, int rank, int size) const;
  const Response& at(int slot) const { return *slots_[slot]->response; }
  const ResponsePtr& shared(int slot) const { return slots_[slot]->response; }

  // Inserts or replaces the response for its name, evicting the least recently used if full.
  void put(ResponsePtr response);
  void touch(int slot);
  void erase(const std::string& name);

 private:
  struct Entry {
    ResponsePtr response;
    std::list<int>::iterator lruPosition;
  };
  uint32_t capacity_;
  std::vector<std::optional<Entry>> slots_;
  std::unordered_map<std::string, int> byName_;
  std::list<int> lru_;       // front = most recently used
  std::set<int> freeSlots_;  // holes left by erase, reused lowest first
};

}  // namespace hcoll::runtime
