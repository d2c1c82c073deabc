#include "backends/loopback/loopback_channel.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "common/adasum.h"
#include "common/reduce.h"

namespace hcoll::backends::loopback {
namespace {

// Under the group's mutex, by the first rank that sees every rank arrived: MPI_Comm_split's
// rule (ranks of one color ordered by key, then by parent rank; a negative color: no group).
void buildSplit(Round* round) {
  const size_t n = round->slots.size();
  std::map<int, std::vector<std::pair<int, int>>> byColor;  // color -> (key, parent rank)
  for (size_t r = 0; r < n; ++r) {
    const Contribution& c = round->slots[r];
    if (c.color >= 0) byColor[c.color].emplace_back(c.key, static_cast<int>(r));
  }
  round->newGroups.assign(n, nullptr);
  round->newRanks.assign(n, -1);
  for (auto& [color, members] : byColor) {
    std::sort(members.begin(), members.end());
    auto group = std::make_shared<Group>(static_cast<int>(members.size()));
    for (size_t i = 0; i < members.size(); ++i) {
      const auto parent = static_cast<size_t>(members[i].second);
      round->newGroups[parent] = group;
      round->newRanks[parent] = static_cast<int>(i);
    }
  }
  round->splitDone = true;
}

}  // namespace

LoopbackChannel::LoopbackChannel(std::shared_ptr<Group> group, int rank)
    : group_(std::move(group)), rank_(rank), signals_(group_, rank) {}

LoopbackChannel::~LoopbackChannel() {
  group_->leave(rank_);
}

PendingPtr LoopbackChannel::allreduceBitsAnd(uint64_t* words, size_t count) {
  return startBitsAnd(seat(Plane::kControl), words, count);
}

// Contributions are copies of any size here; the bound only keeps the fold for small operations
// as on the MPI backend (the runtime caps it too).
size_t LoopbackChannel::foldableBytes(size_t words) const {
  (void)words;
  return 4096;
}

PendingPtr LoopbackChannel::allreduceBitsAndFolded(uint64_t* words, size_t count,
                                                   const FoldedCollective& fold) {
  *fold.agreed = false;
  // As the data plane reduces: element-wise ops in the tensor's own type (float16/bfloat16
  // widen there), never Adasum. Otherwise this rank takes part without folding. Gathering and
  // broadcasting move bytes of any type.
  const bool foldable =
      (fold.combine != FoldedCollective::Combine::kReduce ||
       (fold.op != ReduceOp::kAdasum && !reducesInFloat32(fold.dtype, fold.op))) &&
      (fold.combine != FoldedCollective::Combine::kBroadcast ||
       (fold.root >= 0 && fold.root < size()));
  return startBitsAnd(seat(Plane::kControl), words, count, foldable ? &fold : nullptr);
}

PendingPtr LoopbackChannel::gatherBytes(std::vector<uint8_t> mine,
                                        std::vector<std::vector<uint8_t>>* atRoot) {
  return startGatherBytes(seat(Plane::kControl), std::move(mine), atRoot);
}

PendingPtr LoopbackChannel::broadcastBytes(std::vector<uint8_t>* buf) {
  return startBroadcastBytes(seat(Plane::kControl), buf);
}

PendingPtr LoopbackChannel::allreduce(const void* send, void* recv, size_t count, DataType dtype,
                                      ReduceOp op) {
  return startAllreduce(seat(Plane::kData), send, recv, count, dtype, op);
}

PendingPtr LoopbackChannel::allgatherv(const void* send, size_t sendBytes, void* recv,
                                       const std::vector<size_t>& recvBytes) {
  return startAllgatherv(seat(Plane::kData), send, sendBytes, recv, recvBytes);
}

PendingPtr LoopbackChannel::broadcast(void* buf, size_t bytes, int root) {
  return startBroadcast(seat(Plane::kData), buf, bytes, root);
}

PendingPtr LoopbackChannel::alltoallv(const void* send, const std::vector<size_t>& sendBytes,
                                      void* recv, const std::vector<size_t>& recvBytes) {
  return startAlltoallv(seat(Plane::kData), send, sendBytes, recv, recvBytes);
}

PendingPtr LoopbackChannel::reduceScatter(const void* send, void* recv,
                                          const std::vector<size_t>& recvCounts, DataType dtype,
                                          ReduceOp op) {
  return startReduceScatter(seat(Plane::kData), send, recv, recvCounts, dtype, op);
}

PendingPtr LoopbackChannel::adasum(void* buf, size_t count, DataType dtype,
                                   const std::vector<size_t>& tensorCounts) {
  if (!adasum::supports(dtype)) {
    return finished(
        Status(Code::kInvalidArgument,
               std::string("Adasum needs a floating dtype, not ") + dataTypeName(dtype)));
  }
  return startAdasum(seat(Plane::kData), buf, count, dtype, tensorCounts);
}

PendingPtr LoopbackChannel::barrier() {
  return startBarrier(seat(Plane::kData));
}

Status LoopbackChannel::split(int color, int key, std::unique_ptr<Channel>* out) {
  out->reset();
  Contribution mine;
  mine.color = color < 0 ? -1 : color;
  mine.key = key;
  RoundParams params;
  params.tag = OpTag::kSplit;
  const Seat s = seat(Plane::kManage);
  std::shared_ptr<Round> round = group_->arrive(s.plane, s.seq, rank_, params, std::move(mine));
  const int n = group_->size();
  std::unique_lock<std::mutex> lock(group_->mutex());
  int gone = -1;
  group_->changed().wait(lock, [&] {
    if (round->arrived == n || !round->failure.isOk()) return true;
    for (int r = 0; r < n; ++r) {
      if (!round->present[static_cast<size_t>(r)] && group_->hasLeft(r)) {
        gone = r;
        return true;
      }
    }
    return false;
  });
  if (!round->failure.isOk()) return round->failure;
  if (round->arrived < n) {
    return shutDown("loopback: rank " + std::to_string(gone) +
                    " left the communicator before creating the new one");
  }
  if (!round->splitDone) buildSplit(round.get());
  const auto me = static_cast<size_t>(rank_);
  if (round->newGroups[me]) {
    *out = std::make_unique<LoopbackChannel>(round->newGroups[me], round->newRanks[me]);
  }
  return Status::ok();
}

Status LoopbackChannel::create(const std::vector<int32_t>& ranks, std::unique_ptr<Channel>* out) {
  // The rank's position in the list is its new rank; ranks not listed get no channel.
  const auto at = std::find(ranks.begin(), ranks.end(), rank_);
  const int index = at == ranks.end() ? -1 : static_cast<int>(at - ranks.begin());
  return split(index >= 0 ? 0 : -1, index, out);
}

void LoopbackChannel::Signals::sendNotice(NoticeKind kind, Code code, const std::string& text) {
  Notice notice;
  notice.rank = rank_;
  notice.kind = kind;
  notice.code = code;
  notice.text = text;
  group_->post(rank_, notice);
}

}  // namespace hcoll::backends::loopback
