#pragma once
// A lock for critical sections of a few loads and stores that every call of the C API enters
// (the handle tables). An uncontended pthread mutex costs two locked instructions and two
// library calls per use; this costs one locked exchange, and unlocking is a plain release store.
// Under contention it spins briefly, then yields: on an oversubscribed machine the holder may
// have been preempted, and spinning would only delay it. Satisfies Lockable (std::lock_guard).

#include <atomic>
#include <thread>

namespace hcoll {

class SpinLock {
 public:
  void lock() noexcept {
    unsigned spins = 0;
    while (locked_.exchange(true, std::memory_order_acquire)) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins < kSpinsBeforeYield) {
          relax();
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  static constexpr unsigned kSpinsBeforeYield = 64;
  static void relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  std::atomic<bool> locked_{false};
};

}  // namespace hcoll
