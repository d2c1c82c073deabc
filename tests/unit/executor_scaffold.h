#pragma once
// What every executor unit test builds around an Executor: a channel (a stub_channel.h fake),
// the configuration, liveness, statistics and flags the executor borrows, and a record of how
// each operation finished. Fixtures derive from it.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/executor.h"

namespace htest {

template <typename ChannelType>
struct ExecutorScaffold {
  template <typename... Args>
  explicit ExecutorScaffold(Args&&... channelArgs)
      : channel(std::forward<Args>(channelArgs)...) {}

  // An executor over `channel` that records how each operation finished in finishedOps.
  hcoll::runtime::Executor makeExecutor() {
    return hcoll::runtime::Executor(
        channel, config, liveness, closeRequested, abort, stats,
        [this](std::unique_ptr<hcoll::runtime::LocalOp> op, const hcoll::Status& s) {
          finishedOps.emplace_back(op->spec.name, s);
        });
  }

  // Executes one in-place float32 allreduce of `count` elements at `data`, named `name`, as a
  // round's only response; returns whether it left `pending`.
  bool executeAllreduce(hcoll::runtime::Executor& executor, const std::string& name, float* data,
                        int64_t count) {
    hcoll::runtime::PendingOps pending;
    auto op = std::make_unique<hcoll::runtime::LocalOp>();
    op->spec.name = name;
    op->spec.members.push_back(
        hcoll::runtime::MemberSpec{hcoll::DataType::kFloat32, {count}});
    hcoll::TensorDesc t;
    t.data = data;
    op->inputs.push_back(t);
    op->outputs.push_back(t);
    op->request = std::make_shared<hcoll::runtime::Request>(nullptr);
    auto response = std::make_shared<hcoll::runtime::Response>();
    response->spec = op->spec;
    pending.add(std::move(op));
    executor.execute({response}, pending);
    return pending.empty();
  }

  ChannelType channel;
  hcoll::runtime::Config config;
  std::atomic<bool> abort{false};
  std::atomic<bool> closeRequested{false};
  hcoll::runtime::Liveness liveness{channel, 0.0};
  hcoll::runtime::CommStats stats;
  std::vector<std::pair<std::string, hcoll::Status>> finishedOps;
};

}  // namespace htest
