#pragma once

// libhcoll.so.0 loaded at run time (dlopen), its C ABI resolved into a table of function
// pointers. The extension never links libhcoll: the Python package decides which library file is
// used (hcoll._lib, $HCOLL_LIBRARY) and hands its path here, so the ctypes binding and this
// extension share one loaded copy. hcoll.h is included for its types only.

#include <hcoll/hcoll.h>

#include <memory>
#include <string>

namespace hcoll::torch_c10d {

class HcollLibrary {
 public:
  // Loads `path` (RTLD_NOW | RTLD_LOCAL) and resolves every function below. Throws
  // std::runtime_error naming the path and the missing function when the file cannot be loaded or
  // is an hcoll older than this extension (a symbol it lacks).
  static std::shared_ptr<const HcollLibrary> load(const std::string& path);
  ~HcollLibrary();
  HcollLibrary(const HcollLibrary&) = delete;
  HcollLibrary& operator=(const HcollLibrary&) = delete;

  const std::string& path() const { return path_; }

  // Throws std::runtime_error "<what>: <status> (<last error>)" unless `status` is SUCCESS. The
  // last error is this thread's: call it on the thread that made the failed call.
  void check(hcoll_status_t status, const std::string& what) const;
  std::string errorText(hcoll_status_t status) const;

#define HCOLL_C10D_FUNCTIONS(XX)                                                                   \
  XX(hcoll_initialize)                                                                             \
  XX(hcoll_is_initialized)                                                                         \
  XX(hcoll_version) XX(hcoll_status_string) XX(hcoll_last_error) XX(hcoll_nccl_built)              \
      XX(hcoll_comm_world) XX(hcoll_comm_split) XX(hcoll_comm_create) XX(hcoll_comm_destroy)       \
          XX(hcoll_comm_set_timeout) XX(hcoll_comm_rank) XX(hcoll_comm_size) XX(hcoll_comm_stats)  \
              XX(hcoll_allreduce) XX(hcoll_grouped_allreduce) XX(hcoll_allgather)                  \
                  XX(hcoll_allgather_into) XX(hcoll_broadcast) XX(hcoll_alltoall)                  \
                      XX(hcoll_alltoall_into) XX(hcoll_reducescatter) XX(hcoll_reducescatter_into) \
                          XX(hcoll_barrier) XX(hcoll_test) XX(hcoll_wait) XX(hcoll_request_output) \
                              XX(hcoll_request_received_splits) XX(hcoll_request_error)            \
                                  XX(hcoll_request_free)
#define HCOLL_C10D_MEMBER_(name) decltype(&::name) name = nullptr;
  HCOLL_C10D_FUNCTIONS(HCOLL_C10D_MEMBER_)
#undef HCOLL_C10D_MEMBER_

 private:
  HcollLibrary() = default;
  std::string path_;
  void* handle_ = nullptr;
};

}  // namespace hcoll::torch_c10d
