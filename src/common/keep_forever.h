#pragma once
// The one place where hcoll keeps what it gave up on: a backend step abandoned after its peers
// were lost (runtime/bounded_wait.h: the Pending and the buffers it reads or writes), and a
// transport's own send buffers whose requests were freed while still active (the MPI backend's
// notices and stall notes). MPI (or a device) may still complete such work and touch its memory
// at any time, so it is never destroyed: it stays reachable from a process-wide list until the
// process exits, which LeakSanitizer does not report as a leak. Kept objects never move (each
// lives in its own allocation), and moving a std::vector or std::deque into it keeps the
// addresses of its elements.

#include <cstddef>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

namespace hcoll {

namespace keep_forever_detail {
struct Kept {
  virtual ~Kept() = default;
};
template <typename... T>
struct KeptValues final : Kept {
  explicit KeptValues(T&&... v) : values(std::move(v)...) {}
  std::tuple<T...> values;
};
void keep(std::unique_ptr<Kept> kept);
}  // namespace keep_forever_detail

// Moves `values` (rvalues) into the process-wide list, together: never destroyed.
template <typename... T>
void keepForever(T&&... values) {
  static_assert((!std::is_lvalue_reference_v<T> && ...), "keepForever takes what it is given");
  keep_forever_detail::keep(
      std::make_unique<keep_forever_detail::KeptValues<T...>>(std::move(values)...));
}

// How many keepForever calls the process made (for tests and diagnostics).
size_t keptForeverCount();

}  // namespace hcoll
