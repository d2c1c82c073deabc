#pragma once
// The time for bookkeeping that only ever compares against bounds of a second or more: the flight
// recorder's state times, a negotiation round's start (its stall bound), the once-a-second checks
// of a round. A precise read (steady_clock, CLOCK_MONOTONIC) costs ~21 ns on this VM and a small
// operation took four of them (~10 % of an 8-byte allreduce); CLOCK_MONOTONIC_COARSE costs ~3 ns.
// It is the same clock at the kernel tick's resolution, so its values mix with steady_clock's.
// It lags by up to a tick nominally (clock_getres: 4 ms here) but by up to 7.6 ms measured on the
// test VM (a tickless kernel skips ticks): waits and windows below ~10 ms, and any deadline a
// caller sees (a wait dated by it returned 2 ms early), must keep steady_clock.

#include <chrono>
#include <ctime>

namespace hcoll {

inline std::chrono::steady_clock::time_point coarseNow() {
#if defined(__linux__) && defined(CLOCK_MONOTONIC_COARSE) && defined(__GLIBCXX__)
  // libstdc++'s steady_clock is CLOCK_MONOTONIC: the coarse variant counts from the same origin.
  timespec ts;
  if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) == 0) {
    return std::chrono::steady_clock::time_point(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec)));
  }
#endif
  return std::chrono::steady_clock::now();
}

}  // namespace hcoll
