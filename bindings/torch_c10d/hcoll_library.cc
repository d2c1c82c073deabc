#include "hcoll_library.h"

#include <dlfcn.h>

#include <stdexcept>

namespace hcoll::torch_c10d {

namespace {
// The oldest library with every function of HCOLL_C10D_FUNCTIONS (the *_into calls).
constexpr int kMinMajor = 0;
constexpr int kMinMinor = 1;
}  // namespace

std::shared_ptr<const HcollLibrary> HcollLibrary::load(const std::string& path) {
  std::shared_ptr<HcollLibrary> lib(new HcollLibrary());
  lib->path_ = path;
  // RTLD_LOCAL: hcoll's names stay out of the global scope (NVIDIA's unrelated libhcoll.so.1
  // shares the prefix). The Python package loaded the same file first, so this only takes a
  // reference on the copy already resident.
  lib->handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->handle_ == nullptr) {
    const char* why = dlerror();
    throw std::runtime_error("hcoll torch.distributed backend: cannot load " + path + ": " +
                             (why ? why : "unknown dlopen error"));
  }
#define HCOLL_C10D_RESOLVE_(name)                                                         \
  lib->name = reinterpret_cast<decltype(lib->name)>(dlsym(lib->handle_, #name));          \
  if (lib->name == nullptr) {                                                             \
    throw std::runtime_error("hcoll torch.distributed backend: " + path +                 \
                             " lacks " #name                                              \
                             ": the library is older than this extension; rebuild both"); \
  }
  HCOLL_C10D_FUNCTIONS(HCOLL_C10D_RESOLVE_)
#undef HCOLL_C10D_RESOLVE_
  int major = 0, minor = 0, patch = 0;
  lib->hcoll_version(&major, &minor, &patch);
  if (major != kMinMajor || minor < kMinMinor) {
    throw std::runtime_error("hcoll torch.distributed backend: " + path + " is hcoll " +
                             std::to_string(major) + "." + std::to_string(minor) + "." +
                             std::to_string(patch) + "; this extension needs " +
                             std::to_string(kMinMajor) + "." + std::to_string(kMinMinor) +
                             " or a later release of the same major version");
  }
  return lib;
}

HcollLibrary::~HcollLibrary() {
  // libhcoll is linked -z nodelete (it stays resident); dlclose only drops the reference.
  if (handle_ != nullptr) dlclose(handle_);
}

std::string HcollLibrary::errorText(hcoll_status_t status) const {
  std::string text = hcoll_status_string(status);
  const char* detail = hcoll_last_error();
  if (detail != nullptr && *detail != '\0') text += std::string(": ") + detail;
  return text;
}

void HcollLibrary::check(hcoll_status_t status, const std::string& what) const {
  if (status != HCOLL_SUCCESS) throw std::runtime_error(what + " failed: " + errorText(status));
}

}  // namespace hcoll::torch_c10d
