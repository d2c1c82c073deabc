#pragma once
// Responses of past operations, by name, so that a repeated operation is scheduled with one bit
// in a bit-vector AND instead of a trip through the coordinator. Every rank applies the same
// responses in the same order, so slot numbers and LRU order agree everywhere without messages.
// Operations named automatically ("<op>.<n>", a new name every call) are cached by what every
// rank's spec of them shares instead (keyOf): the negotiator checks that the ranks replay the
// same call (negotiator.cc).

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
  size_t size() const { return byKey_.size(); }

  // The key a response is cached under: its operation's name, or for an operation named
  // automatically its signature, the same on every rank (kind, reduction, scales, root, host or
  // device, member dtypes and shapes less a varying dim0; what differs per rank, as allgather's
  // dim0 or alltoall's splits, is left to matchesLocal), so that the next unnamed call of the
  // same kind and shape replays it. Such a key starts with a NUL byte, which no name (a C
  // string) contains.
  static std::string keyOf(const OpSpec& spec);
  // The same into *key, whose capacity is reused (a round looks up every unnamed call's key).
  static void keyOf(const OpSpec& spec, std::string* key);

  // The slot whose response this rank's `local` op would replay, or -1. `key`: keyOf(local).
  int lookup(const OpSpec& local, const std::string& key, int rank, int size) const;
  int lookup(const OpSpec& local, int rank, int size) const {
    return lookup(local, keyOf(local), rank, size);
  }
  const Response& at(int slot) const { return *slots_[slot]->response; }
  const ResponsePtr& shared(int slot) const { return slots_[slot]->response; }

  // Inserts or replaces the response under its key, evicting the least recently used if full.
  void put(ResponsePtr response);
  void touch(int slot);
  void erase(const std::string& key);
  // Changes whenever a lookup's answer may change (put, erase): a lookup's result stays valid
  // for the same local spec while this is unchanged.
  uint64_t generation() const { return generation_; }

 private:
  struct Entry {
    ResponsePtr response;
    std::string key;
    std::list<int>::iterator lruPosition;
  };
  uint32_t capacity_;
  std::vector<std::optional<Entry>> slots_;
  std::unordered_map<std::string, int> byKey_;
  std::list<int> lru_;       // front = most recently used
  std::set<int> freeSlots_;  // holes left by erase, reused lowest first
  uint64_t generation_ = 0;
};

}  // namespace hcoll::runtime
