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

}  // namespace hcoll::backends::nccl
