#pragma once
// Per-component spdlog loggers ("hcoll.runtime", "hcoll.mpi", ...), all writing to stderr with the
// process's world rank in the pattern. The level comes from HCOLL_LOG_LEVEL.

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace hcoll::logging {

// Sets the level of every hcoll logger (and of those created later) and the rank shown.
void configure(const std::string& level, int worldRank);

// The logger of a component; created on first use, never null.
std::shared_ptr<spdlog::logger> get(const std::string& component);

}  // namespace hcoll::logging
