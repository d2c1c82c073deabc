#include "common/logging.h"

#include <spdlog/sinks/stdout_sinks.h>

#include <mutex>
#include <unordered_map>

namespace hcoll::logging {
namespace {

struct Registry {
  std::mutex mutex;
  spdlog::level::level_enum level = spdlog::level::warn;
  std::string pattern = "[hcoll %n] [%l] %v";
  std::unordered_map<std::string, std::shared_ptr<spdlog::logger>> loggers;
  std::shared_ptr<spdlog::sinks::stderr_sink_mt> sink =
      std::make_shared<spdlog::sinks::stderr_sink_mt>();
};

Registry& registry() {
  static Registry* r = new Registry();  // leaked: loggers outlive static destruction order
  return *r;
}

}  // namespace

void configure(const std::string& level, int worldRank) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.level = level == "warning" ? spdlog::level::warn : spdlog::level::from_str(level);
  r.pattern = "[hcoll rank " + std::to_string(worldRank) + " %n] [%l] %v";
  for (auto& [name, logger] : r.loggers) {
    logger->set_level(r.level);
    logger->set_pattern(r.pattern);
  }
}

std::shared_ptr<spdlog::logger> get(const std::string& component) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.loggers.find(component);
  if (it != r.loggers.end()) return it->second;
  auto logger = std::make_shared<spdlog::logger>(component, r.sink);
  logger->set_level(r.level);
  logger->set_pattern(r.pattern);
  r.loggers.emplace(component, logger);
  return logger;
}

}  // namespace hcoll::logging
