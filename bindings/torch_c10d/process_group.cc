#include "process_group.h"

#include "gil.h"
#include "tensor_desc.h"

#include <numeric>
#include <stdexcept>

namespace hcoll::torch_c10d {

namespace {

int64_t sum(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), 0LL);
}

at::Tensor flat(const at::Tensor& t) {
  return t.reshape({t.numel()});
}

}  // namespace

ProcessGroupHcoll::ProcessGroupHcoll(std::shared_ptr<Communicator> comm, int rank, int size)
    : c10d::ProcessGroup(rank, size),
      comm_(std::move(comm)),
      lib_(comm_->library()),
      completion_(std::make_unique<CompletionThread>()) {
  TORCH_CHECK(comm_->isMember() && comm_->rank() == rank && comm_->size() == size,
              "hcoll: the communicator does not match rank ", rank, " of ", size);
}

ProcessGroupHcoll::~ProcessGroupHcoll() {
  // The communicator first: destroying it ends every request still in flight (completed, or
  // failed with SHUT_DOWN), so the completion thread can drain and stop.
  GilRelease unlocked;
  comm_.reset();
  completion_.reset();
}

void ProcessGroupHcoll::submitted(hcoll_status_t status, const std::string& call) const {
  if (status != HCOLL_SUCCESS) {
    throw std::runtime_error("hcoll " + call + " failed: " + lib_->errorText(status));
  }
}

void ProcessGroupHcoll::poison(Kind kind, const std::string& name) noexcept {
  // A descriptor no c10d call produces (a bool tensor of HCOLL_MAX_NDIM dimensions of 1): the
  // peers' operation of the same call-order name cannot match it and fails with MISMATCH on every
  // rank. Peers that failed the same call locally submit the same poison, which simply completes.
  static const int64_t kOnes[HCOLL_MAX_NDIM] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                                1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  hcoll_tensor_t t{&poisonByte_, HCOLL_BOOL, HCOLL_MAX_NDIM, kOnes, HCOLL_DEVICE_HOST, nullptr};
  hcoll_comm_t c = comm_->handle();
  hcoll_request_t req = nullptr;
  hcoll_status_t status = HCOLL_SUCCESS;
  switch (kind) {
    case Kind::kAllreduce:
      status = lib_->hcoll_allreduce(c, name.empty() ? nullptr : name.c_str(), &t, &t, HCOLL_MAX,
                                     1.0, 1.0, &req);
      break;
    case Kind::kAllgather:
      status = lib_->hcoll_allgather(c, nullptr, &t, &req);
      break;
    case Kind::kBroadcast:
      status = lib_->hcoll_broadcast(c, nullptr, &t, 0, &req);
      break;
    case Kind::kAlltoall: {
      std::vector<int64_t> zeros(static_cast<size_t>(getSize()), 0);
      status = lib_->hcoll_alltoall(c, nullptr, &t, zeros.data(), &req);
      break;
    }
    case Kind::kReducescatter:
      status = lib_->hcoll_reducescatter(c, nullptr, &t, HCOLL_MAX, 1.0, 1.0, &req);
      break;
  }
  // Freed in flight: it completes (or fails) in the background, the result discarded.
  if (status == HCOLL_SUCCESS) lib_->hcoll_request_free(req);
}

template <typename Submit>
c10::intrusive_ptr<c10d::Work> ProcessGroupHcoll::run(Kind kind, Submit&& submit,
                                                      const std::string& name) {
  try {
    return submit();
  } catch (...) {
    // Nothing of this call was enqueued here (checks and submission come before enqueue); the
    // peers must not wait for it.
    poison(kind, name);
    throw;
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcoll::enqueue(c10d::OpType type,
                                                          const std::string& call,
                                                          hcoll_request_t request,
                                                          std::vector<at::Tensor> outputs,
                                                          std::vector<at::Tensor> keepAlive,
                                                          HcollWork::Finalize finalize) {
  auto work =
      c10::make_intrusive<HcollWork>(lib_, type, getRank(), call, request, std::move(outputs),
                                     std::move(keepAlive), std::move(finalize));
  completion_->enqueue(work);
  return work;
}

at::Tensor ProcessGroupHcoll::single(std::vector<at::Tensor>& tensors,
                                     const std::string& call) const {
  TORCH_CHECK(tensors.size() == 1, "hcoll ", call, ": takes exactly one tensor per call, got ",
              tensors.size());
  return tensors[0];
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcoll::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& opts) {
  const std::string call = "broadcast";
  return run(Kind::kBroadcast, [&] {
    at::Tensor t = single(tensors, call);
    TORCH_CHECK(opts.rootTensor == 0, "hcoll ", call, ": rootTensor must be 0");
    TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "hcoll ", call, ": root rank ",
                opts.rootRank, " is not in [0, ", getSize(), ")");
    TensorDescs d;
    d.add(t, call);
    hcoll_request_t req = nullptr;
    submitted(lib_->hcoll_broadcast(comm_->handle(), nullptr, &d[0],
                                    static_cast<int>(opts.rootRank), &req),
              call);
    return enqueue(c10d::OpType::BROADCAST, call, req, {t}, {t});
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcoll::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  const std::string call = "allreduce";
  return run(Kind::kAllreduce, [&] {
    at::Tensor t = single(tensors, call);
    const hcoll_reduce_op_t op = toHcollOp(opts.reduceOp, call);
    TensorDescs d;
    d.add(t, call);
    hcoll_request_t req = nullptr;
    submitted(lib_->hcoll_allreduce(comm_->handle(), nullptr, &d[0], &d[0], op, 1.0, 1.0, &req),
              call);
    return enqueue(c10d::OpType::ALLREDUCE, call, req, {t}, {t});
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcoll::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  const std::string call = "allreduce_coalesced";
  return run(Kind::kAllreduce, [&] {
    const hcoll_reduce_op_t op = toHcollOp(opts.reduceOp, call);
    commonDevice(tensors, call);
    TensorDescs d;
    for (const at::Tensor& t : tensors) d.add(t, call);
    hcoll_request_t req = nullptr;
    // One grouped allreduce: negotiated, fused and executed as one unit.
    submitted(lib_->hcoll_grouped_allreduce(comm_->handle(), nullptr, d.size(), d.data(), d.data(),
                                            op, 1.0, 1.0, &req),
              call);
    return enqueue(c10d::OpType::ALLREDUCE_COALESCED, call, req, tensors, tensors);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcoll::groupedAllreduce(std::vector<at::Tensor>& tensors,
                                                                   const std::string& name,
                                                                   hcoll_reduce_op_t op,
                                                                   double prescale,
                                                                   double postscale) {
  const std::string call = name.empty() ? "grouped_allreduce" : "grouped_allreduce '" + name + "'";
  return run(Kind::kAllreduce, [&] {
    commonDevice(tensors, call);
    TensorDescs d;
    for (const at::Tensor& t : tensors) d.add(t, call);
    hcoll_request_t req = nullptr;
    submitted(
        lib_->hcoll_grouped_allreduce(comm_->handle(), name.empty() ? nullptr : name.c_str(),
                                      d.size(), d.data(), d.data(), op, prescale, postscale, &req),
        call);
    return enqueue(c10d::OpType::ALLREDUCE_COALESCED, call, req, tensors, tensors);
  }, name);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcoll::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  const std::string call = "reduce";
  return run(Kind::kAllreduce, [&] {
    at::Tensor t = single(tensors, call);
    TORCH_CHECK(opts.rootTensor == 0, "hcoll ", call, ": rootTensor must be 0");
    TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "hcoll ", call, ": root rank ",
                opts.rootRank, " is not in [0, ", getSize(), ")");
    const hcoll_reduce_op_t op = toHcollOp(opts.reduceOp, call);
    // An allreduce whose result only the root keeps: the other ranks' tensors stay unchanged.
    const bool root = opts.rootRank == getRank();
    at::Tensor out = root ? t : at::empty_like(t);
    TensorDescs d;
    d.add(t, call);
    d.add(out, call);
    hcoll_request_t req = nullptr;
    submitted(lib_->hcoll_allreduce(comm_->handle(), nullptr, &d[0], &d[1], op, 1.0, 1.0, &req),
              call);
    return enqueue(c10d::OpType::REDUCE, call, req, {t}, {t, out});
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcoll::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& /*opts*/) {
  const std::string call = "allgather";
  return run(Kind::kAllgather, [&] {
    at::Tensor in = single(inputs, call);
    TORCH_CHECK(outputs.size() == 1, "hcoll ", call, ": takes one output list, got ",
                outputs.size());
    std::vector<at::Tensor> outs = outputs[0];
    TORCH_CHECK(static_cast<int>(outs.size()) == getSize(), "hcoll ", call,
                ": the output list has ", outs.size(), " tensors, the group has ", getSize(),
                " ranks");
    for (const at::Tensor& o : outs) {
      TORCH_CHECK(o.scalar_type() == in.scalar_type(), "hcoll ", call, ": output dtype ",
                  o.scalar_type(), " differs from the input's ", in.scalar_type());
      TORCH_CHECK(o.sizes() == in.sizes(), "hcoll ", call, ": output size ", o.sizes(),
                  " differs from the input's ", in.sizes());
      TORCH_CHECK(o.device() == in.device(), "hcoll ", call, ": output on ", o.device(),
                  ", input on ", in.device());
    }
    const int64_t n = in.numel();
    at::Tensor gathered = at::empty({getSize() * n}, in.options());
    TensorDescs d;
    d.add(in, call, {n}, false);
    d.add(gathered, call);
    hcoll_request_t req = nullptr;
    submitted(lib_->hcoll_allgather_into(comm_->handle(), nullptr, &d[0], &d[1], nullptr, &req),
              call);
    auto finalize = [outs, gathered, n](hcoll_request_t) {
      for (size_t i = 0; i < outs.size(); ++i) {
        outs[i].copy_(gathered.narrow(0, static_cast<int64_t>(i) * n, n).view(outs[i].sizes()));
      }
    };
    return enqueue(c10d::OpType::ALLGATHER, call, req, outs, {in, gathered}, finalize);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcoll::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& /*opts*/) {
  const std::string call = "_allgather_base";
  return run(Kind::kAllgather, [&] {
    TORCH_CHECK(output.scalar_type() == input.scalar_type(), "hcoll ", call, ": output dtype ",
                output.scalar_type(), " differs from the input's ", input.scalar_type());
    TORCH_CHECK(output.numel() == getSize() * input.numel(), "hcoll ", call, ": the output has ",
                output.numel(), " elements, not group size x input = ", getSize(), " x ",
                input.numel());
    TensorDescs d;
    d.add(input, call, {input.numel()}, false);
    d.add(output, call, {output.numel()}, false);
    hcoll_request_t req = nullptr;
    submitted(lib_->hcoll_allgather_into(comm_->handle(), nullptr, &d[0], &d[1], nullptr, &req),
              call);
    return enqueue(c10d::OpType::_ALLGATHER_BASE, call, req, {output}, {input, output});
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcoll::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const std::string call = "reduce_scatter";
  return run(Kind::kReducescatter, [&] {
    at::Tensor out = single(outputs, call);
    const hcoll_reduce_op_t op = toHcollOp(opts.reduceOp, call);
    TORCH_CHECK(inputs.size() == 1, "hcoll ", call, ": takes one input list, got ", inputs.size());
    const std::vector<at::Tensor>& ins = inputs[0];
    TORCH_CHECK(static_cast<int>(ins.size()) == getSize(), "hcoll ", call, ": the input list has ",
                ins.size(), " tensors, the group has ", getSize(), " ranks");
    for (const at::Tensor& i : ins) {
      TORCH_CHECK(i.scalar_type() == out.scalar_type(), "hcoll ", call, ": input dtype ",
                  i.scalar_type(), " differs from the output's ", out.scalar_type());
      TORCH_CHECK(i.numel() == out.numel(), "hcoll ", call, ": input size ", i.sizes(),
                  " differs from the output's ", out.sizes());
    }
    std::vector<at::Tensor> flats;
    for (const at::Tensor& i : ins) flats.push_back(flat(i));
    at::Tensor stacked = at::cat(flats);
    TensorDescs d;
    d.add(stacked, call);
    d.add(out, call, {out.numel()}, false);
    hcoll_request_t req = nullptr;
    submitted(lib_->hcoll_reducescatter_into(comm_->handle(), nullptr, &d[0], &d[1], op, 1.0, 1.0,
                                             nullptr, &req),
              call);
    return enqueue(c10d::OpType::REDUCE_SCATTER, call, req, {out}, {out, stacked});
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcoll::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const std::string call = "_reduce_scatter_base";
  return run(Kind::kReducescatter, [&] {
    const hcoll_reduce_op_t op = toHcollOp(opts.reduceOp, call);
    TORCH_CHECK(output.scalar_type() == input.scalar_type(), "hcoll ", call, ": output dtype ",
                output.scalar_type(), " differs from the input's ", input.scalar_type());
    TORCH_CHECK(input.numel() == getSize() * output.numel(), "hcoll ", call, ": the input has ",
                input.numel(), " elements, not group size x output = ", getSize(), " x ",
                output.numel());
    TensorDescs d;
    d.add(input, call, {input.numel()}, false);
    d.add(output, call, {output.numel()}, false);
    hcoll_request_t req = nullptr;
    submitted(lib_->hcoll_reducescatter_into(comm_->handle(), nullptr, &d[0], &d[1], op, 1.0, 1.0,
                                             nullptr, &req),
              call);
    return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, call, req, {output}, {input, output});
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcoll::alltoallFlat(
    c10d::OpType type, const std::string& call, at::Tensor in, std::vector<int64_t> splits,
    at::Tensor out, std::vector<int64_t> expected, std::vector<at::Tensor> outputs,
    std::vector<at::Tensor> keepAlive, std::function<void()> done) {
  TensorDescs d;
  d.add(in, call, {in.numel()}, false);
  d.add(out, call, {out.numel()}, false);
  hcoll_request_t req = nullptr;
  submitted(lib_->hcoll_alltoall_into(comm_->handle(), nullptr, &d[0], splits.data(), &d[1],
                                      nullptr, &req),
            call);
  keepAlive.push_back(in);
  keepAlive.push_back(out);
  auto lib = lib_;
  auto finalize = [lib, expected, done](hcoll_request_t r) {
    const int64_t* received = nullptr;
    int n = 0;
    lib->check(lib->hcoll_request_received_splits(r, 0, &received, &n), "received splits");
    for (int i = 0; i < n && i < static_cast<int>(expected.size()); ++i) {
      if (expected[i] >= 0 && received[i] != expected[i]) {
        throw std::runtime_error(
            "received " + std::to_string(received[i]) + " elements from rank " + std::to_string(i) +
            ", expected " + std::to_string(expected[i]) + " (the ranks' split sizes disagree)");
      }
    }
    if (done) done();
  };
  return enqueue(type, call, req, std::move(outputs), std::move(keepAlive), finalize);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcoll::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
    std::vector<int64_t>& inputSplits, const c10d::AllToAllOptions& /*opts*/) {
  const std::string call = "alltoall_base";
  return run(Kind::kAlltoall, [&] {
    const int64_t n = getSize();
    TORCH_CHECK(output.scalar_type() == input.scalar_type(), "hcoll ", call, ": output dtype ",
                output.scalar_type(), " differs from the input's ", input.scalar_type());
    TORCH_CHECK(input.dim() >= 1 && output.dim() >= 1, "hcoll ", call,
                ": tensors need at least one dimension");
    const int64_t inRow = input.size(0) == 0 ? 0 : input.numel() / input.size(0);
    const int64_t outRow = output.size(0) == 0 ? 0 : output.numel() / output.size(0);
    // Splits are rows of dim 0; hcoll moves the tensors as flat element arrays.
    auto rows = [&](std::vector<int64_t> s, const at::Tensor& t, const char* which) {
      if (s.empty()) {
        TORCH_CHECK(t.size(0) % n == 0, "hcoll ", call, ": ", which, " dim 0 (", t.size(0),
                    ") is not divisible by the group size ", n, " and no split sizes were given");
        return std::vector<int64_t>(static_cast<size_t>(n), t.size(0) / n);
      }
      TORCH_CHECK(static_cast<int64_t>(s.size()) == n, "hcoll ", call, ": ", which,
                  " split sizes have ", s.size(), " entries, the group has ", n, " ranks");
      for (int64_t v : s) TORCH_CHECK(v >= 0, "hcoll ", call, ": negative split size ", v);
      TORCH_CHECK(sum(s) == t.size(0), "hcoll ", call, ": ", which, " split sizes sum to ", sum(s),
                  ", dim 0 is ", t.size(0));
      return s;
    };
    std::vector<int64_t> send = rows(inputSplits, input, "input");
    std::vector<int64_t> recv = rows(outputSplits, output, "output");
    TORCH_CHECK(inRow == outRow || input.numel() == 0 || output.numel() == 0, "hcoll ", call,
                ": input rows have ", inRow, " elements, output rows ", outRow);
    const int64_t row = inRow != 0 ? inRow : outRow;
    for (auto& v : send) v *= row;
    for (auto& v : recv) v *= row;
    return alltoallFlat(c10d::OpType::ALLTOALL_BASE, call, input, send, output, recv, {output}, {},
                        {});
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcoll::alltoall(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllToAllOptions& /*opts*/) {
  const std::string call = "alltoall";
  return run(Kind::kAlltoall, [&] {
    const size_t n = static_cast<size_t>(getSize());
    TORCH_CHECK(inputs.size() == n && outputs.size() == n, "hcoll ", call, ": ", inputs.size(),
                " inputs and ", outputs.size(), " outputs for a group of ", n, " ranks");
    std::vector<at::Tensor> all = inputs;
    all.insert(all.end(), outputs.begin(), outputs.end());
    commonDevice(all, call);
    std::vector<int64_t> send, recv;
    std::vector<at::Tensor> flats;
    for (size_t i = 0; i < n; ++i) {
      TORCH_CHECK(inputs[i].scalar_type() == inputs[0].scalar_type() &&
                      outputs[i].scalar_type() == inputs[0].scalar_type(),
                  "hcoll ", call, ": every input and output needs one dtype");
      send.push_back(inputs[i].numel());
      recv.push_back(outputs[i].numel());
      flats.push_back(flat(inputs[i]));
    }
    at::Tensor in = at::cat(flats);
    at::Tensor out = at::empty({sum(recv)}, in.options());
    auto done = [outputs, out, recv] {
      int64_t offset = 0;
      for (size_t i = 0; i < outputs.size(); ++i) {
        outputs[i].copy_(out.narrow(0, offset, recv[i]).view(outputs[i].sizes()));
        offset += recv[i];
      }
    };
    return alltoallFlat(c10d::OpType::ALLTOALL, call, in, send, out, recv, outputs, {}, done);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcoll::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  const std::string call = "gather";
  return run(Kind::kAlltoall, [&] {
    at::Tensor in = single(inputs, call);
    const int64_t n = getSize();
    TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < n, "hcoll ", call, ": root rank ",
                opts.rootRank, " is not in [0, ", n, ")");
    const bool root = opts.rootRank == getRank();
    std::vector<at::Tensor> outs;
    if (root) {
      TORCH_CHECK(outputs.size() == 1 && static_cast<int64_t>(outputs[0].size()) == n, "hcoll ",
                  call, ": the root needs one list of ", n, " output tensors");
      outs = outputs[0];
      for (const at::Tensor& o : outs) {
        TORCH_CHECK(o.scalar_type() == in.scalar_type() && o.numel() == in.numel(), "hcoll ", call,
                    ": every output needs the input's dtype and size");
      }
    } else {
      TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()), "hcoll ", call,
                  ": only the root passes output tensors");
    }
    // An alltoall where every rank sends its whole input to the root and nothing elsewhere.
    std::vector<int64_t> send(static_cast<size_t>(n), 0);
    send[static_cast<size_t>(opts.rootRank)] = in.numel();
    std::vector<int64_t> expect(static_cast<size_t>(n), root ? in.numel() : 0);
    at::Tensor out = at::empty({root ? n * in.numel() : 0}, in.options());
    const int64_t k = in.numel();
    auto done = [outs, out, k] {
      for (size_t i = 0; i < outs.size(); ++i) {
        outs[i].copy_(out.narrow(0, static_cast<int64_t>(i) * k, k).view(outs[i].sizes()));
      }
    };
    return alltoallFlat(c10d::OpType::GATHER, call, flat(in), send, out, expect, outs, {}, done);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcoll::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  const std::string call = "scatter";
  return run(Kind::kAlltoall, [&] {
    at::Tensor out = single(outputs, call);
    const int64_t n = getSize();
    TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < n, "hcoll ", call, ": root rank ",
                opts.rootRank, " is not in [0, ", n, ")");
    const bool root = opts.rootRank == getRank();
    std::vector<int64_t> send(static_cast<size_t>(n), 0);
    at::Tensor in;
    if (root) {
      TORCH_CHECK(inputs.size() == 1 && static_cast<int64_t>(inputs[0].size()) == n, "hcoll ", call,
                  ": the root needs one list of ", n, " input tensors");
      std::vector<at::Tensor> flats;
      for (const at::Tensor& i : inputs[0]) {
        TORCH_CHECK(i.scalar_type() == out.scalar_type() && i.numel() == out.numel(), "hcoll ",
                    call, ": every input needs the output's dtype and size");
        flats.push_back(flat(i));
      }
      in = at::cat(flats);
      std::fill(send.begin(), send.end(), out.numel());
    } else {
      TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()), "hcoll ", call,
                  ": only the root passes input tensors");
      in = at::empty({0}, out.options());
    }
    std::vector<int64_t> expect(static_cast<size_t>(n), 0);
    expect[static_cast<size_t>(opts.rootRank)] = out.numel();
    return alltoallFlat(c10d::OpType::SCATTER, call, in, send, out, expect, {out}, {}, {});
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcoll::barrier(const c10d::BarrierOptions& /*opts*/) {
  hcoll_request_t req = nullptr;
  submitted(lib_->hcoll_barrier(comm_->handle(), &req), "barrier");
  return enqueue(c10d::OpType::BARRIER, "barrier", req, {}, {});
}

}  // namespace hcoll::torch_c10d
