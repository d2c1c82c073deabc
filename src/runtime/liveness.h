#pragma once
// What a communicator's thread consults while it waits for its peers, so that no wait outlives a
// peer that left or gave up: the notices peers send out of band (backends::Channel), the
// communicator's stall shutdown time (the same on every rank: agreed at initialize, changed only
// collectively), and the bound on closing.

#include <atomic>
#include <chrono>
#include <set>
#include <string>

#include "backends/backend.h"
#include "common/status.h"

namespace hcoll::runtime {

class Liveness {
 public:
  // Consults channel.signals() (which must outlive this).
  Liveness(backends::Channel& channel, double stallShutdownSeconds);

  // Reads the notices that arrived. Returns the failure a peer's "gone" notice reports (ok if
  // none). Cheap enough to call every quarter second from any wait of the communicator's thread.
  Status poll();
  // A peer waits in its final round (it is closing) and asked idle members to join it: true once
  // per notice.
  bool takeJoinRequest() {
    bool r = joinRequested_;
    joinRequested_ = false;
    return r;
  }
  // A peer gave up on the communicator (poll() reported its failure).
  bool peerGone() const { return !gone_.isOk(); }
  const std::set<int>& closingRanks() const { return closingRanks_; }
  // "rank 1" or "ranks 1, 2" (or "another rank" before any notice named one).
  std::string closingRanksText() const;

  // This rank waits in its final round: asks idle peers to join it.
  void announceClosing();
  // This rank gives up on the communicator (`failure` says why): peers fail everything too.
  // `peerStuck`: it gave up on a peer that stopped mid-operation or never answered its close.
  void announceGone(const Status& failure, bool peerStuck);
  // A peer's notice said some member stopped mid-operation or never answered a close.
  bool stuckPeerReported() const { return stuckPeerReported_; }

  double stallShutdownSeconds() const { return stallShutdown_.load(std::memory_order_relaxed); }
  void setStallShutdownSeconds(double s) { stallShutdown_.store(s, std::memory_order_relaxed); }
  // How long closing waits for peers before giving up locally: the stall shutdown time, at most
  // kMaxCloseSeconds (live peers answer a closing notice within a fraction of a second).
  double closeTimeoutSeconds() const;
  static constexpr double kMaxCloseSeconds = 30.0;
  // How often an idle communicator thread looks for notices.
  static constexpr auto kIdlePollInterval = std::chrono::milliseconds(100);

 private:
  backends::PeerSignals& signals_;
  std::atomic<double> stallShutdown_;
  std::set<int> closingRanks_;
  Status gone_;
  bool joinRequested_ = false;
  bool stuckPeerReported_ = false;
  bool announcedClosing_ = false;
  bool announcedGone_ = false;
};

}  // namespace hcoll::runtime
