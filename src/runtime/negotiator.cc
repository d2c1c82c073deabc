#include "runtime/negotiator.h"

#include <algorithm>
#include <cstring>

#include "common/coarse_clock.h"
#include "runtime/wire.h"

namespace hcoll::runtime {
namespace {

using Clock = std::chrono::steady_clock;

// Flags word: the low half is OR-reduced (stored inverted, so the AND computes an OR), the high
// half is AND-reduced.
constexpr uint64_t kAnyUnannounced = 1ull << 0;  // a rank has an op the cache cannot replay
constexpr uint64_t kAnyClosing = 1ull << 1;
constexpr uint64_t kAnyJoined = 1ull << 2;
constexpr uint64_t kCoordinatorWaiting = 1ull << 3;  // rank 0 has unfinished business
constexpr uint64_t kOrMask = 0xffffffffull;
constexpr uint64_t kAllClosing = 1ull << 32;

// The exchanged words: the flags, the automatic-name check and its complement (AND-reducing both
// tells whether every rank sent the same value), then one bit per cache slot.
constexpr size_t kFlagsWord = 0;
constexpr size_t kAutoCheckWord = 1;
constexpr size_t kAutoCheckComplementWord = 2;
constexpr size_t kFirstSlotWord = 3;

// splitmix64's finalizer: spreads (slot, name) pairs over 64 bits for the automatic-name check.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// FNV-1a: the same on every rank whatever standard library built it.
uint64_t hashName(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// An op cached but not replayed for this long is announced in full, so that the coordinator
// sees it and the stall inspector can name who is missing.
constexpr auto kAnnounceCachedAfter = std::chrono::seconds(1);
constexpr auto kInspectEvery = std::chrono::seconds(1);

}  // namespace

Negotiator::Negotiator(backends::Channel& channel, const Config& config, Liveness& liveness,
                       const std::atomic<bool>& abort, std::shared_ptr<spdlog::logger> log,
                       const FlightRecorder* recorder)
    : channel_(channel),
      signals_(channel.signals()),
      config_(config),
      liveness_(liveness),
      wait_(liveness, abort, controlPlanePolicy()),
      log_(std::move(log)),
      cache_(config.cacheCapacity),
      lastInspection_(Clock::now()),
      recorder_(recorder) {
  if (channel_.rank() == 0) {
    coordinator_ = std::make_unique<Coordinator>(channel_.size(), channel_.maxVectorCount(),
                                                 channel_.maxVectorCountReason());
  }
}

void Negotiator::beginRound(PendingOps& pending, bool closing) {
  // Compared only with bounds of a second (the stall bound, kAnnounceCachedAfter, kInspectEvery).
  const auto now = coarseNow();
  const int rank = channel_.rank();
  const int size = channel_.size();
  const size_t slots = cache_.enabled() ? cache_.slotCount() : 0;
  roundClosing_ = closing;
  ++roundSeq_;
  entryStartedAt_ = now;
  entryNoted_ = false;
  entryWarned_ = false;
  words_.assign(kFirstSlotWord + (slots + 63) / 64, 0);
  autoMarkCount_ = 0;

  uint64_t flags = closing ? kAnyClosing : 0;
  uint64_t autoCheck = 0;
  int lastSlot = -1;  // the slot of the last operation looked at (-1: none)
  for (auto& op : pending.all()) {
    if (op->spec.kind == OpKind::kJoin) flags |= kAnyJoined;
    int slot = -1;
    if (slots != 0 && !op->autoReplayRefused) {
      if (op->spec.autoNamed) {
        slot = lookupAutoNamed(op->spec, rank, size);
      } else {
        slot = cache_.lookup(op->spec, op->spec.name, rank, size);
      }
    }
    if (slot >= 0) {
      uint64_t& word = words_[kFirstSlotWord + slot / 64];
      const uint64_t bit = 1ull << (slot % 64);
      if (op->spec.autoNamed && (word & bit) != 0) {
        // Automatically named calls of one shape share a slot, and a bit says one call: the
        // oldest replays, the others go through the coordinator in this same round (one slow
        // round for a burst, fused, rather than one round per call).
        slot = -1;
      } else {
        word |= bit;
        if (op->spec.autoNamed) {
          if (autoMarkCount_ == autoMarks_.size()) autoMarks_.emplace_back();
          autoMarks_[autoMarkCount_].first = slot;
          autoMarks_[autoMarkCount_].second.assign(op->spec.name);  // its capacity is kept
          ++autoMarkCount_;
          autoCheck += mix(hashName(op->spec.name) ^ mix(static_cast<uint64_t>(slot)));
        }
      }
    }
    // A call refused a replay keeps every round on the slow path until it completes: its
    // partners on the other ranks may be marked in the cache, not announced, and must be.
    if (op->autoReplayRefused ||
        (!op->announced && (slot < 0 || now - op->submittedAt > kAnnounceCachedAfter))) {
      flags |= kAnyUnannounced;
    }
    lastSlot = slot;
  }
  if (coordinator_ && !coordinator_->empty() && now - lastInspection_ > kInspectEvery) {
    flags |= kCoordinatorWaiting;
  }
  words_[kFlagsWord] = (~flags & kOrMask) | (closing ? kAllClosing : 0);
  words_[kAutoCheckWord] = autoCheck;
  words_[kAutoCheckComplementWord] = ~autoCheck;
  foldOp_ = nullptr;
  foldAgreed_ = false;
  if (flags == 0 && pending.size() == 1 && lastSlot >= 0) {
    backends::Channel::FoldedCollective fold;
    if (foldable(*pending.all().front(), lastSlot, &fold)) {
      foldOp_ = pending.all().front().get();
      foldSlot_ = lastSlot;
      entry_ = channel_.allreduceBitsAndFolded(words_.data(), words_.size(), fold);
      return;
    }
  }
  entry_ = channel_.allreduceBitsAnd(words_.data(), words_.size());
}

int Negotiator::lookupAutoNamed(const OpSpec& spec, int rank, int size) {
  if (lastAuto_.generation == cache_.generation() && lastAuto_.spec.sameCallAs(spec)) {
    return lastAuto_.slot;
  }
  ResponseCache::keyOf(spec, &keyScratch_);
  lastAuto_.slot = cache_.lookup(spec, keyScratch_, rank, size);
  lastAuto_.spec = spec;  // (its vectors' and name's storage reused)
  lastAuto_.generation = cache_.generation();
  return lastAuto_.slot;
}

bool Negotiator::foldable(const LocalOp& op, int slot,
                          backends::Channel::FoldedCollective* fold) {
  // A lone cached host collective of one tensor (an allgather: of a group), small enough,
  // whose result the executor can take from what every rank's input makes (executor_folded.cc):
  // an allreduce or a reducescatter (prescale 1: the input's bytes are what a rank contributes; a
  // reducescatter takes its part of the reduction), an allgather or alltoall (every rank's input
  // bytes, gathered: the ranks' headers agree only when every rank's come to the same size; a
  // grouped allgather's are its members one after another, as the executor packs them; an
  // alltoall takes the rows each rank sends it), a broadcast (the root's buffer).
  using Combine = backends::Channel::FoldedCollective::Combine;
  const OpSpec& spec = op.spec;
  const bool group = spec.kind == OpKind::kAllgather && !spec.members.empty();
  if (spec.device != kHostDevice || (spec.members.size() != 1 && !group) ||
      op.inputs.size() != spec.members.size()) {
    return false;
  }
  const bool reduces = spec.kind == OpKind::kAllreduce || spec.kind == OpKind::kReducescatter;
  if (reduces && (spec.prescale != 1.0 || spec.op == ReduceOp::kAdasum)) return false;
  switch (spec.kind) {
    case OpKind::kAllreduce:
      if (op.outputs.size() != 1) return false;
      fold->combine = Combine::kReduce;
      break;
    case OpKind::kReducescatter:
      fold->combine = Combine::kReduce;
      break;
    case OpKind::kAllgather:
    case OpKind::kAlltoall:
      fold->combine = Combine::kGather;
      break;
    case OpKind::kBroadcast:
      fold->combine = Combine::kBroadcast;
      fold->root = spec.root;
      break;
    default:
      return false;
  }
  size_t bytes = 0;
  for (const MemberSpec& m : spec.members) bytes += m.bytes();
  if (bytes == 0 || bytes > kMaxFoldBytes || bytes > channel_.foldableBytes(words_.size())) {
    return false;
  }
  // The contribution is copied: a step given up on may still be read after the operation
  // failed and its caller freed the input (the copies are kept with the step's words).
  const size_t resultBytes =
      fold->combine == Combine::kGather ? bytes * static_cast<size_t>(channel_.size()) : bytes;
  auto words = [](size_t n) { return (n + sizeof(uint64_t) - 1) / sizeof(uint64_t); };
  if (foldSend_.size() < words(bytes)) foldSend_.resize(words(bytes));
  if (foldResult_.size() < words(resultBytes)) foldResult_.resize(words(resultBytes));
  auto* send = reinterpret_cast<uint8_t*>(foldSend_.data());
  for (size_t m = 0; m < spec.members.size(); ++m) {
    const size_t n = spec.members[m].bytes();
    if (n != 0) std::memcpy(send, op.inputs[m].data, n);
    send += n;
  }
  fold->tag = static_cast<uint64_t>(slot) + 1;
  fold->send = foldSend_.data();
  fold->recv = foldResult_.data();
  if (fold->combine == Combine::kGather) {  // bytes moved, whatever the members' dtypes
    fold->count = bytes;
    fold->dtype = DataType::kUint8;
  } else {
    fold->count = static_cast<size_t>(numElements(spec.members[0].shape));
    fold->dtype = spec.members[0].dtype;
  }
  fold->op = spec.op;
  fold->alikeFrom = kFirstSlotWord;  // this rank set one slot bit: the fold's (tag - 1)
  fold->agreed = &foldAgreed_;
  return true;
}

Status Negotiator::round(PendingOps& pending, bool closing, RoundResult* out,
                         Clock::time_point giveUpAt) {
  // Operations added to `pending` while a handed-over round was in flight are not in its bits:
  // they wait for the next round (or are announced with this one's coordinator exchange, which
  // is harmless: announcing only tells rank 0 they exist).
  roundPending_ = &pending;
  if (!entry_) beginRound(pending, closing);
  // The cache changes only when a round completes: the same slots as when the round began.
  const size_t slots = cache_.enabled() ? cache_.slotCount() : 0;
  // Given up on, the allreduce is kept with the words it reduces and the fold's copies it may
  // still read or write (entry_ is then null).
  if (Status s = waitControl(entry_, "readiness allreduce", /*entry=*/true, giveUpAt, words_,
                             foldSend_, foldResult_);
      !s.isOk()) {
    return s;  // kInProgress: handed over, still in flight
  }
  entry_.reset();
  const uint64_t anyFlags = ~words_[kFlagsWord] & kOrMask;
  if (foldOp_ != nullptr) {
    // The fold stands when the exchanged bits say the normal round would run exactly this one
    // operation: every rank folded it alike (the channel checked every header), no rank raised
    // a flag, its slot is the only one set, and the automatic names agree. Every rank reads the
    // same bits, so every rank keeps or discards the result alike (the first law). This rank
    // set no slot bit but the fold's (it folds only a lone operation), and the AND only clears
    // bits: the fold's slot is the only one set exactly when its bit survived, whatever the
    // number of slots (counting every word's bits cost ~15 instructions a word).
    const size_t slot = static_cast<size_t>(foldSlot_);
    const bool slotSet = (words_[kFirstSlotWord + slot / 64] >> (slot % 64)) & 1;
    LocalOp* folded = foldOp_;
    foldOp_ = nullptr;
    if (foldAgreed_ && anyFlags == 0 && slotSet &&
        words_[kAutoCheckWord] == ~words_[kAutoCheckComplementWord]) {
      folded->foldedResult = foldResult_.data();
      return foldedRound(*folded, slot, out);
    }
  }
  out->allClosing = (words_[kFlagsWord] & kAllClosing) != 0;
  out->anyClosing = (anyFlags & kAnyClosing) != 0;
  HCOLL_RETURN_IF_ERROR(replayCached(slots, out));
  if (coordinator_) {
    for (const ResponsePtr& r : out->responses) coordinator_->forget(r->spec.name);
  }

  if (anyFlags != 0) {
    out->slowPath = true;
    HCOLL_RETURN_IF_ERROR(exchangeWithCoordinator(pending, out->fromCache, &out->responses));
  }

  for (int slot : replayedSlots_) cache_.touch(slot);
  for (size_t i = out->fromCache; i < out->responses.size(); ++i) {
    const Response& r = *out->responses[i];
    if (r.cacheable()) {
      cache_.put(out->responses[i]);
    } else {
      cache_.erase(ResponseCache::keyOf(r.spec));
    }
  }
  return Status::ok();
}

Status Negotiator::foldedRound(LocalOp& op, size_t slot, RoundResult* out) {
  // What replayCached and the rest of round() make of these bits, for the one case they allow:
  // no flag (no rank closing, joining or announcing), one slot set (the fold's), the automatic
  // names agreed. The general path's scan of every slot word, its automatic-name bookkeeping
  // and the rest cost ~200 of the ~5300 instructions of a named 8-byte allreduce (callgrind).
  const ResponsePtr& cached = cache_.shared(static_cast<int>(slot));
  if (!cached->spec.autoNamed) {
    out->foldedResponse = cached.get();
  } else {
    // This rank set the slot's bit for its one call (foldable() saw it marked): autoMarks_[0].
    if (autoMarkCount_ != 1 || autoMarks_[0].first != static_cast<int>(slot)) {
      return internalError("response cache: automatic slot " + std::to_string(slot) +
                           " folded without this rank's call");
    }
    out->foldedResponse = renamedReplay(slot, cached, autoMarks_[0].second).get();
  }
  out->fromCache = 1;
  out->folded = &op;
  if (coordinator_ && !coordinator_->empty()) coordinator_->forget(op.spec.name);
  cache_.touch(static_cast<int>(slot));
  return Status::ok();
}

Status Negotiator::replayCached(size_t slots, RoundResult* out) {
  auto isSet = [&](size_t slot) { return (words_[kFirstSlotWord + slot / 64] >> (slot % 64)) & 1; };
  // The automatically named slots every rank marked, in slot order, and this rank's call there
  // (an index into autoMarks_: a bit is set only where this rank set it too).
  autoSet_.clear();
  for (size_t k = 0; k < autoMarkCount_; ++k) {
    if (isSet(static_cast<size_t>(autoMarks_[k].first))) autoSet_.push_back(k);
  }
  std::sort(autoSet_.begin(), autoSet_.end(),
            [&](size_t a, size_t b) { return autoMarks_[a].first < autoMarks_[b].first; });
  // A slot alone could pair different calls (call <n> here, <n+1> on a rank a call ahead). If
  // every rank sent the same check over all it marked (AND of the checks == NOT of the AND of
  // their complements), every slot carries the same call everywhere. Otherwise (a rank is a call
  // ahead, or its calls differ) a second exchange compares the names slot by slot, for the slots
  // every rank marked: an agreed one replays, a differing one goes to the coordinator, which
  // pairs calls by name; a slot some rank did not mark just waits, as a named one would.
  autoAgreed_.assign(autoSet_.size(), 1);
  const bool allAgreed = words_[kAutoCheckWord] == ~words_[kAutoCheckComplementWord];
  if (!allAgreed && !autoSet_.empty()) {
    autoChecks_.assign(2 * autoSet_.size(), 0);
    for (size_t i = 0; i < autoSet_.size(); ++i) {
      autoChecks_[2 * i] = mix(hashName(autoMarks_[autoSet_[i]].second));
      autoChecks_[2 * i + 1] = ~autoChecks_[2 * i];
    }
    auto step = channel_.allreduceBitsAnd(autoChecks_.data(), autoChecks_.size());
    HCOLL_RETURN_IF_ERROR(
        waitControl(step, "automatic-name check", false, Clock::time_point::max(), autoChecks_));
    for (size_t i = 0; i < autoSet_.size(); ++i) {
      autoAgreed_[i] = autoChecks_[2 * i] == ~autoChecks_[2 * i + 1];
      if (autoAgreed_[i]) continue;
      if (LocalOp* op = roundPending_->find(autoMarks_[autoSet_[i]].second)) {
        op->autoReplayRefused = true;
      }
    }
  }
  // Operations every rank has ready and cached run straight away, in slot order: the first
  // fromCache responses.
  replayedSlots_.clear();
  size_t nextAuto = 0;
  // The set bits only, in slot order: a round looks at the slots every rank marked, not at
  // every slot of the cache (an application caches hundreds of tensors; a round replays a few).
  setSlots_.clear();
  for (size_t w = 0; w < (slots + 63) / 64; ++w) {
    for (uint64_t bits = words_[kFirstSlotWord + w]; bits != 0; bits &= bits - 1) {
      const size_t slot = w * 64 + static_cast<size_t>(__builtin_ctzll(bits));
      if (slot < slots) setSlots_.push_back(slot);
    }
  }
  for (size_t slot : setSlots_) {
    const ResponsePtr& cached = cache_.shared(static_cast<int>(slot));
    if (!cached->spec.autoNamed) {
      out->responses.push_back(cached);
    } else {
      // autoSet_ lists exactly these slots, in this order: a bit is set only where this rank
      // set it, and an automatic slot only ever takes an automatically named call.
      const size_t i = nextAuto++;
      if (i >= autoSet_.size() || autoMarks_[autoSet_[i]].first != static_cast<int>(slot)) {
        return internalError("response cache: automatic slot " + std::to_string(slot) +
                             " set without this rank's call");
      }
      if (!autoAgreed_[i]) continue;
      out->responses.push_back(renamedReplay(slot, cached, autoMarks_[autoSet_[i]].second));
    }
    replayedSlots_.push_back(static_cast<int>(slot));
  }
  out->fromCache = out->responses.size();
  return Status::ok();
}

const std::shared_ptr<Response>& Negotiator::renamedReplay(size_t slot, const ResponsePtr& cached,
                                                           const std::string& name) {
  if (renamed_.size() <= slot) renamed_.resize(slot + 1);
  RenamedCopy& copy = renamed_[slot];
  // A new copy when the slot's response changed (`of` holds the old one, so its address cannot
  // come back as a new response's) or an earlier replay's copy is still held (by an operation
  // not yet executed): a copy no one else holds is only this thread's to rename.
  if (copy.of != cached || copy.renamed == nullptr || copy.renamed.use_count() != 1) {
    copy.of = cached;
    copy.renamed = std::make_shared<Response>(*cached);
  }
  copy.renamed->spec.name = name;
  return copy.renamed;
}

Status Negotiator::exchangeWithCoordinator(PendingOps& pending, size_t replayed,
                                           std::vector<ResponsePtr>* out) {
  RequestList mine;
  const auto announcedAt = Clock::now();
  const auto replayedEnd = out->begin() + static_cast<std::ptrdiff_t>(replayed);
  for (auto& op : pending.all()) {
    if (op->announced ||
        std::any_of(out->begin(), replayedEnd,
                    [&](const ResponsePtr& r) { return r->spec.name == op->spec.name; })) {
      continue;
    }
    mine.ops.push_back(op->spec);
    if (op->spec.kind == OpKind::kJoin) {
      // Measured now, just after the round's readiness allreduce that every rank left at about
      // the same moment: the coordinator turns it into a join time in its own clock.
      mine.ops.back().ageMicros =
          std::chrono::duration_cast<std::chrono::microseconds>(announcedAt - op->submittedAt)
              .count();
    }
    op->announced = true;
  }
  std::vector<std::vector<uint8_t>> gathered;
  auto gather = channel_.gatherBytes(wire::encode(mine), &gathered);
  HCOLL_RETURN_IF_ERROR(waitControl(gather, "announcement gather"));

  std::vector<uint8_t> answer;
  if (coordinator_) {
    const auto now = Clock::now();
    for (size_t r = 0; r < gathered.size(); ++r) {
      RequestList list;
      // Undecodable bytes name no operation that could be failed alone: the communicator stops
      // (a peer speaking another protocol). Decodable but malformed specs fail just their
      // operation, on every rank, in the coordinator's validation.
      if (Status s = wire::decode(gathered[r].data(), gathered[r].size(), &list); !s.isOk()) {
        return Status(s.code(), "announcement from rank " + std::to_string(r) + ": " + s.message());
      }
      coordinator_->add(static_cast<int>(r), std::move(list), now);
    }
    ResponseList responses;
    responses.responses = coordinator_->takeReady();
    inspectStalls(&responses.responses);
    answer = wire::encode(responses);
  }
  auto broadcast = channel_.broadcastBytes(&answer);
  HCOLL_RETURN_IF_ERROR(
      waitControl(broadcast, "response broadcast", false, Clock::time_point::max(), answer));
  ResponseList responses;
  HCOLL_RETURN_IF_ERROR(wire::decode(answer.data(), answer.size(), &responses));
  for (const Response& r : responses.responses) {
    if (std::string why = r.malformation(channel_.size()); !why.empty()) {
      return internalError("malformed negotiation response for operation '" + r.spec.name +
                           "' from rank 0: " + why);
    }
  }
  for (Response& r : responses.responses)
    out->push_back(std::make_shared<const Response>(std::move(r)));
  return Status::ok();
}

void Negotiator::inspectStalls(std::vector<Response>* out) {
  const auto now = Clock::now();
  lastInspection_ = now;
  bool newWarning = false;
  if (config_.stallCheckSeconds > 0) {
    std::set<std::string> stillStalled;
    for (const auto& s : coordinator_->stalled(config_.stallCheckSeconds, now)) {
      stillStalled.insert(s.name);
      if (warned_.count(s.name)) continue;
      log_->warn(
          "stall: operation '{}' ({}) was submitted by ranks {} {:.1f} s ago; ranks {} "
          "have not submitted it",
          s.name, opKindName(s.kind), rankList(s.submitted), s.waitedSeconds, rankList(s.missing));
      newWarning = true;
    }
    warned_ = std::move(stillStalled);
  }
  if (const double shutdownAfter = liveness_.stallShutdownSeconds(); shutdownAfter > 0) {
    for (const auto& s : coordinator_->stalled(shutdownAfter, now)) {
      std::string message = "operation '" + s.name + "' timed out after " +
                            std::to_string(static_cast<int>(s.waitedSeconds)) + " s: ranks " +
                            rankList(s.missing) + " did not submit it (submitted by ranks " +
                            rankList(s.submitted) + ")";
      log_->error("stall shutdown: {}", message);
      out->push_back(coordinator_->fail(s.name, Code::kTimeout, message));
      newWarning = true;
    }
  }
  if (newWarning) dumpRecorder("stall on rank 0 of the communicator");
}

void Negotiator::dumpRecorder(const std::string& why) const {
  if (recorder_ == nullptr) return;
  recorder_->dumpToLog(*log_, why);
  if (Status s = FlightRecorder::writeFile(why); !s.isOk()) log_->error("{}", s.message());
}

std::string Negotiator::describeMissing(bool entry) {
  const int size = channel_.size();
  if (!entry || !signals_.tracksWaiting()) {
    return "the other " + std::to_string(size - 1) + " rank(s) of the communicator";
  }
  const std::vector<int> waiting = signals_.peersWaiting(roundSeq_);
  std::vector<int> missing;
  for (int r = 0; r < size; ++r) {
    if (r != channel_.rank() && std::find(waiting.begin(), waiting.end(), r) == waiting.end()) {
      missing.push_back(r);
    }
  }
  std::string text = "ranks " + rankList(missing) +
                     " of the communicator, which have not entered "
                     "this negotiation round";
  if (!waiting.empty()) text += " (ranks " + rankList(waiting) + " are waiting in it too)";
  return text;
}

// What a control-plane wait says: the stall warning (with the operations pending here and, at a
// round's entry, which ranks have not entered it), the notes that tell peers this rank waits in
// the round, and the messages of the close and stall bounds.
class Negotiator::ControlReport final : public BoundedWait::Report {
 public:
  // `noted`, `warned`: whether this wait (or, for the entry, this round across a hand-over)
  // already sent its stall note / logged its warning.
  ControlReport(Negotiator& n, const char* what, bool entry, bool& noted, bool& warned)
      : n_(n), what_(what), entry_(entry), noted_(noted), warned_(warned) {}

  void slow(double waited) override {
    const Config& config = n_.config_;
    // Early enough that peers' notes arrive before the warning, late enough that a round that
    // merely takes a moment sends nothing.
    const double noteAfter = std::min(1.0, config.stallCheckSeconds / 2);
    const bool diagnose = config.stallCheckSeconds > 0 || config.stallShutdownSeconds > 0;
    if (entry_ && diagnose && !noted_ && (waited >= noteAfter || config.stallCheckSeconds <= 0)) {
      noted_ = true;
      n_.signals_.noteWaiting(n_.roundSeq_);
    }
    if (!warned_ && config.stallCheckSeconds > 0 && waited >= config.stallCheckSeconds) {
      warned_ = true;
      n_.log_->warn(
          "stall: rank {} has waited {:.1f} s in the {} for {}; operations pending here: {}. "
          "A rank with nothing pending does not negotiate: some rank has not submitted these "
          "operations, or has exited",
          n_.channel_.rank(), waited, what_, n_.describeMissing(entry_), pendingNames());
      n_.dumpRecorder("stall: negotiation round waiting for other ranks");
    }
  }

  Status stalled(double waited) override {
    std::string message =
        "timed out after " + std::to_string(static_cast<int>(waited)) +
        " s: the other ranks of the communicator did not all join the negotiation of " +
        pendingNames() + " (rank " + std::to_string(n_.channel_.rank()) + " waited in the " +
        what_ + " for " + n_.describeMissing(entry_) +
        "); a rank that has not submitted them, or has exited, is missing. The "
        "communicator is unusable from now on";
    n_.log_->error("stall shutdown: {}", message);
    n_.dumpRecorder("stall shutdown: the operations this rank had pending");
    return Status(Code::kTimeout, message);
  }

  Status closeBoundPassed(double waited) override {
    std::string message = "closing the communicator: the other ranks did not take part for " +
                          std::to_string(static_cast<int>(waited)) +
                          " s (they may have exited); closed locally on rank " +
                          std::to_string(n_.channel_.rank());
    n_.log_->error("{}", message);
    return shutDown(message);
  }

 private:
  std::string pendingNames() const {
    std::string names;
    size_t listed = 0;
    for (const auto& op : n_.roundPending_->all()) {
      if (listed++ == 8) {
        names += ", ...";
        break;
      }
      names += (names.empty() ? "'" : ", '") + op->spec.name + "'";
    }
    return names.empty() ? std::string("none") : names;
  }

  Negotiator& n_;
  const char* what_;
  bool entry_;
  bool& noted_;
  bool& warned_;
};

template <typename... Buffers>
Status Negotiator::waitControl(backends::PendingPtr& step, const char* what, bool entry,
                               Clock::time_point giveUpAt, Buffers&... buffers) {
  bool notedHere = false;
  bool warnedHere = false;
  // The entry's wait may resume a round a caller handed over: it notes and warns once per
  // round, and counts from the round's start.
  ControlReport report(*this, what, entry, entry ? entryNoted_ : notedHere,
                       entry ? entryWarned_ : warnedHere);
  BoundedWait::Options options;
  if (entry) options.since = entryStartedAt_;
  options.closing = roundClosing_;  // a closing round: the close bound from its start
  options.giveUpAt = giveUpAt;
  return wait_.wait(step, report, options, buffers...);
}

}  // namespace hcoll::runtime
