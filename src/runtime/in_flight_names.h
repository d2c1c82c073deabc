#pragma once
// The names of a communicator's operations that were submitted and have not finished: a second
// submission under one of them fails with DUPLICATE_NAME. Under the communicator's mutex.
//
// A loop of small calls has one or two names in flight: those sit in a few strings compared
// one by one (a length, then the bytes), with no hashing and no division by a bucket count
// (a 64-bit division is tens of cycles: a hash set cost ~180 instructions and two divisions per
// call). Beyond kFew the rest go to a hash set, so a step with hundreds in flight stays O(1).
// The strings of finished names keep their storage for the next: the loop allocates nothing.

#include <string>
#include <unordered_set>
#include <utility>

namespace hcoll::runtime {

class InFlightNames {
 public:
  static constexpr size_t kFew = 4;

  // False (and nothing added) if `name` is already in flight.
  bool insert(const std::string& name) {
    if (contains(name)) return false;
    if (fewCount_ < kFew) {
      few_[fewCount_].assign(name);
      ++fewCount_;
    } else {
      many_.emplace(name);
    }
    return true;
  }
  // Never allocates (a finished operation's name leaves where no exception may start).
  bool erase(const std::string& name) noexcept {
    for (size_t i = 0; i < fewCount_; ++i) {
      if (few_[i] == name) {
        --fewCount_;
        few_[i].swap(few_[fewCount_]);  // the freed string keeps its storage, after the used ones
        return true;
      }
    }
    if (many_.empty()) return false;
    auto it = many_.find(name);
    if (it == many_.end()) return false;
    many_.erase(it);
    return true;
  }
  bool contains(const std::string& name) const {
    for (size_t i = 0; i < fewCount_; ++i) {
      if (few_[i] == name) return true;
    }
    return !many_.empty() && many_.count(name) != 0;
  }
  size_t size() const { return fewCount_ + many_.size(); }

 private:
  std::string few_[kFew];
  size_t fewCount_ = 0;
  std::unordered_set<std::string> many_;
};

}  // namespace hcoll::runtime
