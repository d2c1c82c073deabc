#include "bindings/c/errors.h"

namespace hcoll::bindings {
namespace {

thread_local std::string tLastError;

#define HCOLL_CHECK_CODE_(name, value, text)                                       \
  static_assert(static_cast<int>(HCOLL_##name) == value, "status value changed"); \
  static_assert(static_cast<int>(HCOLL_##name) == value, text);
HCOLL_STATUS_MAP(HCOLL_CHECK_CODE_)
#undef HCOLL_CHECK_CODE_
static_assert(static_cast<int>(Code::kInternal) == HCOLL_ERR_INTERNAL, "Code mirrors hcoll_status_t");
static_assert(static_cast<int>(Code::kInProgress) == HCOLL_IN_PROGRESS, "Code mirrors hcoll_status_t");

}  // namespace

hcoll_status_t fail(hcoll_status_t code, const std::string& message) {
  try {
    tLastError = message;
  } catch (...) {
    // keep the previous message rather than throw across the ABI
  }
  return code;
}

hcoll_status_t toC(const Status& status) {
  auto code = static_cast<hcoll_status_t>(status.code());
  if (status.code() < Code::kSuccess) fail(code, status.message());
  return code;
}

}  // namespace hcoll::bindings

extern "C" HCOLL_API const char* hcoll_last_error(void) {
  return hcoll::bindings::tLastError.c_str();
}

extern "C" HCOLL_API const char* hcoll_status_string(hcoll_status_t status) {
  switch (status) {
#define HCOLL_STATUS_TEXT_(name, value, text) \
  case HCOLL_##name:                          \
    return text;
    HCOLL_STATUS_MAP(HCOLL_STATUS_TEXT_)
#undef HCOLL_STATUS_TEXT_
  }
  return "unknown status";
}
