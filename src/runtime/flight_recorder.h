#pragma once
// The flight recorder: a bounded ring per communicator of its most recent operations (sequence
// number, name, kind, dtype, sizes, state and the time of each state change), so that a stall or
// a timeout can say what every rank was doing. Dumped to the log on a stall or timeout, and to
// `<HCOLL_FLIGHT_RECORDER>.<world rank>` at shutdown and on a stall or timeout.
//
// The hot-path cost is one uncontended mutex and a fixed-size copy per state change: entries
// hold the name truncated to a fixed buffer, so recording never allocates.

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/spin_lock.h"
#include "runtime/message.h"
#include "common/status.h"

namespace spdlog {
class logger;
}

namespace hcoll::runtime {

enum class FlightState : uint8_t { kSubmitted = 0, kNegotiated, kRunning, kDone };
const char* flightStateName(FlightState s);

class FlightRecorder {
 public:
  static constexpr size_t kCapacity = 256;
  static constexpr size_t kNameBytes = 64;

  // `rank`/`size`: the communicator's; each recorder gets a process-unique id for its label.
  FlightRecorder(int rank, int size);

  // Records an operation submitted at `at` and returns its sequence number (never 0).
  uint64_t submitted(const OpSpec& spec, std::chrono::steady_clock::time_point at);
  // Advances operation `seq` (ignored once the ring overwrote it) at `at`, and any state it
  // passed over; `code` matters for kDone. (The times come from the caller: a clock read costs
  // as much as the rest here, and a round's operations change state together.)
  void advance(uint64_t seq, FlightState state, std::chrono::steady_clock::time_point at,
               Code code = Code::kSuccess);
  // The same for a caller that holds mutex(): a communicator guards its queue with the
  // recorder's mutex (every submission and completion touches both: one lock, not two).
  SpinLock& mutex() const { return mutex_; }
  uint64_t submittedLocked(const OpSpec& spec, std::chrono::steady_clock::time_point at);
  void advanceLocked(uint64_t seq, FlightState state, std::chrono::steady_clock::time_point at,
                     Code code = Code::kSuccess);

  // Human-readable lines, oldest first, and a header naming the communicator.
  std::vector<std::string> describe() const;
  void dumpToLog(spdlog::logger& log, const std::string& why) const;

  int id() const { return id_; }

  // Process-wide: where dumps go ("" = no file) and this process's world rank.
  static void configure(const std::string& path, int worldRank);
  // Keeps `recorder` for the file dump until reset() (so destroyed communicators still appear).
  static void track(const std::shared_ptr<FlightRecorder>& recorder);
  // Writes every tracked recorder to the file (no-op without a path). Thread-safe.
  static Status writeFile(const std::string& why);
  // Forgets every tracked recorder and the path (at shutdown, after the last writeFile).
  static void reset();

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    uint64_t seq = 0;
    std::array<char, kNameBytes> name{};
    OpKind kind = OpKind::kAllreduce;
    DataType dtype = DataType::kFloat32;
    uint32_t members = 0;
    uint64_t elements = 0;
    uint64_t bytes = 0;
    FlightState state = FlightState::kSubmitted;
    Code code = Code::kInProgress;
    std::array<Clock::time_point, 4> at{};  // when each state was reached
  };

  const int id_;
  const int rank_;
  const int size_;
  // A spin lock (common/spin_lock.h): every submission and completion takes it, for a few
  // stores; only a dump holds it longer.
  mutable SpinLock mutex_;
  uint64_t nextSeq_ = 1;
  std::array<Entry, kCapacity> ring_{};
};

}  // namespace hcoll::runtime
