#pragma once
// One negotiation round of a communicator: every rank ANDs a bit vector (one bit per response
// cache slot whose operation it has ready, plus a flags word); if any rank has something the
// cache cannot express, the round continues through the coordinator (gather of announcements to
// rank 0, broadcast of its responses). Every rank ends the round with the same response list.

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "runtime/bounded_wait.h"
#include "runtime/config.h"
#include "runtime/coordinator.h"
#include "runtime/flight_recorder.h"
#include "runtime/liveness.h"
#include "runtime/local_op.h"
#include "common/logging.h"
#include "runtime/response_cache.h"

namespace hcoll::runtime {

struct RoundResult {
  // Identical on every rank, in execution order (empty when the round is a fold: `folded`).
  std::vector<ResponsePtr> responses;
  size_t fromCache = 0;             // the first `fromCache` responses were replayed from the cache
  bool slowPath = false;
  bool allClosing = false;          // every rank is destroying the communicator
  bool anyClosing = false;          // some rank is: this was the communicator's last round
  // The small-message fold stood: the round is this one operation, whose result is in its
  // foldedResult (LocalOp), and its cached response. Not shared (a reference count taken and
  // dropped is two locked instructions, ~11 ns here): the cache, which owns it, changes only
  // when the next round completes.
  LocalOp* folded = nullptr;
  const Response* foldedResponse = nullptr;
};

class Negotiator {
 public:
  // `recorder` (may be null) is dumped on a stall or a timeout.
  Negotiator(backends::Channel& channel, const Config& config, Liveness& liveness,
             const std::atomic<bool>& abort, std::shared_ptr<spdlog::logger> log,
             const FlightRecorder* recorder = nullptr);

  // Runs one round over `pending` (ops this rank submitted); `closing`: this rank is destroying
  // the communicator. Fails if the backend failed or the communicator was aborted; with kTimeout
  // if peers did not join the round within the stall shutdown time; with kShutDown if, while
  // closing, they did not within the close bound; with a peer's failure if a peer gave up on the
  // communicator meanwhile. After a failure a control-plane collective is left outstanding, so
  // the communicator cannot be used any more.
  //
  // `giveUpAt` is for a caller's thread that drives the round (Communicator::drive): if the peers
  // have not all entered the round by then, round() returns kInProgress with the round's
  // readiness allreduce left in flight, and the next call (from any thread) resumes it with the
  // closing flag and the operations it began with (roundInFlight(), inFlightClosing()).
  Status round(PendingOps& pending, bool closing, RoundResult* out,
               std::chrono::steady_clock::time_point giveUpAt =
                   std::chrono::steady_clock::time_point::max());
  bool roundInFlight() const { return entry_ != nullptr; }
  bool inFlightClosing() const { return roundClosing_; }

  // `flag` becomes true when the communicator is asked to close (destroy, shutdown). A round
  // already waiting for peers then gives up after the close bound too, instead of waiting for
  // peers that may be gone without limit (when no stall shutdown time is set).
  void watchCloseRequests(const std::atomic<bool>& flag) { wait_.watchCloseRequests(flag); }

 private:
  // Announces this rank's unannounced operations, except the first `replayed` of *out (replayed
  // from the cache this round), and appends the coordinator's responses to *out.
  Status exchangeWithCoordinator(PendingOps& pending, size_t replayed,
                                 std::vector<ResponsePtr>* out);
  // Rank 0: warns about, and past the shutdown time fails, operations some ranks never submit.
  void inspectStalls(std::vector<Response>* out);
  // Waits for one control-plane step of the round (wait_, under the communicator's bounds). Peers
  // with nothing pending sleep and never join a round, so the wait itself reports what is
  // pending here after the stall check time and gives up after the stall shutdown time (or the
  // close bound while closing). A step given up on stays active in MPI (a late peer can still
  // match it), so it and `buffers` (what it reads or writes) are kept until the process exits.
  // `entry`: the round's first step (the readiness allreduce), the one idle ranks never enter;
  // only there are peers' stall notes used to name the missing ranks.
  // `giveUpAt`: see round().
  template <typename... Buffers>
  Status waitControl(backends::PendingPtr& step, const char* what, bool entry = false,
                     std::chrono::steady_clock::time_point giveUpAt =
                         std::chrono::steady_clock::time_point::max(),
                     Buffers&... buffers);
  class ControlReport;  // waitControl's words for its failures and stall warnings
  // Starts the round's readiness allreduce over `pending` (entry_), with the lone operation's
  // data folded in when foldable() says so.
  void beginRound(PendingOps& pending, bool closing);
  // Whether `op` (alone in the round, cached in `slot`) rides in the readiness exchange (the
  // small-message fold, backend.h's FoldedCollective); fills *fold.
  bool foldable(const LocalOp& op, int slot, backends::Channel::FoldedCollective* fold);
  // Appends to out->responses what every rank marked in the ANDed words, sets out->fromCache;
  // fails only if the automatic-name check's exchange (when one is needed) fails.
  Status replayCached(size_t slots, RoundResult* out);
  // The round's result when the fold of `op` (in `slot`) stood: replayCached's and round()'s
  // work for that one case.
  Status foldedRound(LocalOp& op, size_t slot, RoundResult* out);
  // The cached response of automatic slot `slot` under this call's `name` (renamed_).
  const std::shared_ptr<Response>& renamedReplay(size_t slot, const ResponsePtr& cached,
                                                 const std::string& name);
  // "ranks [2] (not in this negotiation round; ranks [1] are)" when the channel can tell, else
  // "the other N rank(s) of the communicator".
  std::string describeMissing(bool entry);
  void dumpRecorder(const std::string& why) const;

  backends::Channel& channel_;
  backends::PeerSignals& signals_;
  const Config& config_;
  Liveness& liveness_;
  BoundedWait wait_;
  std::shared_ptr<spdlog::logger> log_;
  ResponseCache cache_;
  std::unique_ptr<Coordinator> coordinator_;  // rank 0 only
  std::chrono::steady_clock::time_point lastInspection_;
  std::set<std::string> warned_;
  std::vector<uint64_t> words_;
  std::vector<int> replayedSlots_;  // this round's cache hits (kept: no allocation per round)
  std::vector<size_t> setSlots_;    // the slots every rank marked this round (kept likewise)
  // This round's automatically named calls marked in the words: (slot, the call's name); those
  // every rank marked (indices into autoMarks_, in slot order), whether the ranks' names agree
  // there, and the buffer of the name check that decides it when the round's check differs.
  // (The first autoMarkCount_ entries are this round's; the rest keep their strings' storage:
  // "allreduce.100000" and longer names would otherwise allocate every round.)
  std::vector<std::pair<int, std::string>> autoMarks_;
  size_t autoMarkCount_ = 0;
  std::vector<size_t> autoSet_;
  std::vector<char> autoAgreed_;
  std::vector<uint64_t> autoChecks_;
  std::string keyScratch_;  // an unnamed call's cache key (its capacity kept between rounds)
  // The last automatically named call looked up in the cache and its slot, valid while the
  // cache's generation is unchanged: a loop of unnamed calls of one shape then skips building
  // the key and the lookup (together ~half of what an unnamed 8-byte call cost more than a
  // named one).
  struct AutoLookup {
    OpSpec spec;
    uint64_t generation = ~uint64_t{0};
    int slot = -1;
  };
  AutoLookup lastAuto_;
  int lookupAutoNamed(const OpSpec& spec, int rank, int size);
  // Per automatic slot: the cached response last replayed from it (`of`) and its copy under the
  // replaying call's name, renamed in place by the next replay once no one else holds it (a
  // replay then costs a name assignment, not a copy of the response).
  struct RenamedCopy {
    ResponsePtr of;
    std::shared_ptr<Response> renamed;
  };
  std::vector<RenamedCopy> renamed_;
  const FlightRecorder* recorder_;
  PendingOps* roundPending_ = nullptr;  // during round()
  bool roundClosing_ = false;
  // The round's readiness allreduce while in flight (across a caller's hand-over to the thread),
  // when it began, and whether its wait already noted and warned (once per round, not per wait).
  backends::PendingPtr entry_;
  std::chrono::steady_clock::time_point entryStartedAt_;
  bool entryNoted_ = false;
  bool entryWarned_ = false;
  uint64_t roundSeq_ = 0;  // rounds are collective: the same count on every rank
  // The small-message fold: at most this many bytes of one rank's input (2 ranks, this VM: at
  // 512 B and 2 KiB every kind was 0.1-0.2 us faster folded, at 8 KiB the fold's extra copies
  // made allgather and alltoall 0.1-0.4 us slower); the operation folded into the round in
  // flight (null: none), the channel's verdict on the headers, and the copies it reads and
  // writes.
  static constexpr size_t kMaxFoldBytes = 2048;
  LocalOp* foldOp_ = nullptr;
  int foldSlot_ = -1;  // foldOp_'s cache slot: the only slot bit this rank set
  bool foldAgreed_ = false;
  std::vector<uint64_t> foldSend_;
  std::vector<uint64_t> foldResult_;
};

}  // namespace hcoll::runtime
