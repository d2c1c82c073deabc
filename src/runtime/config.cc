#include "runtime/config.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <unistd.h>

namespace hcoll::runtime {
namespace {

constexpr double kMaxSeconds = 1e6;
constexpr double kMaxCycleTimeMs = 1e4;

Status badValue(const char* var, const char* value, const char* expected) {
  return invalidArgument(std::string("environment variable ") + var + "='" + value + "' is not " +
                         expected);
}

Status readUnsigned(const char* var, uint64_t max, uint64_t* out) {
  const char* v = std::getenv(var);
  if (v == nullptr || *v == '\0') return Status::ok();
  errno = 0;
  char* end = nullptr;
  unsigned long long x = std::strtoull(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || v[0] == '-' || x > max) {
    return badValue(var, v, "a non-negative integer in range");
  }
  *out = x;
  return Status::ok();
}

// A non-negative number up to `max` (bounded so that it always converts to a clock duration).
Status readNumber(const char* var, double max, double* out) {
  const char* v = std::getenv(var);
  if (v == nullptr || *v == '\0') return Status::ok();
  errno = 0;
  char* end = nullptr;
  double x = std::strtod(v, &end);
  if (errno != 0 || end == v || *end != '\0' || !std::isfinite(x) || x < 0 || x > max) {
    return badValue(var, v,
                    max == kMaxSeconds ? "a number of seconds in [0, 1e6]"
                                       : "a number of milliseconds in [0, 10000]");
  }
  *out = x;
  return Status::ok();
}

}  // namespace

Status Config::fromEnvironment(Config* out) {
  Config c;
  HCOLL_RETURN_IF_ERROR(
      readUnsigned("HCOLL_FUSION_THRESHOLD", UINT64_MAX, &c.fusionThresholdBytes));
  HCOLL_RETURN_IF_ERROR(readNumber("HCOLL_CYCLE_TIME_MS", kMaxCycleTimeMs, &c.cycleTimeMs));
  uint64_t capacity = c.cacheCapacity;
  HCOLL_RETURN_IF_ERROR(readUnsigned("HCOLL_CACHE_CAPACITY", 1u << 20, &capacity));
  c.cacheCapacity = static_cast<uint32_t>(capacity);
  HCOLL_RETURN_IF_ERROR(
      readNumber("HCOLL_STALL_CHECK_TIME_SECONDS", kMaxSeconds, &c.stallCheckSeconds));
  HCOLL_RETURN_IF_ERROR(
      readNumber("HCOLL_STALL_SHUTDOWN_TIME_SECONDS", kMaxSeconds, &c.stallShutdownSeconds));
  if (const char* v = std::getenv("HCOLL_TIMELINE")) c.timelinePath = v;
  if (const char* v = std::getenv("HCOLL_FLIGHT_RECORDER"); v != nullptr && *v != '\0') {
    // Checked now, so that a typo is reported at initialize, not lost at the first stall.
    std::string path = v;
    std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
    if (dir.empty()) dir = "/";
    if (path.back() == '/' || ::access(dir.c_str(), W_OK) != 0) {
      return badValue("HCOLL_FLIGHT_RECORDER", v, "a file path in a writable directory");
    }
    c.flightRecorderPath = path;
  }
  uint64_t callerProgress = 1;
  HCOLL_RETURN_IF_ERROR(readUnsigned("HCOLL_CALLER_PROGRESS", 1, &callerProgress));
  c.callerProgress = callerProgress != 0;
  if (const char* v = std::getenv("HCOLL_BACKEND")) c.backend = v;  // checked against the registry
  if (const char* v = std::getenv("HCOLL_LOG_LEVEL"); v != nullptr && *v != '\0') {
    std::string level = v;
    static const char* const kLevels[] = {"trace", "debug", "info", "warning", "error", "off"};
    bool known = false;
    for (const char* l : kLevels) known = known || level == l;
    if (!known) return badValue("HCOLL_LOG_LEVEL", v, "one of trace|debug|info|warning|error|off");
    c.logLevel = level;
  }
  *out = c;
  return Status::ok();
}

}  // namespace hcoll::runtime
