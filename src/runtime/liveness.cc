#include "runtime/liveness.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "common/types.h"

namespace hcoll::runtime {

Liveness::Liveness(backends::Channel& channel, double stallShutdownSeconds)
    : signals_(channel.signals()), stallShutdown_(stallShutdownSeconds) {}

Status Liveness::poll() {
  backends::PeerSignals::Notice notice;
  while (gone_.isOk() && signals_.pollNotice(&notice)) {
    if (notice.kind == backends::PeerSignals::NoticeKind::kClosing) {
      closingRanks_.insert(notice.rank);
      joinRequested_ = true;
      continue;
    }
    stuckPeerReported_ = notice.kind == backends::PeerSignals::NoticeKind::kGoneStuck;
    gone_ = Status(notice.code, "rank " + std::to_string(notice.rank) +
                                    " gave up on the communicator: " + notice.text);
  }
  return gone_;
}

std::string Liveness::closingRanksText() const {
  if (closingRanks_.empty()) return "another rank";
  const std::vector<int> ranks(closingRanks_.begin(), closingRanks_.end());
  return (ranks.size() == 1 ? "rank " : "ranks ") + rankSequence(ranks);
}

void Liveness::announceClosing() {
  if (announcedClosing_ || announcedGone_) return;
  announcedClosing_ = true;
  signals_.sendNotice(backends::PeerSignals::NoticeKind::kClosing, Code::kShutDown, "closing");
}

void Liveness::announceGone(const Status& failure, bool peerStuck) {
  if (announcedGone_) return;
  announcedGone_ = true;
  signals_.sendNotice(peerStuck ? backends::PeerSignals::NoticeKind::kGoneStuck
                                : backends::PeerSignals::NoticeKind::kGone,
                      failure.code(), failure.message());
}

double Liveness::closeTimeoutSeconds() const {
  const double stall = stallShutdownSeconds();
  return stall > 0 ? std::min(stall, kMaxCloseSeconds) : kMaxCloseSeconds;
}

}  // namespace hcoll::runtime
