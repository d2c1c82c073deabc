#pragma once
// The MPI backend's PeerSignals (backends/backend.h): notices and stall notes as point-to-point
// messages with their own tags on a channel's control communicator, outside any round. Every
// notice carries the channel's id, agreed at creation: a context id can be reused by a later
// communicator once this one is freed, and a notice with another id is dropped.

#include <mpi.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace hcoll::backends::mpi {

class MpiPeerSignals final : public PeerSignals {
 public:
  // The control communicator `control` (borrowed: it must outlive this) of a channel whose
  // rank is `rank` of `size`, and the channel's id. Posts the receive for notices.
  MpiPeerSignals(MPI_Comm control, int rank, int size, uint64_t channelId);
  // Cancels the notice receive and drops what arrived (unless MPI was finalized).
  ~MpiPeerSignals() override;
  MpiPeerSignals(const MpiPeerSignals&) = delete;
  MpiPeerSignals& operator=(const MpiPeerSignals&) = delete;

  void sendNotice(NoticeKind kind, Code code, const std::string& text) override;
  bool pollNotice(Notice* out) override;
  bool tracksWaiting() const override { return true; }
  void noteWaiting(uint64_t round) override;
  std::vector<int> peersWaiting(uint64_t round) override;

 private:
  void postNoticeReceive();
  // Receives and drops the messages with `tag` that have arrived on the control communicator.
  void discardArrived(int tag);

  MPI_Comm control_;
  int rank_;
  int size_;
  uint64_t channelId_;
  std::vector<uint8_t> noticeBuffer_;
  MPI_Request noticeReceive_ = MPI_REQUEST_NULL;
  // Stall notes: sends in flight and their values (a deque keeps their addresses), and the
  // latest round each peer noted.
  std::vector<MPI_Request> noteSends_;
  std::deque<uint64_t> noteValues_;
  std::vector<uint64_t> notedRound_;
};

}  // namespace hcoll::backends::mpi
