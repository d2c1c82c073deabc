#pragma once
// Generation-checked handle tables. A handle packs a type tag, a generation and a slot index, so
// a freed, destroyed, stale (from before a shutdown) or garbage handle is recognised and
// rejected instead of being dereferenced.

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "common/spin_lock.h"

namespace hcoll::bindings {

template <class T>
class HandleTable {
 public:
  explicit HandleTable(uint64_t tag) : tag_(tag & 0xf) {}

  uintptr_t insert(std::shared_ptr<T> object) {
    std::lock_guard<SpinLock> lock(lock_);
    uint32_t index;
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
    } else {
      index = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    slots_[index].object = std::move(object);
    return encode(index, slots_[index].generation);
  }

  std::shared_ptr<T> lookup(const void* handle) const {
    std::lock_guard<SpinLock> lock(lock_);
    const Slot* slot = find(handle);
    return slot ? slot->object : nullptr;
  }

  // Invalidates the handle; returns its object (null if the handle was not valid).
  std::shared_ptr<T> remove(const void* handle) {
    std::lock_guard<SpinLock> lock(lock_);
    Slot* slot = const_cast<Slot*>(find(handle));
    if (!slot) return nullptr;
    auto object = std::move(slot->object);
    retire(static_cast<uint32_t>(slot - slots_.data()));
    return object;
  }

  // Invalidates every handle; returns the objects so the caller decides when they die.
  std::vector<std::shared_ptr<T>> clear() {
    std::lock_guard<SpinLock> lock(lock_);
    std::vector<std::shared_ptr<T>> objects;
    for (uint32_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].object) {
        objects.push_back(std::move(slots_[i].object));
        retire(i);
      }
    }
    return objects;
  }

 private:
  struct Slot {
    std::shared_ptr<T> object;
    uint32_t generation = 1;
  };
  static constexpr uint64_t kGenerationMask = (1ull << 28) - 1;

  uintptr_t encode(uint32_t index, uint32_t generation) const {
    return static_cast<uintptr_t>((tag_ << 60) | ((generation & kGenerationMask) << 32) |
                                  (static_cast<uint64_t>(index) + 1));
  }
  const Slot* find(const void* handle) const {
    auto h = reinterpret_cast<uint64_t>(handle);
    if ((h >> 60) != tag_) return nullptr;
    uint64_t index = (h & 0xffffffffull);
    if (index == 0 || index > slots_.size()) return nullptr;
    const Slot& slot = slots_[index - 1];
    if (!slot.object || (slot.generation & kGenerationMask) != ((h >> 32) & kGenerationMask)) {
      return nullptr;
    }
    return &slot;
  }
  void retire(uint32_t index) {
    slots_[index].object.reset();
    slots_[index].generation = (slots_[index].generation % kGenerationMask) + 1;  // never 0
    free_.push_back(index);
  }

  const uint64_t tag_;
  // Every call of the C API looks a handle up: a spin lock (common/spin_lock.h), not a mutex.
  mutable SpinLock lock_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
};

}  // namespace hcoll::bindings
