// The collectives: argument checks, a LocalOp built from the caller's tensors, submission.

#include <algorithm>
#include <memory>
#include <numeric>
#include <string>

#include "bindings/c/errors.h"
#include "bindings/c/state.h"
#include "bindings/c/tensor_checks.h"
#include "common/adasum.h"
#include "common/op_traits.h"
#include "hcoll/hcoll.h"

namespace hcoll::bindings {
namespace {

using runtime::Communicator;
using runtime::LocalOp;
using runtime::MemberSpec;
using runtime::Runtime;

// What every collective shares: resolve the communicator, check req and name, submit.
class Submission {
 public:
  Submission(const char* function, OpKind kind) : function_(function) {
    op_ = runtime::makeLocalOp();
    op_->spec.kind = kind;
  }

  hcoll_status_t begin(hcoll_comm_t comm, const char* name, hcoll_request_t* req) {
    if (hcoll_status_t s = resolveComm(function_, comm, &comm_); s != HCOLL_SUCCESS) return s;
    if (req == nullptr)
      return fail(HCOLL_ERR_INVALID_ARGUMENT, std::string(function_) + ": req is NULL");
    if (hcoll_status_t s = checkName(function_, name); s != HCOLL_SUCCESS) return s;
    if (name != nullptr) op_->spec.name = name;
    req_ = req;
    return HCOLL_SUCCESS;
  }

  // Adds member i (checked); `out` is the allreduce output or NULL. The member's shape is stored
  // once, in its MemberSpec: the input and output descriptors keep none (no heap copy per member).
  hcoll_status_t addMember(int i, bool grouped, const hcoll_tensor_t* in,
                           const hcoll_tensor_t* out) {
    CheckContext ctx{function_, grouped ? "ins" : "in", grouped ? i : -1};
    // Descriptors are checked in place (the operation's vectors keep their storage from call to
    // call: nothing to move); a failure discards the whole operation.
    TensorDesc& input = op_->inputs.emplace_back();
    if (hcoll_status_t s = checkTensor(ctx, in, &input, /*copyShape=*/false); s != HCOLL_SUCCESS)
      return s;
    if (op_->inputs.size() > 1 &&
        (op_->inputs[0].device == kHostDevice) != (input.device == kHostDevice)) {
      return fail(HCOLL_ERR_INVALID_ARGUMENT, std::string(function_) + ": " + ctx.where() +
                                                  ": a group mixes host and CUDA tensors");
    }
    if (op_->inputs.size() > 1 && op_->inputs[0].device != input.device) {
      return fail(HCOLL_ERR_INVALID_ARGUMENT, std::string(function_) + ": " + ctx.where() +
                                                  ": a group spans CUDA devices " +
                                                  std::to_string(op_->inputs[0].device) + " and " +
                                                  std::to_string(input.device));
    }
    const auto ndim = static_cast<size_t>(in->ndim);
    if (out != nullptr) {
      CheckContext octx{function_, grouped ? "outs" : "out", grouped ? i : -1};
      TensorDesc& output = op_->outputs.emplace_back();
      if (hcoll_status_t s = checkTensor(octx, out, &output, /*copyShape=*/false, in);
          s != HCOLL_SUCCESS)
        return s;
      const bool sameShape =
          out->ndim == in->ndim && std::equal(in->shape, in->shape + ndim, out->shape);
      if (output.dtype != input.dtype || !sameShape || output.device != input.device) {
        const auto shapeOf = [](const hcoll_tensor_t* t) {
          return shapeString(std::vector<int64_t>(t->shape, t->shape + t->ndim));
        };
        return fail(HCOLL_ERR_INVALID_ARGUMENT,
                    std::string(function_) + ": " + octx.where() + " (" +
                        dataTypeName(output.dtype) + " " + shapeOf(out) + ") differs from " +
                        ctx.where() + " (" + dataTypeName(input.dtype) + " " + shapeOf(in) +
                        ") in dtype, shape or device");
      }
    }
    if (op_->inputs.size() == 1) op_->spec.device = input.device;
    // Built in place (no temporary shape to move and destroy).
    MemberSpec& member = op_->spec.members.emplace_back();
    member.dtype = input.dtype;
    member.shape.assign(in->shape, in->shape + ndim);
    return HCOLL_SUCCESS;
  }

  // Adds the caller's output of member i (*_into). Only what this rank can check alone is checked
  // here (dtype, device, ndim, dims[1:]); dim0 depends on the other ranks, so it is announced
  // (spec.outputRows) and the coordinator fails a wrong one with MISMATCH on every rank.
  hcoll_status_t addCallerOutput(int i, bool grouped, const hcoll_tensor_t* out) {
    const TensorDesc& input = op_->inputs[static_cast<size_t>(i)];
    const Shape& inShape = op_->spec.members[static_cast<size_t>(i)].shape;
    CheckContext ctx{function_, grouped ? "ins" : "in", grouped ? i : -1};
    CheckContext octx{function_, grouped ? "outs" : "out", grouped ? i : -1};
    // Checked in place (the operation's outputs keep their storage from call to call: no
    // descriptor to move); a failure discards the whole operation.
    TensorDesc& output = op_->outputs.emplace_back();
    if (hcoll_status_t s = checkTensor(octx, out, &output); s != HCOLL_SUCCESS) return s;
    const bool rowsAgree =
        output.shape.size() == inShape.size() && !output.shape.empty() &&
        std::equal(output.shape.begin() + 1, output.shape.end(), inShape.begin() + 1);
    if (output.dtype != input.dtype || output.device != input.device || !rowsAgree) {
      return fail(HCOLL_ERR_INVALID_ARGUMENT,
                  std::string(function_) + ": " + octx.where() + " (" + dataTypeName(output.dtype) +
                      " " + shapeString(output.shape) + ") differs from " + ctx.where() + " (" +
                      dataTypeName(input.dtype) + " " + shapeString(inShape) +
                      ") in dtype, device, ndim or dims after dim 0");
    }
    if (op_->spec.kind == OpKind::kAlltoall) {
      const auto inBytes = static_cast<uintptr_t>(numElements(inShape)) * dataTypeSize(input.dtype);
      const auto outBytes = static_cast<uintptr_t>(output.bytes());
      const auto a = reinterpret_cast<uintptr_t>(input.data);
      const auto b = reinterpret_cast<uintptr_t>(output.data);
      if (inBytes != 0 && outBytes != 0 && a < b + outBytes && b < a + inBytes) {
        return fail(HCOLL_ERR_INVALID_ARGUMENT,
                    std::string(function_) + ": out overlaps in (alltoall is not in place)");
      }
    }
    op_->spec.outputRows.push_back(output.shape[0]);
    return HCOLL_SUCCESS;
  }

  // A grouped call's member count, known up front: one allocation per vector, not log2(n).
  void reserve(int n) {
    const auto count = static_cast<size_t>(n);
    op_->inputs.reserve(count);
    op_->spec.members.reserve(count);
    if (op_->spec.kind == OpKind::kAllreduce) op_->outputs.reserve(count);
  }

  hcoll_status_t requireRows(const char* why) {
    for (size_t i = 0; i < op_->spec.members.size(); ++i) {
      if (op_->spec.members[i].shape.empty()) {
        return fail(HCOLL_ERR_INVALID_ARGUMENT, std::string(function_) + ": " + memberName(i) +
                                                    " is 0-d; " + why + " needs ndim >= 1");
      }
    }
    return HCOLL_SUCCESS;
  }

  hcoll_status_t setReduction(int op, double prescale, double postscale) {
    if (hcoll_status_t s = checkReduceOp(function_, op, prescale, postscale); s != HCOLL_SUCCESS)
      return s;
    if (op == HCOLL_ADASUM) {
      if (hcoll_status_t s = checkAdasum(); s != HCOLL_SUCCESS) return s;
    }
    for (size_t i = 0; i < op_->inputs.size(); ++i) {
      const bool many = op_->inputs.size() > 1;
      CheckContext ctx{function_, many ? "ins" : "in", many ? static_cast<int>(i) : -1};
      if (hcoll_status_t s =
              checkReductionOfType(ctx, op_->inputs[i].dtype, op, prescale, postscale);
          s != HCOLL_SUCCESS) {
        return s;
      }
      if (op_->spec.device != kHostDevice) {  // the device backend may lack the type (int16)
        if (Status s = runtime::Runtime::checkDeviceReduction(op_->inputs[i].dtype); !s.isOk()) {
          return toC(
              Status(s.code(), std::string(function_) + ": " + ctx.where() + ": " + s.message()));
        }
      }
    }
    op_->spec.op = static_cast<ReduceOp>(op);
    op_->spec.prescale = prescale;
    op_->spec.postscale = postscale;
    return HCOLL_SUCCESS;
  }

  // Adasum (common/adasum.h): an allreduce of floating host tensors.
  hcoll_status_t checkAdasum() {
    if (op_->spec.kind != OpKind::kAllreduce) {
      return fail(HCOLL_ERR_INVALID_ARGUMENT,
                  std::string(function_) + ": HCOLL_ADASUM is an allreduce operator only");
    }
    for (size_t i = 0; i < op_->inputs.size(); ++i) {
      const bool many = op_->inputs.size() > 1;
      CheckContext ctx{function_, many ? "ins" : "in", many ? static_cast<int>(i) : -1};
      const TensorDesc& in = op_->inputs[i];
      if (in.device != kHostDevice) {
        return fail(HCOLL_ERR_UNSUPPORTED, std::string(function_) + ": " + ctx.where() +
                                               ": HCOLL_ADASUM runs on host memory only, not on "
                                               "CUDA device " +
                                               std::to_string(in.device));
      }
      if (!adasum::supports(in.dtype)) {
        return fail(HCOLL_ERR_INVALID_ARGUMENT,
                    std::string(function_) + ": " + ctx.where() +
                        ": HCOLL_ADASUM needs a floating dtype (float16, bfloat16, float32 or "
                        "float64), not " +
                        dataTypeName(in.dtype));
      }
    }
    return HCOLL_SUCCESS;
  }

  hcoll_status_t setRoot(int root) {
    if (root < 0 || root >= comm_->size()) {
      return fail(HCOLL_ERR_INVALID_ARGUMENT, std::string(function_) + ": root " +
                                                  std::to_string(root) + " is outside [0, " +
                                                  std::to_string(comm_->size()) + ")");
    }
    op_->spec.root = root;
    return HCOLL_SUCCESS;
  }

  hcoll_status_t setSplits(const int64_t* splits) {
    const int n = comm_->size();
    const int64_t dim0 = op_->spec.members[0].shape[0];
    // Written in place: the operation's vectors keep their storage from call to call (a failure
    // discards the whole operation).
    std::vector<int64_t>& s = op_->spec.splits;
    s.resize(static_cast<size_t>(n));
    if (splits == nullptr) {
      if (dim0 % n != 0) {
        return fail(HCOLL_ERR_INVALID_ARGUMENT,
                    std::string(function_) + ": splits is NULL but dim0 " + std::to_string(dim0) +
                        " is not divisible by " + std::to_string(n) + " ranks");
      }
      std::fill(s.begin(), s.end(), dim0 / n);
    } else {
      int64_t sum = 0;
      for (int i = 0; i < n; ++i) {
        if (splits[i] < 0) {
          return fail(HCOLL_ERR_INVALID_ARGUMENT,
                      std::string(function_) + ": splits[" + std::to_string(i) +
                          "] = " + std::to_string(splits[i]) + " is negative");
        }
        if (splits[i] > dim0 - sum) {
          return fail(
              HCOLL_ERR_INVALID_ARGUMENT,
              std::string(function_) + ": splits sum to more than dim0 = " + std::to_string(dim0));
        }
        sum += splits[i];
        s[i] = splits[i];
      }
    }
    return HCOLL_SUCCESS;
  }

  hcoll_status_t submit() {
    auto request = comm_->newRequest();
    op_->request = request;
    Status s = comm_->submit(std::move(op_));
    if (!s.isOk()) return toC(Status(s.code(), std::string(function_) + ": " + s.message()));
    *req_ = reinterpret_cast<hcoll_request_t>(requestTable().insert(std::move(request)));
    return HCOLL_SUCCESS;
  }

  const char* function() const { return function_; }
  const char* kindName() const { return traitsOf(op_->spec.kind).name; }

 private:
  std::string memberName(size_t i) const {
    return op_->inputs.size() > 1 ? "ins[" + std::to_string(i) + "]" : "in";
  }

  const char* function_;
  std::unique_ptr<LocalOp> op_;
  std::shared_ptr<Communicator> comm_;
  hcoll_request_t* req_ = nullptr;
};

// The options of a *_into call: NULL or a mask of known bits (none is defined yet). Unknown bits
// are refused, so a caller built against a newer header learns that this library lacks them.
hcoll_status_t checkOptions(const char* fn, const hcoll_op_options_t* options) {
  constexpr uint64_t kKnownOpFields = 0;
  if (options != nullptr && (options->mask & ~kKnownOpFields) != 0) {
    return fail(HCOLL_ERR_INVALID_ARGUMENT,
                std::string(fn) + ": options->mask has bits this library does not know");
  }
  return HCOLL_SUCCESS;
}

#define HCOLL_TRY_(expr)                                            \
  do {                                                              \
    if (hcoll_status_t s_ = (expr); s_ != HCOLL_SUCCESS) return s_; \
  } while (0)

hcoll_status_t allreduce(const char* fn, hcoll_comm_t comm, const char* name, int n, bool grouped,
                         const hcoll_tensor_t* ins, const hcoll_tensor_t* outs, int op,
                         double prescale, double postscale, hcoll_request_t* req) {
  Submission sub(fn, OpKind::kAllreduce);
  HCOLL_TRY_(sub.begin(comm, name, req));
  if (grouped) HCOLL_TRY_(checkGroupSize(fn, n, ins));
  if (grouped) sub.reserve(n);
  if (grouped && outs == nullptr)
    return fail(HCOLL_ERR_INVALID_ARGUMENT, std::string(fn) + ": outs is NULL");
  for (int i = 0; i < n; ++i) {
    const hcoll_tensor_t* out = outs == nullptr ? nullptr : &outs[i];
    if (out == nullptr) return fail(HCOLL_ERR_INVALID_ARGUMENT, std::string(fn) + ": out is NULL");
    HCOLL_TRY_(sub.addMember(i, grouped, ins == nullptr ? nullptr : &ins[i], out));
  }
  HCOLL_TRY_(sub.setReduction(op, prescale, postscale));
  return sub.submit();
}

// `into`: a *_into call; `outs` (n caller outputs) and `options` are read only then.
// The sequence of the collectives on rows (allgather, reducescatter): `n` members from `ins`
// (grouped: a group of n), then, for a *_into call, the caller's outputs (`outs`, and `options`).
hcoll_status_t beginRows(Submission& sub, hcoll_comm_t comm, const char* name, int n,
                         bool grouped, const hcoll_tensor_t* ins, bool into,
                         const hcoll_tensor_t* outs, const hcoll_op_options_t* options,
                         hcoll_request_t* req) {
  HCOLL_TRY_(sub.begin(comm, name, req));
  if (into) HCOLL_TRY_(checkOptions(sub.function(), options));
  if (grouped) HCOLL_TRY_(checkGroupSize(sub.function(), n, ins));
  if (grouped) sub.reserve(n);
  for (int i = 0; i < n; ++i)
    HCOLL_TRY_(sub.addMember(i, grouped, ins == nullptr ? nullptr : &ins[i], nullptr));
  HCOLL_TRY_(sub.requireRows(sub.kindName()));
  for (int i = 0; i < n && into; ++i)
    HCOLL_TRY_(sub.addCallerOutput(i, grouped, outs == nullptr ? nullptr : &outs[i]));
  return HCOLL_SUCCESS;
}

// `into`: a *_into call; `outs` (n caller outputs) and `options` are read only then.
hcoll_status_t allgather(const char* fn, hcoll_comm_t comm, const char* name, int n, bool grouped,
                         const hcoll_tensor_t* ins, bool into, const hcoll_tensor_t* outs,
                         const hcoll_op_options_t* options, hcoll_request_t* req) {
  Submission sub(fn, OpKind::kAllgather);
  HCOLL_TRY_(beginRows(sub, comm, name, n, grouped, ins, into, outs, options, req));
  return sub.submit();
}

hcoll_status_t broadcast(const char* fn, hcoll_comm_t comm, const char* name, int n, bool grouped,
                         const hcoll_tensor_t* bufs, int root, hcoll_request_t* req) {
  Submission sub(fn, OpKind::kBroadcast);
  HCOLL_TRY_(sub.begin(comm, name, req));
  if (grouped) HCOLL_TRY_(checkGroupSize(fn, n, bufs));
  if (grouped) sub.reserve(n);
  for (int i = 0; i < n; ++i)
    HCOLL_TRY_(sub.addMember(i, grouped, bufs == nullptr ? nullptr : &bufs[i], nullptr));
  HCOLL_TRY_(sub.setRoot(root));
  return sub.submit();
}

hcoll_status_t reducescatter(const char* fn, hcoll_comm_t comm, const char* name, int n,
                             bool grouped, const hcoll_tensor_t* ins, int op, double prescale,
                             double postscale, bool into, const hcoll_tensor_t* outs,
                             const hcoll_op_options_t* options, hcoll_request_t* req) {
  Submission sub(fn, OpKind::kReducescatter);
  HCOLL_TRY_(beginRows(sub, comm, name, n, grouped, ins, into, outs, options, req));
  HCOLL_TRY_(sub.setReduction(op, prescale, postscale));
  return sub.submit();
}

}  // namespace
}  // namespace hcoll::bindings

using namespace hcoll::bindings;

extern "C" {

HCOLL_API hcoll_status_t hcoll_allreduce(hcoll_comm_t comm, const char* name,
                                         const hcoll_tensor_t* in, const hcoll_tensor_t* out,
                                         hcoll_reduce_op_t op, double prescale, double postscale,
                                         hcoll_request_t* req) {
  return guarded("hcoll_allreduce", [&] {
    return allreduce("hcoll_allreduce", comm, name, 1, false, in, out, rawEnum(op), prescale,
                     postscale, req);
  });
}

HCOLL_API hcoll_status_t hcoll_grouped_allreduce(hcoll_comm_t comm, const char* name, int n,
                                                 const hcoll_tensor_t* ins,
                                                 const hcoll_tensor_t* outs, hcoll_reduce_op_t op,
                                                 double prescale, double postscale,
                                                 hcoll_request_t* req) {
  return guarded("hcoll_grouped_allreduce", [&] {
    return allreduce("hcoll_grouped_allreduce", comm, name, n, true, ins, outs, rawEnum(op),
                     prescale, postscale, req);
  });
}

HCOLL_API hcoll_status_t hcoll_allgather(hcoll_comm_t comm, const char* name,
                                         const hcoll_tensor_t* in, hcoll_request_t* req) {
  return guarded("hcoll_allgather", [&] {
    return allgather("hcoll_allgather", comm, name, 1, false, in, false, nullptr, nullptr, req);
  });
}

HCOLL_API hcoll_status_t hcoll_grouped_allgather(hcoll_comm_t comm, const char* name, int n,
                                                 const hcoll_tensor_t* ins, hcoll_request_t* req) {
  return guarded("hcoll_grouped_allgather", [&] {
    return allgather("hcoll_grouped_allgather", comm, name, n, true, ins, false, nullptr, nullptr,
                     req);
  });
}

HCOLL_API hcoll_status_t hcoll_broadcast(hcoll_comm_t comm, const char* name,
                                         const hcoll_tensor_t* buf, int root,
                                         hcoll_request_t* req) {
  return guarded("hcoll_broadcast", [&] {
    return broadcast("hcoll_broadcast", comm, name, 1, false, buf, root, req);
  });
}

HCOLL_API hcoll_status_t hcoll_grouped_broadcast(hcoll_comm_t comm, const char* name, int n,
                                                 const hcoll_tensor_t* bufs, int root,
                                                 hcoll_request_t* req) {
  return guarded("hcoll_grouped_broadcast", [&] {
    return broadcast("hcoll_grouped_broadcast", comm, name, n, true, bufs, root, req);
  });
}

HCOLL_API hcoll_status_t hcoll_alltoall(hcoll_comm_t comm, const char* name,
                                        const hcoll_tensor_t* in, const int64_t* splits,
                                        hcoll_request_t* req) {
  return guarded("hcoll_alltoall", [&] {
    Submission sub("hcoll_alltoall", hcoll::OpKind::kAlltoall);
    HCOLL_TRY_(sub.begin(comm, name, req));
    HCOLL_TRY_(sub.addMember(0, false, in, nullptr));
    HCOLL_TRY_(sub.requireRows("alltoall"));
    HCOLL_TRY_(sub.setSplits(splits));
    return sub.submit();
  });
}

HCOLL_API hcoll_status_t hcoll_reducescatter(hcoll_comm_t comm, const char* name,
                                             const hcoll_tensor_t* in, hcoll_reduce_op_t op,
                                             double prescale, double postscale,
                                             hcoll_request_t* req) {
  return guarded("hcoll_reducescatter", [&] {
    return reducescatter("hcoll_reducescatter", comm, name, 1, false, in, rawEnum(op), prescale,
                         postscale, false, nullptr, nullptr, req);
  });
}

HCOLL_API hcoll_status_t hcoll_grouped_reducescatter(hcoll_comm_t comm, const char* name, int n,
                                                     const hcoll_tensor_t* ins,
                                                     hcoll_reduce_op_t op, double prescale,
                                                     double postscale, hcoll_request_t* req) {
  return guarded("hcoll_grouped_reducescatter", [&] {
    return reducescatter("hcoll_grouped_reducescatter", comm, name, n, true, ins, rawEnum(op),
                         prescale, postscale, false, nullptr, nullptr, req);
  });
}

HCOLL_API hcoll_status_t hcoll_allgather_into(hcoll_comm_t comm, const char* name,
                                              const hcoll_tensor_t* in, const hcoll_tensor_t* out,
                                              const hcoll_op_options_t* options,
                                              hcoll_request_t* req) {
  return guarded("hcoll_allgather_into", [&] {
    return allgather("hcoll_allgather_into", comm, name, 1, false, in, true, out, options, req);
  });
}

HCOLL_API hcoll_status_t hcoll_grouped_allgather_into(hcoll_comm_t comm, const char* name, int n,
                                                      const hcoll_tensor_t* ins,
                                                      const hcoll_tensor_t* outs,
                                                      const hcoll_op_options_t* options,
                                                      hcoll_request_t* req) {
  return guarded("hcoll_grouped_allgather_into", [&] {
    return allgather("hcoll_grouped_allgather_into", comm, name, n, true, ins, true, outs, options,
                     req);
  });
}

HCOLL_API hcoll_status_t hcoll_alltoall_into(hcoll_comm_t comm, const char* name,
                                             const hcoll_tensor_t* in, const int64_t* splits,
                                             const hcoll_tensor_t* out,
                                             const hcoll_op_options_t* options,
                                             hcoll_request_t* req) {
  return guarded("hcoll_alltoall_into", [&] {
    Submission sub("hcoll_alltoall_into", hcoll::OpKind::kAlltoall);
    HCOLL_TRY_(sub.begin(comm, name, req));
    HCOLL_TRY_(checkOptions("hcoll_alltoall_into", options));
    HCOLL_TRY_(sub.addMember(0, false, in, nullptr));
    HCOLL_TRY_(sub.requireRows("alltoall"));
    HCOLL_TRY_(sub.setSplits(splits));
    HCOLL_TRY_(sub.addCallerOutput(0, false, out));
    return sub.submit();
  });
}

HCOLL_API hcoll_status_t hcoll_reducescatter_into(hcoll_comm_t comm, const char* name,
                                                  const hcoll_tensor_t* in,
                                                  const hcoll_tensor_t* out, hcoll_reduce_op_t op,
                                                  double prescale, double postscale,
                                                  const hcoll_op_options_t* options,
                                                  hcoll_request_t* req) {
  return guarded("hcoll_reducescatter_into", [&] {
    return reducescatter("hcoll_reducescatter_into", comm, name, 1, false, in, rawEnum(op),
                         prescale, postscale, true, out, options, req);
  });
}

HCOLL_API hcoll_status_t hcoll_grouped_reducescatter_into(
    hcoll_comm_t comm, const char* name, int n, const hcoll_tensor_t* ins,
    const hcoll_tensor_t* outs, hcoll_reduce_op_t op, double prescale, double postscale,
    const hcoll_op_options_t* options, hcoll_request_t* req) {
  return guarded("hcoll_grouped_reducescatter_into", [&] {
    return reducescatter("hcoll_grouped_reducescatter_into", comm, name, n, true, ins, rawEnum(op),
                         prescale, postscale, true, outs, options, req);
  });
}

HCOLL_API hcoll_status_t hcoll_barrier(hcoll_comm_t comm, hcoll_request_t* req) {
  return guarded("hcoll_barrier", [&] {
    Submission sub("hcoll_barrier", hcoll::OpKind::kBarrier);
    HCOLL_TRY_(sub.begin(comm, nullptr, req));
    return sub.submit();
  });
}

HCOLL_API hcoll_status_t hcoll_join(hcoll_comm_t comm, hcoll_request_t* req) {
  return guarded("hcoll_join", [&] {
    Submission sub("hcoll_join", hcoll::OpKind::kJoin);
    HCOLL_TRY_(sub.begin(comm, nullptr, req));
    return sub.submit();
  });
}

}  // extern "C"
