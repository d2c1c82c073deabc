#pragma once
// What every executor unit test builds around an Executor: a channel (a stub_channel.h fake),
// the configuration, liveness, statistics and flags the executor borrows, and a record of how
// each operation finished. Fixtures derive from it.

#include <atomic>
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

  ChannelType channel;
  hcoll::runtime::Config config;
  std::atomic<bool> abort{false};
  std::atomic<bool> closeRequested{false};
  hcoll::runtime::Liveness liveness{channel, 0.0};
  hcoll::runtime::CommStats stats;
  std::vector<std::pair<std::string, hcoll::Status>> finishedOps;
};

}  // namespace htest
