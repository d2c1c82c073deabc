#pragma once
// Recoverable errors are values: a Status carries one of the public codes and a message.

#include <memory>
#include <string>
#include <utility>

namespace hcoll {

// Mirrors hcoll_status_t (the bindings static_assert that the numbers agree).
enum class Code : int {
  kSuccess = 0,
  kInProgress = 1,
  kInvalidArgument = -1,
  kInvalidHandle = -2,
  kNotInitialized = -3,
  kMismatch = -4,
  kDuplicateName = -5,
  kNotMember = -6,
  kUnsupported = -7,
  kTimeout = -8,
  kShutDown = -9,
  kBackend = -10,
  kNoMemory = -11,
  kInternal = -12,
};

class Status {
 public:
  Status() = default;
  Status(Code code, std::string message)
      : code_(code),
        message_(message.empty() ? nullptr
                                 : std::make_shared<const std::string>(std::move(message))) {}

  static Status ok() { return Status(); }
  bool isOk() const { return code_ == Code::kSuccess; }
  Code code() const { return code_; }
  const std::string& message() const { return message_ ? *message_ : noMessage(); }

 private:
  static const std::string& noMessage() {
    static const std::string empty;
    return empty;
  }
  Code code_ = Code::kSuccess;
  // Shared and immutable: a success (no message) is copied, moved and destroyed without
  // touching a string (a small operation passes ~20 statuses; each string copy was ~30
  // instructions), and copying a failure never allocates, so never throws.
  std::shared_ptr<const std::string> message_;
};

inline Status invalidArgument(std::string m) { return Status(Code::kInvalidArgument, std::move(m)); }
inline Status mismatch(std::string m) { return Status(Code::kMismatch, std::move(m)); }
inline Status backendError(std::string m) { return Status(Code::kBackend, std::move(m)); }
inline Status internalError(std::string m) { return Status(Code::kInternal, std::move(m)); }
inline Status shutDown(std::string m) { return Status(Code::kShutDown, std::move(m)); }

// Returns early from the enclosing function when `expr` yields a failed Status.
#define HCOLL_RETURN_IF_ERROR(expr)       \
  do {                                    \
    ::hcoll::Status status_ = (expr);     \
    if (!status_.isOk()) return status_;  \
  } while (0)

}  // namespace hcoll
