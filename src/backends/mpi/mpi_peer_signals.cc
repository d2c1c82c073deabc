// Notices and stall notes over MPI (mpi_peer_signals.h). What a send that did not complete may
// still read — a notice, stall-note values — goes to keepForever (common/keep_forever.h), the
// same sink the runtime's bounded waits use for the steps they give up on: the requests are
// freed below the backend interface (MPI_Request_free), where no Pending exists to abandon.
#include "backends/mpi/mpi_peer_signals.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include "common/keep_forever.h"

namespace hcoll::backends::mpi {
namespace {

// Tags on the control communicator (mpi_channel.cc uses the others).
constexpr int kNoticeTag = 3;
constexpr int kWaitingNoteTag = 7;  // stall notes (noteWaiting)
// A notice: [channel id u64][kind u8][code i32][text]; the text is cut to fit.
constexpr size_t kNoticeHeader = 8 + 1 + 4;
constexpr size_t kMaxNoticeBytes = 1024;
constexpr auto kNoticeSendBound = std::chrono::seconds(1);

}  // namespace

MpiPeerSignals::MpiPeerSignals(MPI_Comm control, int rank, int size, uint64_t channelId)
    : control_(control), rank_(rank), size_(size), channelId_(channelId) {
  postNoticeReceive();
}

MpiPeerSignals::~MpiPeerSignals() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (noticeReceive_ != MPI_REQUEST_NULL) {
    // A receive can always be cancelled; it must complete before its buffer goes.
    MPI_Cancel(&noticeReceive_);
    MPI_Wait(&noticeReceive_, MPI_STATUS_IGNORE);
  }
  // The one posted receive takes one notice; with more than one peer the others' closing notices
  // (and the notes of a stall) wait in MPI's unexpected queue, where UCX warns about each at
  // MPI_Finalize ("unexpected tag-receive descriptor ... was not matched"). Every peer sent its
  // closing notice before entering the final round, which has completed: take what arrived.
  discardArrived(kNoticeTag);
  discardArrived(kWaitingNoteTag);
  if (noteSends_.empty()) return;
  // Point-to-point sends may be freed while active; their values must outlive them (a few bytes
  // per stall, if any).
  for (MPI_Request& r : noteSends_) {
    if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
  }
  keepForever(std::move(noteValues_));
}

void MpiPeerSignals::discardArrived(int tag) {
  std::vector<uint8_t> sink;
  while (true) {
    int flag = 0;
    MPI_Message message;
    MPI_Status status;
    if (MPI_Improbe(MPI_ANY_SOURCE, tag, control_, &flag, &message, &status) != MPI_SUCCESS ||
        flag == 0) {
      return;
    }
    int bytes = 0;
    MPI_Get_count(&status, MPI_BYTE, &bytes);
    sink.resize(bytes > 0 ? static_cast<size_t>(bytes) : 1);
    if (MPI_Mrecv(sink.data(), bytes, MPI_BYTE, &message, MPI_STATUS_IGNORE) != MPI_SUCCESS) return;
  }
}

void MpiPeerSignals::postNoticeReceive() {
  noticeBuffer_.assign(kMaxNoticeBytes, 0);
  if (MPI_Irecv(noticeBuffer_.data(), static_cast<int>(noticeBuffer_.size()), MPI_BYTE,
                MPI_ANY_SOURCE, kNoticeTag, control_, &noticeReceive_) != MPI_SUCCESS) {
    noticeReceive_ = MPI_REQUEST_NULL;  // notices from peers will not be seen; rounds still bound
  }
}

void MpiPeerSignals::sendNotice(NoticeKind kind, Code code, const std::string& text) {
  if (size_ <= 1) return;
  std::vector<uint8_t> message(kNoticeHeader);
  std::memcpy(message.data(), &channelId_, 8);
  message[8] = static_cast<uint8_t>(kind);
  const int32_t c = static_cast<int32_t>(code);
  std::memcpy(message.data() + 9, &c, 4);
  message.insert(message.end(), text.begin(),
                 text.begin() + static_cast<std::ptrdiff_t>(
                                    std::min(text.size(), kMaxNoticeBytes - kNoticeHeader)));
  std::vector<MPI_Request> sends;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    MPI_Request req = MPI_REQUEST_NULL;
    if (MPI_Isend(message.data(), static_cast<int>(message.size()), MPI_BYTE, r, kNoticeTag,
                  control_, &req) == MPI_SUCCESS) {
      sends.push_back(req);
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + kNoticeSendBound;
  int done = 0;
  while (!sends.empty()) {
    if (MPI_Testall(static_cast<int>(sends.size()), sends.data(), &done, MPI_STATUSES_IGNORE) !=
            MPI_SUCCESS ||
        done || std::chrono::steady_clock::now() > deadline) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (done || sends.empty()) return;
  // Not delivered in time (the transport may still read the message): the requests are freed
  // and the message kept.
  for (MPI_Request& req : sends) {
    if (req != MPI_REQUEST_NULL) MPI_Request_free(&req);
  }
  keepForever(std::move(message));
}

bool MpiPeerSignals::pollNotice(Notice* out) {
  while (noticeReceive_ != MPI_REQUEST_NULL) {
    int done = 0;
    MPI_Status status;
    if (MPI_Test(&noticeReceive_, &done, &status) != MPI_SUCCESS || !done) return false;
    int bytes = 0;
    MPI_Get_count(&status, MPI_BYTE, &bytes);
    const size_t n = bytes > 0 ? static_cast<size_t>(bytes) : 0;
    uint64_t id = 0;
    bool ours = n >= kNoticeHeader;
    if (ours) {
      std::memcpy(&id, noticeBuffer_.data(), 8);
      ours = id == channelId_ && noticeBuffer_[8] >= static_cast<uint8_t>(NoticeKind::kClosing) &&
             noticeBuffer_[8] <= static_cast<uint8_t>(NoticeKind::kGoneStuck);
    }
    if (ours) {
      out->rank = status.MPI_SOURCE;
      out->kind = static_cast<NoticeKind>(noticeBuffer_[8]);
      int32_t c = 0;
      std::memcpy(&c, noticeBuffer_.data() + 9, 4);
      out->code = c < 0 && c >= static_cast<int32_t>(Code::kInternal) ? static_cast<Code>(c)
                                                                      : Code::kShutDown;
      out->text.assign(noticeBuffer_.begin() + kNoticeHeader,
                       noticeBuffer_.begin() + static_cast<std::ptrdiff_t>(n));
    }
    postNoticeReceive();
    if (ours) return true;  // else: a stale notice of a freed communicator; look again
  }
  return false;
}

void MpiPeerSignals::noteWaiting(uint64_t round) {
  if (!noteSends_.empty()) {
    int done = 0;
    MPI_Testall(static_cast<int>(noteSends_.size()), noteSends_.data(), &done, MPI_STATUSES_IGNORE);
    if (done) {
      noteSends_.clear();
      noteValues_.clear();
    }
  }
  noteValues_.push_back(round);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    MPI_Request req;
    if (MPI_Isend(&noteValues_.back(), 1, MPI_UINT64_T, r, kWaitingNoteTag, control_, &req) ==
        MPI_SUCCESS) {
      noteSends_.push_back(req);
    }
  }
}

std::vector<int> MpiPeerSignals::peersWaiting(uint64_t round) {
  notedRound_.resize(static_cast<size_t>(size_), 0);
  while (true) {
    int flag = 0;
    MPI_Message message;
    MPI_Status status;
    if (MPI_Improbe(MPI_ANY_SOURCE, kWaitingNoteTag, control_, &flag, &message, &status) !=
            MPI_SUCCESS ||
        !flag) {
      break;
    }
    uint64_t noted = 0;
    if (MPI_Mrecv(&noted, 1, MPI_UINT64_T, &message, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
    uint64_t& latest = notedRound_[static_cast<size_t>(status.MPI_SOURCE)];
    latest = std::max(latest, noted);
  }
  std::vector<int> out;
  for (int r = 0; r < size_; ++r) {
    if (r != rank_ && notedRound_[static_cast<size_t>(r)] == round) out.push_back(r);
  }
  return out;
}

}  // namespace hcoll::backends::mpi
