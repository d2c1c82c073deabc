#pragma once
// One negotiation round of a communicator: every rank ANDs a bit vector (one bit per response
// cache slot whose operation it has ready, plus a flags word); if any rank has something the
// cache cannot express, the round continues through the coordinator (gather of announcements to
// rank 0, broadcast of its responses). Every rank ends the round with the same response list.

#include <atomic>
#include <memory>
#include <set>
#include <vector>

#include "backends/backend.h"
#include "runtime/config.h"
#include "runtime/coordinator.h"
#include "runtime/local_op.h"
#include "runtime/logging.h"
#include "runtime/response_cache.h"

namespace hcoll::runtime {

struct RoundResult {
  std::vector<Response> responses;  // identical on every rank, in execution order
  size_t fromCache = 0;             // the first `fromCache` responses were replayed from the cache
  bool slowPath = false;
  bool allClosing = false;          // every rank is destroying the communicator
};

class Negotiator {
 public:
  Negotiator(backends::Channel& channel, const Config& config, const std::atomic<bool>& abort,
             std::shared_ptr<spdlog::logger> log);

  // Runs one round over `pending` (ops this rank submitted); `closing`: this rank is destroying
  // the communicator. Fails only if the backend failed or the communicator was aborted.
  Status round(PendingOps& pending, bool closing, RoundResult* out);

 private:
  // Announces what the cache could not replay; appends the coordinator's responses.
  Status exchangeWithCoordinator(PendingOps& pending, const std::vector<std::string>& replayed,
                                 std::vector<Response>* out);
  // Rank 0: warns about, and past the shutdown time fails, operations some ranks never submit.
  void inspectStalls(std::vector<Response>* out);

  backends::Channel& channel_;
  const Config& config_;
  const std::atomic<bool>& abort_;
  std::shared_ptr<spdlog::logger> log_;
  ResponseCache cache_;
  std::unique_ptr<Coordinator> coordinator_;  // rank 0 only
  std::chrono::steady_clock::time_point lastInspection_;
  std::set<std::string> warned_;
  std::vector<uint64_t> words_;
};

}  // namespace hcoll::runtime
