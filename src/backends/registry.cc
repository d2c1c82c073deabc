#include "backends/registry.h"

namespace hcoll::backends {

const BackendInfo* findBackend(const std::string& name) {
  for (const BackendInfo* info : registeredBackends()) {
    if (name == info->name) return info;
  }
  return nullptr;
}

const BackendInfo& defaultHostBackend() {
  const BackendInfo* best = nullptr;
  for (const BackendInfo* info : registeredBackends()) {
    if (info->create != nullptr && (best == nullptr || info->priority > best->priority)) {
      best = info;
    }
  }
  return *best;  // the build refuses to configure without a host backend
}

std::string backendNames(uint32_t memory) {
  std::string names;
  for (const BackendInfo* info : registeredBackends()) {
    if ((info->memory & memory) == 0) continue;
    if (!names.empty()) names += ", ";
    names += info->name;
  }
  return names;
}

}  // namespace hcoll::backends
