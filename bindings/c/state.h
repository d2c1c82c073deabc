#pragma once
// The C layer's handle tables and the lookups every entry point starts with.

#include <memory>

#include "bindings/c/handles.h"
#include "hcoll/hcoll.h"
#include "runtime/communicator.h"
#include "runtime/request.h"
#include "runtime/runtime.h"

namespace hcoll::bindings {

HandleTable<runtime::Communicator>& commTable();
HandleTable<runtime::Request>& requestTable();

// NOT_INITIALIZED unless hcoll is initialized (sets the error message).
hcoll_status_t requireRuntime(const char* function, std::shared_ptr<runtime::Runtime>* out);
// NOT_INITIALIZED / INVALID_HANDLE checks, then the communicator behind `handle`.
hcoll_status_t resolveComm(const char* function, hcoll_comm_t handle,
                           std::shared_ptr<runtime::Runtime>* rt,
                           std::shared_ptr<runtime::Communicator>* out);
// The same without the runtime, for a call that only needs the communicator (a collective: a
// small one pays for every lock): the handle is looked at first, and only an invalid one asks
// whether hcoll is initialized, to say which error it is. (A handle stays valid until its
// communicator is destroyed or hcoll_shutdown has closed it: a collective that gets it then
// fails with SHUT_DOWN.)
hcoll_status_t resolveComm(const char* function, hcoll_comm_t handle,
                           std::shared_ptr<runtime::Communicator>* out);
hcoll_status_t resolveRequest(const char* function, hcoll_request_t handle,
                              std::shared_ptr<runtime::Request>* out);
// resolveRequest, and the handle is invalidated in the same look at the table (one lock: a small
// operation's call pays for each). Of two threads freeing one handle, one gets INVALID_HANDLE.
hcoll_status_t takeRequest(const char* function, hcoll_request_t handle,
                           std::shared_ptr<runtime::Request>* out);

hcoll_comm_t toHandle(uintptr_t h);

}  // namespace hcoll::bindings
