#include "backends/nccl/nccl_bootstrap.h"

#include <chrono>
#include <string>
#include <thread>

namespace hcoll::backends::nccl {
namespace {

// The negotiation thread owns the control plane, so a blocking poll here is its normal mode.
Status drive(Pending& pending) {
  Status s;
  auto sleep = std::chrono::microseconds(1);
  while (!pending.poll(&s)) {
    std::this_thread::sleep_for(sleep);
    if (sleep < std::chrono::microseconds(1000)) sleep *= 2;
  }
  return s;
}

}  // namespace

Status shareUniqueId(Channel& control, size_t idBytes,
                     const std::function<Status(std::vector<uint8_t>*)>& makeId,
                     std::vector<uint8_t>* id) {
  id->clear();
  Status made;
  if (control.rank() == 0) {
    made = makeId(id);
    if (!made.isOk() || id->size() != idBytes) id->clear();
  }
  HCOLL_RETURN_IF_ERROR(drive(*control.broadcastBytes(id)));
  if (!made.isOk()) return made;
  if (id->size() != idBytes) {
    return backendError("NCCL unique id from rank 0 has " + std::to_string(id->size()) +
                        " bytes, expected " + std::to_string(idBytes) +
                        " (rank 0 could not create it)");
  }
  return Status::ok();
}

Status agreeOnSuccess(Channel& control, const Status& local) {
  uint64_t ready = local.isOk() ? 1 : 0;
  Status s = drive(*control.allreduceBitsAnd(&ready, 1));
  if (!local.isOk()) return local;
  HCOLL_RETURN_IF_ERROR(s);
  if (ready == 0) {
    return backendError(
        "another rank could not prepare its NCCL communicator (its log and its request say why)");
  }
  return Status::ok();
}

Status prepareBootstrap(Channel& control, size_t idBytes, const Status& local,
                        const std::function<Status(std::vector<uint8_t>*)>& makeId,
                        std::vector<uint8_t>* id) {
  // Rank 0 makes no id when it is not ready itself: its empty id fails every rank, and the
  // agreement below still runs so that the ranks stay in step.
  Status shared = shareUniqueId(
      control, idBytes,
      [&](std::vector<uint8_t>* bytes) { return local.isOk() ? makeId(bytes) : local; }, id);
  return agreeOnSuccess(control, local.isOk() ? shared : local);
}

}  // namespace hcoll::backends::nccl
