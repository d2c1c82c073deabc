// Request completion, outputs and release.

#include "bindings/c/errors.h"
#include "bindings/c/state.h"
#include "hcoll/hcoll.h"

namespace hcoll::bindings {
namespace {

// Resolves a request that must have completed successfully and has output `i`.
hcoll_status_t completedOutput(const char* fn, hcoll_request_t req, int i,
                               std::shared_ptr<runtime::Request>* out) {
  if (hcoll_status_t s = resolveRequest(fn, req, out); s != HCOLL_SUCCESS) return s;
  Code code = (*out)->test();
  if (code == Code::kInProgress) return HCOLL_IN_PROGRESS;
  if (code != Code::kSuccess) {
    return fail(static_cast<hcoll_status_t>(code),
                std::string(fn) + ": the operation failed: " + (*out)->errorMessage());
  }
  if (i < 0 || static_cast<size_t>(i) >= (*out)->outputCount()) {
    return fail(HCOLL_ERR_INVALID_ARGUMENT, std::string(fn) + ": the request has no output " +
                                                std::to_string(i) + " (it has " +
                                                std::to_string((*out)->outputCount()) + ")");
  }
  return HCOLL_SUCCESS;
}

}  // namespace
}  // namespace hcoll::bindings

using namespace hcoll::bindings;

extern "C" {

HCOLL_API hcoll_status_t hcoll_test(hcoll_request_t req) {
  return guarded("hcoll_test", [&] {
    std::shared_ptr<hcoll::runtime::Request> r;
    if (hcoll_status_t s = resolveRequest("hcoll_test", req, &r); s != HCOLL_SUCCESS) return s;
    hcoll::Code code = r->test();
    if (code < hcoll::Code::kSuccess)
      return fail(static_cast<hcoll_status_t>(code), r->errorMessage());
    return static_cast<hcoll_status_t>(code);
  });
}

HCOLL_API hcoll_status_t hcoll_wait(hcoll_request_t req, double timeout_s) {
  return guarded("hcoll_wait", [&] {
    std::shared_ptr<hcoll::runtime::Request> r;
    if (hcoll_status_t s = resolveRequest("hcoll_wait", req, &r); s != HCOLL_SUCCESS) return s;
    if (timeout_s != timeout_s)
      return fail(HCOLL_ERR_INVALID_ARGUMENT, "hcoll_wait: timeout is NaN");
    hcoll::Code code = r->wait(timeout_s);
    if (code == hcoll::Code::kTimeout) {
      // Only this wait's own deadline passed: the operation goes on and the request stays valid,
      // which is a state (IN_PROGRESS, like MPI_Test and UCC), not an error. ERR_TIMEOUT is
      // reserved for an operation the stall inspector failed. It may have finished (or failed)
      // just after the deadline: report what the request says now.
      code = r->test();
    }
    if (code < hcoll::Code::kSuccess)
      return fail(static_cast<hcoll_status_t>(code), r->errorMessage());
    return static_cast<hcoll_status_t>(code);
  });
}

HCOLL_API hcoll_status_t hcoll_request_output(hcoll_request_t req, int i, hcoll_tensor_t* out) {
  return guarded("hcoll_request_output", [&] {
    if (out == nullptr)
      return fail(HCOLL_ERR_INVALID_ARGUMENT, "hcoll_request_output: out is NULL");
    std::shared_ptr<hcoll::runtime::Request> r;
    if (hcoll_status_t s = completedOutput("hcoll_request_output", req, i, &r); s != HCOLL_SUCCESS)
      return s;
    const hcoll::runtime::OutputTensor& t = r->output(static_cast<size_t>(i));
    out->data = t.data;
    out->dtype = static_cast<hcoll_dtype_t>(t.dtype);
    out->ndim = static_cast<int32_t>(t.shape.size());
    out->shape = t.shape.data();
    out->device = t.device;
    out->stream = t.stream;
    return HCOLL_SUCCESS;
  });
}

HCOLL_API hcoll_status_t hcoll_request_received_splits(hcoll_request_t req, int i,
                                                       const int64_t** splits, int* n) {
  return guarded("hcoll_request_received_splits", [&] {
    if (splits == nullptr || n == nullptr) {
      return fail(HCOLL_ERR_INVALID_ARGUMENT, "hcoll_request_received_splits: splits or n is NULL");
    }
    std::shared_ptr<hcoll::runtime::Request> r;
    if (hcoll_status_t s = completedOutput("hcoll_request_received_splits", req, i, &r);
        s != HCOLL_SUCCESS)
      return s;
    // An alltoall has one output (completedOutput checked i against the outputs).
    const hcoll::runtime::Request::Splits* received = r->receivedSplits();
    if (received == nullptr || i != 0) {
      return fail(HCOLL_ERR_INVALID_ARGUMENT,
                  "hcoll_request_received_splits: the request is not an alltoall");
    }
    *splits = received->data();
    *n = static_cast<int>(received->size());
    return HCOLL_SUCCESS;
  });
}

HCOLL_API const char* hcoll_request_error(hcoll_request_t req) {
  static thread_local std::string message;
  try {
    auto r = requestTable().lookup(req);
    if (!r) return nullptr;
    message = r->errorMessage();
    return message.c_str();
  } catch (...) {
    return nullptr;
  }
}

HCOLL_API hcoll_status_t hcoll_request_free(hcoll_request_t req) {
  return guarded("hcoll_request_free", [&] {
    std::shared_ptr<hcoll::runtime::Request> r;
    if (hcoll_status_t s = takeRequest("hcoll_request_free", req, &r); s != HCOLL_SUCCESS)
      return s;
    r->release();
    return HCOLL_SUCCESS;
  });
}

}  // extern "C"
