#pragma once

// hcoll as a torch.distributed (c10d) process group: each call becomes one non-blocking hcoll
// collective on the group's own communicator, named by call order (c10d issues calls in the same
// order on every rank); its Work completes on the group's CompletionThread.

#include "communicator.h"
#include "work.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <memory>
#include <string>
#include <vector>

namespace hcoll::torch_c10d {

class ProcessGroupHcoll : public c10d::ProcessGroup {
 public:
  // `comm` must be a member communicator whose rank and size are `rank` and `size`.
  ProcessGroupHcoll(std::shared_ptr<Communicator> comm, int rank, int size);
  ~ProcessGroupHcoll() override;

  const std::string getBackendName() const override { return "hcoll"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // hcoll's own: one grouped allreduce of `tensors` (in place) under `name` ("" = call order),
  // with hcoll's ops (AVERAGE included) and scale factors. For DDP comm hooks.
  c10::intrusive_ptr<c10d::Work> groupedAllreduce(std::vector<at::Tensor>& tensors,
                                                  const std::string& name, hcoll_reduce_op_t op,
                                                  double prescale, double postscale);

  const std::shared_ptr<Communicator>& communicator() const { return comm_; }

 private:
  // The hcoll operation kinds a c10d call is carried by: a rank that fails a call before
  // submitting it submits a deliberately mismatching operation of that kind instead, so the
  // other ranks' call fails with MISMATCH rather than waiting for this rank (see poison()).
  enum class Kind { kAllreduce, kAllgather, kBroadcast, kAlltoall, kReducescatter };

  // Runs `submit` (checks, then the hcoll call and enqueue); if it throws, poisons `kind` first.
  template <typename Submit>
  // `name`: the call's hcoll name (empty: named by call order), which the stand-in takes too, so
  // that it meets the peers' operation of that name (and never shifts the call-order names).
  c10::intrusive_ptr<c10d::Work> run(Kind kind, Submit&& submit, const std::string& name = {});
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, const std::string& call,
                                         hcoll_request_t request, std::vector<at::Tensor> outputs,
                                         std::vector<at::Tensor> keepAlive,
                                         HcollWork::Finalize finalize = {});
  void submitted(hcoll_status_t status, const std::string& call) const;
  void poison(Kind kind, const std::string& name) noexcept;
  at::Tensor single(std::vector<at::Tensor>& tensors, const std::string& call) const;
  // alltoall_into of 1-D `in` (splits in elements) into 1-D `out`; `expected[i]`: the elements
  // that must come from rank i (checked once complete, -1 = any); then `done`.
  c10::intrusive_ptr<c10d::Work> alltoallFlat(c10d::OpType type, const std::string& call,
                                              at::Tensor in, std::vector<int64_t> splits,
                                              at::Tensor out, std::vector<int64_t> expected,
                                              std::vector<at::Tensor> outputs,
                                              std::vector<at::Tensor> keepAlive,
                                              std::function<void()> done);

  std::shared_ptr<Communicator> comm_;
  std::shared_ptr<const HcollLibrary> lib_;
  std::unique_ptr<CompletionThread> completion_;
  uint8_t poisonByte_ = 0;  // the data of poison operations (outlives them: see the destructor)
};

}  // namespace hcoll::torch_c10d
