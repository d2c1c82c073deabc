#pragma once
// Status translation for the C layer: the thread-local last error, and the guard that turns any
// escaping C++ exception into HCOLL_ERR_INTERNAL / HCOLL_ERR_NO_MEMORY.

#include <exception>
#include <new>
#include <string>

#include "hcoll/hcoll.h"
#include "common/status.h"

namespace hcoll::bindings {

// Records `message` as this thread's last error and returns `code`.
hcoll_status_t fail(hcoll_status_t code, const std::string& message);
// Translates a core Status (recording its message when it failed).
hcoll_status_t toC(const Status& status);

// Runs `body` (returning hcoll_status_t); no exception crosses the C ABI.
template <class Body>
hcoll_status_t guarded(const char* function, Body body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(HCOLL_ERR_NO_MEMORY, std::string(function) + ": out of memory");
  } catch (const std::exception& e) {
    return fail(HCOLL_ERR_INTERNAL, std::string(function) + ": internal error: " + e.what());
  } catch (...) {
    return fail(HCOLL_ERR_INTERNAL, std::string(function) + ": unknown internal error");
  }
}

}  // namespace hcoll::bindings
