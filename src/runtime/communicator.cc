#include "runtime/communicator.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>

#include "backends/device.h"
#include "common/coarse_clock.h"
#include "common/op_traits.h"

namespace hcoll::runtime {

// A communicator of this process saw a peer stop mid-operation or not answer its close (set by
// the loop, communicator_loop.cc), or this process aborted.
std::atomic<bool> gTroubledCommunicators{false};
// A communicator of this process stopped other than in a round where every rank was closing.
std::atomic<bool> gPartedCommunicators{false};

namespace {


// CUDA tensors: captures each caller stream as it is at submission, so that the collective sees
// what the caller enqueued on it before the call.
Status markCallerStreams(LocalOp& op) {
  if (op.spec.device == kHostDevice) return Status::ok();
  backends::DeviceBackend* backend = backends::deviceBackend();
  if (backend == nullptr) return Status(Code::kUnsupported, "no device backend in this build");
  op.markers.reserve(op.inputs.size());
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    backends::StreamMarkerPtr marker;
    Status s = backend->mark(op.inputs[i].device, op.inputs[i].stream, &marker);
    if (!s.isOk()) {
      const std::string member = op.inputs.size() > 1 ? "ins[" + std::to_string(i) + "]" : "in";
      return Status(s.code(), member + ": " + s.message());
    }
    op.markers.push_back(std::move(marker));
  }
  return Status::ok();
}

// Host operations whose per-rank part exceeds what the backend's v-collectives take (an MPI
// without MPI-4 large counts: INT_MAX bytes or elements) are refused here, synchronously, rather
// than failing later on every rank. Checked on what this rank knows: its own parts (a fused
// batch of several members is bounded by the sum, so that sum is checked).
Status checkBackendLimits(const LocalOp& op, const backends::Channel& channel) {
  const size_t limit = channel.maxVectorCount();
  if (op.spec.device != kHostDevice || limit == SIZE_MAX) return Status::ok();
  const size_t n = static_cast<size_t>(channel.size());
  size_t part = 0;  // the largest count of this rank's part: bytes, or reducescatter elements
  const char* unit = "bytes";
  switch (op.spec.kind) {
    case OpKind::kAllgather:
      for (const MemberSpec& m : op.spec.members) part += m.bytes();
      break;
    case OpKind::kAlltoall:
      part = op.spec.members[0].bytes();  // also bounds every split and displacement
      break;
    case OpKind::kReducescatter:
      unit = "elements";
      for (const MemberSpec& m : op.spec.members) {
        const size_t rows = static_cast<size_t>(m.shape.empty() ? 0 : m.shape[0]);
        part += (rows + n - 1) / n * static_cast<size_t>(rowElements(m.shape)) * n;
      }
      break;
    default:
      return Status::ok();
  }
  if (part <= limit) return Status::ok();
  return Status(Code::kUnsupported,
                std::string(opKindName(op.spec.kind)) + " of " + std::to_string(part) + " " + unit +
                    " on this rank: one rank's part is limited to " + std::to_string(limit) +
                    " " + unit + " (split the tensor): " + channel.maxVectorCountReason());
}

}  // namespace

Communicator::Communicator(std::unique_ptr<backends::Channel> channel, const Config& config,
                           Timeline* timeline, int timelineTrack,
                           std::shared_ptr<const OutputAllocator> outputs)
    : channel_(std::move(channel)),
      config_(config),
      liveness_(*channel_, config.stallShutdownSeconds),
      log_(logging::get("runtime")),
      timeline_(timeline),
      timelineTrack_(timelineTrack),
      recorder_(std::make_shared<FlightRecorder>(channel_->rank(), channel_->size())),
      // Requests share only a user's allocator: null means the output pool, as the default one
      // does, without a locked reference count per request.
      outputs_(outputs && outputs->userOwned() ? std::move(outputs) : nullptr),
      mutex_(recorder_->mutex()) {
  FlightRecorder::track(recorder_);
  thread_ = std::thread([this] { run(); });
}

Communicator::~Communicator() {
  if (thread_.joinable()) abort();
}

namespace {
// Seats are never freed (Communicator::Seat): the free ones wait here for the next communicator.
// Both are never destroyed, so a communicator destroyed during exit still finds them.
std::mutex& seatPoolMutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}
std::vector<CallerProgress*>& freeSeats() {
  static auto* seats = new std::vector<CallerProgress*>;
  return *seats;
}
size_t gSeatsMade = 0;  // under seatPoolMutex(): freeSeats() has room for all of them
}  // namespace

Communicator::SeatLease::SeatLease() {
  std::lock_guard<std::mutex> lock(seatPoolMutex());
  std::vector<CallerProgress*>& seats = freeSeats();
  if (seats.empty()) {
    seats.reserve(gSeatsMade + 1);  // so that giving it back never allocates
    seat_ = new Seat;
    ++gSeatsMade;
    return;
  }
  seat_ = static_cast<Seat*>(seats.back());
  seats.pop_back();
  seat_->wanted.store(false);
}

Communicator::SeatLease::~SeatLease() {
  std::lock_guard<std::mutex> lock(seatPoolMutex());
  freeSeats().push_back(seat_);
}

Status Communicator::submit(std::unique_ptr<LocalOp> op) {
  HCOLL_RETURN_IF_ERROR(checkBackendLimits(*op, *channel_));
  HCOLL_RETURN_IF_ERROR(markCallerStreams(*op));
  bool notify = true;
  {
    std::lock_guard<SpinLock> lock(mutex_);
    if (!brokenReason_.empty()) {
      return shutDown("the communicator is unusable: " + brokenReason_);
    }
    if (closing_ || stopped_) {
      return shutDown("the communicator is being destroyed or hcoll is shutting down");
    }
    const bool autoNamed = op->spec.name.empty();
    auto& counter = autoNameCounters_[static_cast<size_t>(op->spec.kind)];
    if (autoNamed) {
      char digits[24];
      const auto end = std::to_chars(digits, digits + sizeof digits, counter).ptr;
      op->spec.name.assign(opKindName(op->spec.kind)).append(1, '.').append(digits, end);
    }
    if (!inFlight_.insert(op->spec.name)) {
      return Status(Code::kDuplicateName,
                    "an operation named '" + op->spec.name + "' is already in flight");
    }
    if (autoNamed) ++counter;
    op->spec.autoNamed = autoNamed;
    // A batching window exists to gather submissions: a caller driving at once would defeat it.
    // CUDA operations too: the waiting caller enqueues the collective and polls its fence itself
    // instead of two thread hand-offs.
    op->callerDrivable = config_.callerProgress && config_.cycleTimeMs == 0 &&
                         op->spec.kind != OpKind::kJoin && !traitsOf(op->spec.kind).createsComm;
    for (const MemberSpec& m : op->spec.members) op->payloadBytes += m.bytes();
    if (op->spec.kind == OpKind::kAllgather) op->payloadBytes *= static_cast<size_t>(size());
    // The size bound is about host temporaries (kCallerMaxBytes): a CUDA operation has none.
    op->callerDrivable = op->callerDrivable &&
                         (op->spec.device != kHostDevice || op->payloadBytes <= kCallerMaxBytes);
    if (op->callerDrivable) op->request->setProgress(seat_.get());
    // What the submission time is for: a batching window and a join's age (which rank joined
    // last) and the timeline's spans need it precise; the claim window is dated by the thread
    // when it first sees the operation (ProgressMode::takeAt); the recorder and the one-second
    // announcement bound take the coarse clock (3 ns, not 25: a small operation's whole own
    // work is a few hundred).
    const bool precise = config_.cycleTimeMs > 0 || op->spec.kind == OpKind::kJoin ||
                         (timeline_ != nullptr && timeline_->active());
    op->submittedAt = precise ? std::chrono::steady_clock::now() : coarseNow();
    op->flightSeq = recorder_->submittedLocked(op->spec, op->submittedAt);
    notify = progressMode_.wakesThread(op->callerDrivable);
    incoming_.push_back(std::move(op));
    hasIncoming_.store(true, std::memory_order_release);
  }
  if (notify) wake_.notify_one();
  return Status::ok();
}

void Communicator::finish(std::unique_ptr<LocalOp> op, const Status& status) {
  if (!op) return;
  {
    std::lock_guard<SpinLock> lock(mutex_);
    inFlight_.erase(op->spec.name);
    recorder_->advanceLocked(op->flightSeq, FlightState::kDone, coarseNow(), status.code());
  }
  op->request->complete(status);
  recycleLocalOp(std::move(op));
}

void Communicator::beginClose() {
  {
    std::lock_guard<SpinLock> lock(mutex_);
    closing_ = true;
    closeRequested_.store(true);
  }
  wake_.notify_one();
}

void Communicator::waitClosed() {
  if (thread_.joinable()) thread_.join();
}

void Communicator::close() {
  beginClose();
  waitClosed();
}

void Communicator::abort() {
  abort_.store(true);
  beginClose();
  waitClosed();
}

bool Communicator::anyTroubled() { return gTroubledCommunicators.load(); }

bool Communicator::allClosedTogether() { return !gPartedCommunicators.load(); }

void Communicator::announceAbort(const std::string& reason) {
  gTroubledCommunicators.store(true);
  channel_->signals().sendNotice(
      backends::PeerSignals::NoticeKind::kGone, Code::kShutDown,
      "rank " + std::to_string(rank()) + " called hcoll_abort: " + reason);
}

StatsSnapshot Communicator::stats() const {
  StatsSnapshot s;
  s.cycles = stats_.cycles.load();
  s.slowPath = stats_.slowPath.load();
  s.cacheHits = stats_.cacheHits.load();
  s.backendCalls = stats_.backendCalls.load();
  s.fusedTensors = stats_.fusedTensors.load();
  s.bytes = stats_.bytes.load();
  s.callerRounds = stats_.callerRounds.load();
  s.foldedOps = stats_.foldedOps.load();
  std::lock_guard<SpinLock> lock(mutex_);
  s.queueDepth = inFlight_.size();
  return s;
}

}  // namespace hcoll::runtime
