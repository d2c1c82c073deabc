#include "runtime/flight_recorder.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <deque>

namespace hcoll::runtime {
namespace {

std::atomic<int> gNextId{0};

// Process-wide file state; recorders of destroyed communicators stay until reset(), bounded.
constexpr size_t kMaxTracked = 256;
std::mutex gFileMutex;
std::string gPath;
int gWorldRank = 0;
std::deque<std::shared_ptr<FlightRecorder>> gTracked;

const char* stateNames[] = {"submitted", "negotiated", "running", "done"};

const char* outcome(Code c) {
  switch (c) {
    case Code::kSuccess:
      return "ok";
    case Code::kMismatch:
      return "MISMATCH";
    case Code::kTimeout:
      return "TIMEOUT";
    case Code::kShutDown:
      return "SHUT_DOWN";
    case Code::kBackend:
      return "BACKEND";
    case Code::kNoMemory:
      return "NO_MEMORY";
    default:
      return "ERROR";
  }
}

}  // namespace

const char* flightStateName(FlightState s) {
  return stateNames[static_cast<int>(s)];
}

FlightRecorder::FlightRecorder(int rank, int size)
    : id_(gNextId.fetch_add(1)), rank_(rank), size_(size) {}

uint64_t FlightRecorder::submitted(const OpSpec& spec, Clock::time_point at) {
  std::lock_guard<SpinLock> lock(mutex_);
  return submittedLocked(spec, at);
}

void FlightRecorder::advance(uint64_t seq, FlightState state, Clock::time_point at, Code code) {
  if (seq == 0) return;
  std::lock_guard<SpinLock> lock(mutex_);
  advanceLocked(seq, state, at, code);
}

uint64_t FlightRecorder::submittedLocked(const OpSpec& spec, Clock::time_point at) {
  uint64_t elements = 0, bytes = 0;
  for (const MemberSpec& m : spec.members) {
    uint64_t n = static_cast<uint64_t>(numElements(m.shape));
    elements += n;
    bytes += n * dataTypeSize(m.dtype);
  }
  const uint64_t seq = nextSeq_++;
  Entry& e = ring_[seq % kCapacity];
  e.seq = seq;
  const size_t n = std::min(spec.name.size(), kNameBytes - 1);
  std::memcpy(e.name.data(), spec.name.data(), n);
  e.name[n] = '\0';
  e.kind = spec.kind;
  e.dtype = spec.members.empty() ? DataType::kUint8 : spec.members[0].dtype;
  e.members = static_cast<uint32_t>(spec.members.size());
  e.elements = elements;
  e.bytes = bytes;
  e.state = FlightState::kSubmitted;
  e.code = Code::kInProgress;
  e.at = {};
  e.at[0] = at;
  return seq;
}

void FlightRecorder::advanceLocked(uint64_t seq, FlightState state, Clock::time_point at,
                                   Code code) {
  if (seq == 0) return;
  Entry& e = ring_[seq % kCapacity];
  if (e.seq != seq) return;
  // Later states are dated by the coarse clock (common/coarse_clock.h), up to a tick behind the
  // precise submission time: never before the state they follow.
  at = std::max(at, e.at[static_cast<size_t>(e.state)]);
  // States passed over at once (negotiated and running, in one round) get the same time.
  for (size_t s = static_cast<size_t>(e.state) + 1; s < static_cast<size_t>(state); ++s) {
    e.at[s] = at;
  }
  e.state = state;
  e.at[static_cast<size_t>(state)] = at;
  if (state == FlightState::kDone) e.code = code;
}

std::vector<std::string> FlightRecorder::describe() const {
  std::vector<std::string> lines;
  const auto now = Clock::now();
  auto ago = [&](Clock::time_point t) {
    if (t == Clock::time_point{}) return std::string("-");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", std::chrono::duration<double>(now - t).count());
    return std::string(buf);
  };
  std::lock_guard<SpinLock> lock(mutex_);
  char header[160];
  std::snprintf(header, sizeof header,
                "flight recorder: communicator #%d (rank %d of %d), last %llu operations "
                "(times in seconds ago: submitted/negotiated/running/done)",
                id_, rank_, size_,
                static_cast<unsigned long long>(std::min<uint64_t>(nextSeq_ - 1, kCapacity)));
  lines.emplace_back(header);
  const uint64_t first = nextSeq_ > kCapacity ? nextSeq_ - kCapacity : 1;
  for (uint64_t seq = first; seq < nextSeq_; ++seq) {
    const Entry& e = ring_[seq % kCapacity];
    if (e.seq != seq) continue;
    char line[512];
    std::snprintf(line, sizeof line,
                  "  #%llu '%s' %s %s members=%u elements=%llu bytes=%llu state=%s%s%s "
                  "t=%s/%s/%s/%s",
                  static_cast<unsigned long long>(e.seq), e.name.data(), opKindName(e.kind),
                  e.members == 0 ? "-" : dataTypeName(e.dtype), e.members,
                  static_cast<unsigned long long>(e.elements),
                  static_cast<unsigned long long>(e.bytes), flightStateName(e.state),
                  e.state == FlightState::kDone ? " " : "",
                  e.state == FlightState::kDone ? outcome(e.code) : "", ago(e.at[0]).c_str(),
                  ago(e.at[1]).c_str(), ago(e.at[2]).c_str(), ago(e.at[3]).c_str());
    lines.emplace_back(line);
  }
  return lines;
}

void FlightRecorder::dumpToLog(spdlog::logger& log, const std::string& why) const {
  std::string text = why;
  for (const std::string& l : describe()) text += "\n" + l;
  log.warn("{}", text);
}

void FlightRecorder::configure(const std::string& path, int worldRank) {
  std::lock_guard<std::mutex> lock(gFileMutex);
  gPath = path;
  gWorldRank = worldRank;
}

void FlightRecorder::track(const std::shared_ptr<FlightRecorder>& recorder) {
  std::lock_guard<std::mutex> lock(gFileMutex);
  if (gPath.empty()) return;
  gTracked.push_back(recorder);
  if (gTracked.size() > kMaxTracked) gTracked.pop_front();
}

Status FlightRecorder::writeFile(const std::string& why) {
  std::lock_guard<std::mutex> lock(gFileMutex);
  if (gPath.empty()) return Status::ok();
  const std::string path = gPath + "." + std::to_string(gWorldRank);
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    return Status(Code::kInternal, "cannot write the flight recorder file '" + path + "'");
  }
  std::fprintf(f, "hcoll flight recorder, world rank %d: %s\n", gWorldRank, why.c_str());
  for (const auto& r : gTracked) {
    for (const std::string& l : r->describe()) std::fprintf(f, "%s\n", l.c_str());
  }
  std::fclose(f);
  return Status::ok();
}

void FlightRecorder::reset() {
  std::lock_guard<std::mutex> lock(gFileMutex);
  gTracked.clear();
  gPath.clear();
}

}  // namespace hcoll::runtime
