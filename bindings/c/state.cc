#include "bindings/c/state.h"

#include "bindings/c/errors.h"

namespace hcoll::bindings {

HandleTable<runtime::Communicator>& commTable() {
  static auto* table = new HandleTable<runtime::Communicator>(0xC);
  return *table;
}

HandleTable<runtime::Request>& requestTable() {
  static auto* table = new HandleTable<runtime::Request>(0xA);
  return *table;
}

hcoll_status_t requireRuntime(const char* function, std::shared_ptr<runtime::Runtime>* out) {
  *out = runtime::Runtime::current();
  if (!*out) return fail(HCOLL_ERR_NOT_INITIALIZED, std::string(function) + ": hcoll is not initialized");
  return HCOLL_SUCCESS;
}

hcoll_status_t resolveComm(const char* function, hcoll_comm_t handle,
                           std::shared_ptr<runtime::Runtime>* rt,
                           std::shared_ptr<runtime::Communicator>* out) {
  if (hcoll_status_t s = requireRuntime(function, rt); s != HCOLL_SUCCESS) return s;
  if (handle == HCOLL_COMM_NULL) return fail(HCOLL_ERR_INVALID_HANDLE, std::string(function) + ": comm is NULL");
  *out = commTable().lookup(handle);
  if (!*out) {
    return fail(HCOLL_ERR_INVALID_HANDLE,
                std::string(function) + ": comm is not a live communicator handle (destroyed, "
                                        "from before a shutdown, or garbage)");
  }
  return HCOLL_SUCCESS;
}

hcoll_status_t resolveComm(const char* function, hcoll_comm_t handle,
                           std::shared_ptr<runtime::Communicator>* out) {
  if (handle != HCOLL_COMM_NULL) *out = commTable().lookup(handle);
  if (*out) return HCOLL_SUCCESS;
  std::shared_ptr<runtime::Runtime> rt;
  return resolveComm(function, handle, &rt, out);  // the error it is, with its message
}

namespace {

hcoll_status_t findRequest(const char* function, hcoll_request_t handle, bool take,
                           std::shared_ptr<runtime::Request>* out) {
  if (handle == HCOLL_REQUEST_NULL) {
    return fail(HCOLL_ERR_INVALID_HANDLE, std::string(function) + ": request is NULL");
  }
  *out = take ? requestTable().remove(handle) : requestTable().lookup(handle);
  if (!*out) {
    return fail(HCOLL_ERR_INVALID_HANDLE,
                std::string(function) + ": request is not a live request handle (freed, from "
                                        "before a shutdown, or garbage)");
  }
  return HCOLL_SUCCESS;
}

}  // namespace

hcoll_status_t resolveRequest(const char* function, hcoll_request_t handle,
                              std::shared_ptr<runtime::Request>* out) {
  return findRequest(function, handle, /*take=*/false, out);
}

hcoll_status_t takeRequest(const char* function, hcoll_request_t handle,
                           std::shared_ptr<runtime::Request>* out) {
  return findRequest(function, handle, /*take=*/true, out);
}

hcoll_comm_t toHandle(uintptr_t h) { return reinterpret_cast<hcoll_comm_t>(h); }

}  // namespace hcoll::bindings
