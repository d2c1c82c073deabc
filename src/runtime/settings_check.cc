#include "runtime/settings_check.h"

#include <atomic>
#include <cstdio>
#include <map>
#include <sstream>
#include <vector>

#include "hcoll/config.h"
#include "runtime/bounded_wait.h"

namespace hcoll::runtime {
namespace {

// One checked setting: its variable and its value as text (numbers in shortest round-trip form,
// so that a difference in the last bit is shown, not hidden by rounding).
struct Setting {
  const char* variable;
  std::string value;
};

std::string exact(double x) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", x);
  return buf;
}

// The checked settings. HCOLL_CYCLE_TIME_MS is not among them: it only delays when a rank
// enters a round, and rounds are collective, so it cannot change what ranks send. Stall check
// time, timeline, flight recorder and log level are local reporting.
std::vector<Setting> checkedSettings(const Config& c) {
  return {
      {"hcoll version", std::to_string(HCOLL_VERSION_MAJOR) + "." +
                            std::to_string(HCOLL_VERSION_MINOR) + "." +
                            std::to_string(HCOLL_VERSION_PATCH)},
      {"HCOLL_FUSION_THRESHOLD", std::to_string(c.fusionThresholdBytes)},
      {"HCOLL_CACHE_CAPACITY", std::to_string(c.cacheCapacity)},
      {"HCOLL_STALL_SHUTDOWN_TIME_SECONDS", exact(c.stallShutdownSeconds)},
  };
}

std::vector<uint8_t> encode(const std::vector<Setting>& settings) {
  std::string text;
  for (const Setting& s : settings) text += std::string(s.variable) + "=" + s.value + "\n";
  return std::vector<uint8_t>(text.begin(), text.end());
}

std::vector<std::string> values(const std::vector<uint8_t>& bytes) {
  std::vector<std::string> out;
  std::istringstream in(std::string(bytes.begin(), bytes.end()));
  std::string line;
  while (std::getline(in, line)) out.push_back(line.substr(line.find('=') + 1));
  return out;
}

// Rank 0: "" when every rank agrees, else the message naming what differs.
std::string compare(const std::vector<Setting>& mine,
                    const std::vector<std::vector<uint8_t>>& gathered) {
  std::string message;
  for (size_t k = 0; k < mine.size(); ++k) {
    std::map<std::string, std::vector<int>> ranksByValue;
    for (size_t r = 0; r < gathered.size(); ++r) {
      std::vector<std::string> v = values(gathered[r]);
      ranksByValue[k < v.size() ? v[k] : "<missing>"].push_back(static_cast<int>(r));
    }
    if (ranksByValue.size() == 1) continue;
    message += message.empty() ? "" : "; ";
    message += std::string(mine[k].variable) + " differs across ranks:";
    bool first = true;
    for (const auto& [value, ranks] : ranksByValue) {
      message += std::string(first ? " " : ", ") + "'" + value + "' on ranks " + rankList(ranks);
      first = false;
    }
  }
  if (message.empty()) return "";
  return message +
         ". Settings that change what ranks send or how operations match must be the same on "
         "every rank";
}

}  // namespace

Status agreeOnSettings(backends::Channel& world, Config* config) {
  const std::vector<Setting> mine = checkedSettings(*config);
  const std::atomic<bool> never{false};
  std::vector<std::vector<uint8_t>> gathered;
  auto gather = world.gatherBytes(encode(mine), &gathered);
  HCOLL_RETURN_IF_ERROR(waitUnbounded(*gather, controlPlanePolicy(), never));
  // Rank 0 answers with 'E' + the failure, or 'O' + its own settings, which every rank adopts.
  std::vector<uint8_t> answer;
  if (world.rank() == 0) {
    std::string failure = compare(mine, gathered);
    if (failure.empty()) {
      answer = encode(mine);
      answer.insert(answer.begin(), 'O');
    } else {
      answer.assign(failure.begin(), failure.end());
      answer.insert(answer.begin(), 'E');
    }
  }
  auto broadcast = world.broadcastBytes(&answer);
  HCOLL_RETURN_IF_ERROR(waitUnbounded(*broadcast, controlPlanePolicy(), never));
  if (answer.empty()) return internalError("settings check: empty answer from rank 0");
  if (answer[0] == 'E') return invalidArgument(std::string(answer.begin() + 1, answer.end()));
  const std::vector<std::string> agreed = values({answer.begin() + 1, answer.end()});
  if (agreed.size() != mine.size()) return internalError("settings check: malformed answer");
  // Equal to this rank's own values (rank 0 compared them); taken from rank 0 all the same.
  config->fusionThresholdBytes = std::stoull(agreed[1]);
  config->cacheCapacity = static_cast<uint32_t>(std::stoul(agreed[2]));
  config->stallShutdownSeconds = std::stod(agreed[3]);
  return Status::ok();
}

}  // namespace hcoll::runtime
