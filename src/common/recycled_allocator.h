#pragma once
// An allocator for objects made once per call and dropped a moment later, usually on the thread
// that made them (a small operation's request, through std::allocate_shared; a request's
// outputs, through its vector): a few freed blocks are kept per thread (ThreadCache) and the next
// call on that thread takes one instead of calling malloc and free (~130 instructions a block,
// ~2.5 % of a small allreduce's own work).
//
// Every block holds `BlockCount` objects, so that one kept block serves any request for up to
// that many (a grouped call's three outputs as well as one). Larger requests go to operator new.
// allocate_shared and vector rebind the allocator to the types they store: each type has its
// own cache, so every kept block has that type's size.

#include <cstddef>
#include <new>

#include "common/thread_cache.h"

namespace hcoll {

template <typename T, std::size_t BlockCount = 1>
class RecycledAllocator {
 public:
  using value_type = T;
  template <typename U>
  struct rebind {
    using other = RecycledAllocator<U, BlockCount>;
  };
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__,
                "kept blocks come from plain operator new");
  static_assert(BlockCount >= 1, "a block holds at least one object");

  RecycledAllocator() noexcept = default;
  template <typename U>
  RecycledAllocator(const RecycledAllocator<U, BlockCount>&) noexcept {}  // NOLINT: rebinding

  T* allocate(std::size_t n) {
    if (n > BlockCount) return static_cast<T*>(::operator new(n * sizeof(T)));
    if (void* block = Blocks::take()) return static_cast<T*>(block);
    return static_cast<T*>(::operator new(BlockCount * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n <= BlockCount && Blocks::keep(p)) return;
    ::operator delete(p);
  }

  template <typename U>
  bool operator==(const RecycledAllocator<U, BlockCount>&) const noexcept { return true; }
  template <typename U>
  bool operator!=(const RecycledAllocator<U, BlockCount>&) const noexcept { return false; }

 private:
  static void dispose(void* block) { ::operator delete(block); }
  // The tag is this allocator type: one cache per T and block size.
  using Blocks = ThreadCache<void, 8, RecycledAllocator, &RecycledAllocator::dispose>;
};

}  // namespace hcoll
