#include "runtime/runtime.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstdio>
#include <limits>

#include "backends/device.h"
#include "backends/registry.h"
#include "common/logging.h"
#include "fusion/fusion_allocator.h"
#include "runtime/flight_recorder.h"
#include "runtime/output_pool.h"
#include "runtime/settings_check.h"

namespace hcoll::runtime {
namespace {

std::mutex gLifecycleMutex;  // serializes initialize and shutdown
std::shared_ptr<Runtime> gRuntime;
std::mutex gCurrentMutex;  // guards the gRuntime pointer itself
// The backend of the current (or last) runtime: hcoll_abort ends the job through it.
std::atomic<const backends::BackendInfo*> gBackendInfo{nullptr};

// Runs at process exit and at the application's MPI_Finalize: shuts hcoll down (so that peers
// learn this rank leaves) and says whether finalizing MPI is safe, i.e. no communicator of this
// process saw a peer leave or give up, or gave up itself (then MPI_Finalize, which waits for
// every peer, could wait forever).
bool shutdownBeforeFinalize() {
  Runtime::shutdown();
  return !Communicator::anyTroubled();
}

bool closedTogether() { return Communicator::allClosedTogether(); }

}  // namespace

std::shared_ptr<Runtime> Runtime::current() {
  std::lock_guard<std::mutex> lock(gCurrentMutex);
  return gRuntime;
}

Status Runtime::initialize(const InitOptions& options) {
  std::lock_guard<std::mutex> lifecycle(gLifecycleMutex);
  if (current()) return invalidArgument("hcoll is already initialized");
  std::shared_ptr<Runtime> rt(new Runtime());
  HCOLL_RETURN_IF_ERROR(Config::fromEnvironment(&rt->config_));
  rt->outputs_ = options.outputs;
  const std::string name = !options.backend.empty() ? options.backend : rt->config_.backend;
  const backends::BackendInfo* info =
      name.empty() ? &backends::defaultHostBackend() : backends::findBackend(name);
  if (info == nullptr || info->create == nullptr || (info->memory & backends::kHostMemory) == 0) {
    return invalidArgument("no host backend called '" + name + "' in this build (it has: " +
                           backends::backendNames(backends::kHostMemory) +
                           "; set by HCOLL_BACKEND or the init parameters)");
  }
  backends::BackendOptions backendOptions;
  backendOptions.externalWorld = options.externalWorld;
  backendOptions.localRanks = options.localRanks;
  backendOptions.beforeExit = shutdownBeforeFinalize;
  backendOptions.closedTogether = closedTogether;
  // Exit after a close every rank made together is bounded: no longer than a stall may last, and
  // never more than 30 s (a stall shutdown time of 0 means never).
  constexpr double kMaxExitSeconds = 30.0;
  const double stall = rt->config_.stallShutdownSeconds;
  backendOptions.exitBoundSeconds = stall > 0 ? std::min(stall, kMaxExitSeconds) : kMaxExitSeconds;
  HCOLL_RETURN_IF_ERROR(info->create(backendOptions, &rt->backend_));
  gBackendInfo = info;
  rt->backendName_ = info->name;
  rt->hostedRanks_ = rt->backend_->hostedRanks();
  const int firstRank = rt->hostedRanks_.front();
  logging::configure(rt->config_.logLevel, firstRank);
  FlightRecorder::configure(rt->config_.flightRecorderPath, firstRank);
  fusion::FusionAllocator::instance().setThreshold(rt->config_.fusionThresholdBytes);
  rt->timeline_ = std::make_unique<Timeline>(firstRank, rt->backend_->worldSize());
  if (!rt->config_.timelinePath.empty()) {
    if (Status s = rt->timeline_->start(rt->config_.timelinePath); !s.isOk()) {
      return Status(s.code(), "HCOLL_TIMELINE: " + s.message());
    }
  }
  std::vector<std::unique_ptr<backends::Channel>> channels(rt->hostedRanks_.size());
  for (size_t i = 0; i < channels.size(); ++i) {
    HCOLL_RETURN_IF_ERROR(rt->backend_->world(rt->hostedRanks_[i], &channels[i]));
  }
  // Ranks hosted by one process read one environment: only ranks in other processes can differ.
  if (channels.size() == 1) HCOLL_RETURN_IF_ERROR(agreeOnSettings(*channels[0], &rt->config_));
  fusion::FusionAllocator::instance().setThreshold(rt->config_.fusionThresholdBytes);
  for (auto& channel : channels) {
    std::shared_ptr<Communicator> world;
    HCOLL_RETURN_IF_ERROR(rt->adopt(std::move(channel), &world));
    rt->worlds_.push_back(std::move(world));
  }
  logging::get("runtime")->info(
      "initialized: backend {}, {} ranks ({} in this process), fusion threshold {} bytes, "
      "cache {}",
      info->name, rt->backend_->worldSize(), rt->worlds_.size(),
      rt->config_.fusionThresholdBytes, rt->config_.cacheCapacity);
  std::lock_guard<std::mutex> lock(gCurrentMutex);
  gRuntime = std::move(rt);
  return Status::ok();
}

Status Runtime::shutdown() {
  std::lock_guard<std::mutex> lifecycle(gLifecycleMutex);
  std::shared_ptr<Runtime> rt;
  {
    std::lock_guard<std::mutex> lock(gCurrentMutex);
    rt = std::move(gRuntime);
    gRuntime.reset();
  }
  if (!rt) return Status(Code::kNotInitialized, "hcoll is not initialized");
  rt->closeAll();
  if (Status s = FlightRecorder::writeFile("shutdown"); !s.isOk()) {
    logging::get("runtime")->error("{}", s.message());
  }
  FlightRecorder::reset();
  fusion::FusionAllocator::instance().trim();
  OutputPool::instance().trim();
  return Status::ok();
}

Runtime::~Runtime() {
  closeAll();
}  // threads stop before the timeline closes

void Runtime::closeAll() {
  std::vector<std::shared_ptr<Communicator>> live;
  {
    std::lock_guard<std::mutex> lock(commsMutex_);
    for (auto& weak : comms_) {
      if (auto c = weak.lock()) live.push_back(std::move(c));
    }
    comms_.clear();
  }
  // Begin every close before waiting for any, so communicators drain concurrently whatever
  // order other ranks list them in.
  for (auto& c : live) c->beginClose();
  for (auto& c : live) c->waitClosed();
}

Status Runtime::adopt(std::unique_ptr<backends::Channel> channel,
                      std::shared_ptr<Communicator>* out) {
  if (!channel) {
    out->reset();
    return Status::ok();
  }
  const int timelineTrack = timeline_->registerCommunicator(
      std::string(worlds_.size() < hostedRanks_.size() ? "world" : "communicator") + " (" +
      std::to_string(channel->size()) + " ranks)");
  auto comm =
      std::make_shared<Communicator>(std::move(channel), config_, timeline_.get(), timelineTrack,
                                     outputs_);
  {
    std::lock_guard<std::mutex> lock(commsMutex_);
    comms_.erase(std::remove_if(comms_.begin(), comms_.end(), [](auto& w) { return w.expired(); }),
                 comms_.end());
    comms_.push_back(comm);
  }
  *out = std::move(comm);
  return Status::ok();
}

Status Runtime::runCommOp(Communicator& parent, std::unique_ptr<LocalOp> op,
                          std::shared_ptr<Communicator>* out) {
  auto request = newRequest();
  op->request = request;
  HCOLL_RETURN_IF_ERROR(parent.submit(std::move(op)));
  Code code = request->wait(-1);
  if (code != Code::kSuccess) return Status(code, request->errorMessage());
  return adopt(request->takeNewChannel(), out);
}

Status Runtime::split(Communicator& parent, int color, int key,
                      std::shared_ptr<Communicator>* out) {
  auto op = std::make_unique<LocalOp>();
  op->spec.kind = OpKind::kCommSplit;
  op->spec.color = color;
  op->spec.key = key;
  return runCommOp(parent, std::move(op), out);
}

Status Runtime::create(Communicator& parent, const std::vector<int32_t>& ranks,
                       std::shared_ptr<Communicator>* out) {
  auto op = std::make_unique<LocalOp>();
  op->spec.kind = OpKind::kCommCreate;
  op->spec.ranks = ranks;
  return runCommOp(parent, std::move(op), out);
}

Status Runtime::refuseCommOp(Communicator& parent, OpKind kind, Status why) {
  auto op = std::make_unique<LocalOp>();
  op->spec.kind = kind;
  op->spec.color = kRefusedSplitColor;  // comm_create: refused by its empty rank list
  std::shared_ptr<Communicator> none;
  Status negotiated = runCommOp(parent, std::move(op), &none);
  if (negotiated.isOk()) {
    return Status(Code::kInternal,
                  "a refused communicator call was not refused by the coordinator");
  }
  return why;
}

Status Runtime::fromExternal(int64_t handle, std::shared_ptr<Communicator>* out) {
  std::unique_ptr<backends::Channel> channel;
  HCOLL_RETURN_IF_ERROR(backend_->fromExternal(handle, &channel));
  return adopt(std::move(channel), out);
}

Status Runtime::setTimeout(Communicator& comm, double seconds) {
  // An allreduce of {s, -s} with MIN gives {min, -max}: every rank learns whether all passed the
  // same value from the same result, so all succeed or all fail alike. A refusal (seconds < 0:
  // the caller's value was invalid) contributes {-1, -inf}, which no valid value matches.
  const bool refused = seconds < 0;
  double values[2] = {refused ? -1.0 : seconds,
                      refused ? -std::numeric_limits<double>::infinity() : -seconds};
  auto op = std::make_unique<LocalOp>();
  op->spec.kind = OpKind::kAllreduce;
  op->spec.op = ReduceOp::kMin;
  op->spec.name = "hcoll_comm_set_timeout." + std::to_string(comm.nextTimeoutChange());
  op->spec.members.push_back(MemberSpec{DataType::kFloat64, {2}});
  TensorDesc t;
  t.data = values;
  t.dtype = DataType::kFloat64;
  t.shape = {2};
  op->inputs.push_back(t);
  op->outputs.push_back(t);
  auto request = newRequest();
  op->request = request;
  HCOLL_RETURN_IF_ERROR(comm.submit(std::move(op)));
  if (Code code = request->wait(-1); code != Code::kSuccess) {
    return Status(code, request->errorMessage());
  }
  if (values[0] < 0) {
    return Status(refused ? Code::kInvalidArgument : Code::kMismatch,
                  "a rank passed an invalid timeout; the communicator keeps its timeout");
  }
  if (values[0] != -values[1]) {
    char buf[160];
    std::snprintf(buf, sizeof(buf),
                  "the ranks passed different timeouts (from %.17g to %.17g s); the "
                  "communicator keeps its timeout",
                  values[0], -values[1]);
    return Status(Code::kMismatch, buf);
  }
  comm.setStallShutdownSeconds(seconds);
  return Status::ok();
}

Status Runtime::startTimeline(const std::string& path) {
  std::shared_ptr<Runtime> rt = current();
  if (!rt) return Status(Code::kNotInitialized, "hcoll is not initialized");
  return rt->timeline_->start(path);
}

Status Runtime::stopTimeline() {
  std::shared_ptr<Runtime> rt = current();
  if (!rt) return Status(Code::kNotInitialized, "hcoll is not initialized");
  rt->timeline_->stop();
  return Status::ok();
}

const char* Runtime::backendVersion(const char* name) {
  const backends::BackendInfo* info = backends::findBackend(name);
  return info != nullptr && info->transportVersion != nullptr ? info->transportVersion() : nullptr;
}

Status Runtime::checkDeviceMemory(int32_t device, const void* data) {
  backends::DeviceBackend* backend = backends::deviceBackend();
  if (backend != nullptr && backend->available()) return backend->checkMemory(device, data);
  return Status(Code::kUnsupported,
                "CUDA tensors (device " + std::to_string(device) + ") need a device backend" +
                    (backend ? ", and the one built found no usable CUDA device in this process"
                             : ", which this build does not have (it has: " +
                                   backends::backendNames(backends::kHostMemory) + ")"));
}

Status Runtime::checkDeviceReduction(DataType dtype) {
  backends::DeviceBackend* backend = backends::deviceBackend();
  return backend != nullptr ? backend->checkReduction(dtype) : Status::ok();
}

void Runtime::abortJob(const std::string& reason) {
  logging::get("runtime")->critical("hcoll_abort: {}", reason);
  if (auto rt = current()) {
    std::vector<std::shared_ptr<Communicator>> live;
    {
      std::lock_guard<std::mutex> lock(rt->commsMutex_);
      for (auto& weak : rt->comms_) {
        if (auto c = weak.lock()) live.push_back(std::move(c));
      }
    }
    // Best effort, about a second per communicator at most: the job ends right after anyway.
    for (auto& c : live) c->announceAbort(reason);
  }
  logging::get("runtime")->flush();
  // The backend of the runtime that was initialized last, else the default one (hcoll_abort
  // works uninitialized too: it must still end an MPI job that MPI's launcher started).
  const backends::BackendInfo* info = gBackendInfo.load();
  if (info == nullptr) info = &backends::defaultHostBackend();
  if (info->abortJob != nullptr) info->abortJob(1);
  std::_Exit(1);
}

Status Runtime::destroy(const std::shared_ptr<Communicator>& comm) {
  for (const auto& world : worlds_) {
    if (comm == world) return invalidArgument("the world communicator is owned by the runtime");
  }
  comm->close();
  std::lock_guard<std::mutex> lock(commsMutex_);
  comms_.erase(std::remove_if(comms_.begin(), comms_.end(),
                              [&](auto& w) { return w.expired() || w.lock() == comm; }),
               comms_.end());
  return Status::ok();
}

}  // namespace hcoll::runtime
