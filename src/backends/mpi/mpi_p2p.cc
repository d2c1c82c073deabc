#include "backends/mpi/mpi_p2p.h"

#include <cstring>
#include <utility>

#include "backends/mpi/mpi_schedule.h"

namespace hcoll::backends::mpi {
namespace {

using p2p::BlockOffsets;
using p2p::StagedSchedule;

// Binomial tree rooted at `root` (MPICH's MPIR_Bcast_intra_binomial, non-blocking): in ranks
// relative to the root, rank v receives from v minus its lowest set bit, then sends to v + 2^k
// for every 2^k below that bit.
class BinomialBroadcastPending final : public StagedSchedule {
 public:
  BinomialBroadcastPending(const ScheduleContext& context, void* buf, size_t bytes, int root)
      : StagedSchedule(context, static_cast<size_t>(context.size)),
        size_(context.size),
        root_(root),
        buf_(buf),
        bytes_(bytes) {
    const int size = size_;
    relative_ = (context.rank - root + size) % size;
    int mask = 1;
    while (mask < size) {
      if ((relative_ & mask) != 0) {
        parent_ = (relative_ - mask + root) % size;
        break;
      }
      mask <<= 1;
    }
    childMask_ = mask >> 1;
  }

  Status start() {
    if (parent_ >= 0) return transport().postRecv(parent_, buf_, bytes_);
    return postChildren();
  }

 private:
  Status postChildren() {
    sent_ = true;
    for (int mask = childMask_; mask > 0; mask >>= 1) {
      if (relative_ + mask >= size_) continue;
      const int child = (relative_ + mask + root_) % size_;
      HCOLL_RETURN_IF_ERROR(transport().postSend(child, buf_, bytes_));
    }
    return Status::ok();
  }

  bool advance(Status* status) override {
    if (sent_) return StagedSchedule::advance(status);
    if (Status posted = postChildren(); !posted.isOk()) {
      transport().abandon();
      *status = std::move(posted);
      return true;
    }
    return idle() ? StagedSchedule::advance(status) : false;
  }

  int size_;
  int root_;
  void* buf_;
  size_t bytes_;
  int relative_ = 0;
  int parent_ = -1;
  int childMask_ = 0;
  bool sent_ = false;
};

// Rank r sends block j of `send` to rank j and receives rank j's block for it into block j of
// `recv`; `block(buffer, j)` gives {offset, bytes} (buffer 0 = send, 1 = recv). Receives first;
// peers in the order rank+1, rank+2, ...: not every rank sending to rank 0 first.
template <typename Block>
PendingPtr exchangeBlocks(const ScheduleContext& context, const void* send, void* recv,
                          Block block) {
  const int rank = context.rank, size = context.size;
  auto p = std::make_unique<StagedSchedule>(context, 2 * static_cast<size_t>(size - 1));
  P2pTransport& transport = p->transport();
  const auto* in = static_cast<const char*>(send);
  auto* out = static_cast<char*>(recv);
  for (int step = 1; step < size; ++step) {
    const int from = (rank - step + size) % size;
    const auto [offset, bytes] = block(1, from);
    if (bytes == 0) continue;  // the peer's count for us is the same, negotiated
    if (Status s = transport.postRecv(from, out + offset, bytes); !s.isOk()) {
      return failedToStart(*p, std::move(s));
    }
  }
  for (int step = 1; step < size; ++step) {
    const int to = (rank + step) % size;
    const auto [offset, bytes] = block(0, to);
    if (bytes == 0) continue;
    if (Status s = transport.postSend(to, in + offset, bytes); !s.isOk()) {
      return failedToStart(*p, std::move(s));
    }
  }
  const auto [sendOffset, bytes] = block(0, rank);
  if (bytes != 0) transport.postLocalCopy(out + block(1, rank).first, in + sendOffset, bytes);
  return p;
}

}  // namespace

PendingPtr pointToPointAlltoallv(const ScheduleContext& context, const void* send,
                                 const std::vector<size_t>& sendBytes, void* recv,
                                 const std::vector<size_t>& recvBytes) {
  const BlockOffsets sendOffset(sendBytes), recvOffset(recvBytes);
  return exchangeBlocks(context, send, recv, [&](int buffer, int j) {
    const auto k = static_cast<size_t>(j);
    return buffer == 0 ? std::pair(sendOffset[k], sendBytes[k])
                       : std::pair(recvOffset[k], recvBytes[k]);
  });
}

PendingPtr pointToPointAlltoall(const ScheduleContext& context, const void* send, void* recv,
                                size_t bytesPerRank) {
  return exchangeBlocks(context, send, recv, [&](int, int j) {
    return std::pair(static_cast<size_t>(j) * bytesPerRank, bytesPerRank);
  });
}

PendingPtr pointToPointAllgatherv(const ScheduleContext& context, const void* send,
                                  size_t sendBytes, void* recv,
                                  const std::vector<size_t>& recvBytes) {
  const int rank = context.rank, size = context.size;
  auto p = std::make_unique<StagedSchedule>(context, 2 * static_cast<size_t>(size - 1));
  P2pTransport& transport = p->transport();
  auto* out = static_cast<char*>(recv);
  const BlockOffsets offset(recvBytes);
  const auto me = static_cast<size_t>(rank);
  const char* mine = send != nullptr ? static_cast<const char*>(send) : out + offset[me];
  for (int step = 1; step < size; ++step) {
    const int from = (rank - step + size) % size;
    const auto j = static_cast<size_t>(from);
    if (recvBytes[j] == 0) continue;  // the peer sends nothing either: negotiated sizes
    if (Status s = transport.postRecv(from, out + offset[j], recvBytes[j]); !s.isOk()) {
      return failedToStart(*p, std::move(s));
    }
  }
  for (int step = 1; step < size && sendBytes != 0; ++step) {
    if (Status s = transport.postSend((rank + step) % size, mine, sendBytes); !s.isOk()) {
      return failedToStart(*p, std::move(s));
    }
  }
  if (send != nullptr && sendBytes != 0) transport.postLocalCopy(out + offset[me], send, sendBytes);
  return p;
}

PendingPtr binomialBroadcast(const ScheduleContext& context, void* buf, size_t bytes, int root) {
  auto p = std::make_unique<BinomialBroadcastPending>(context, buf, bytes, root);
  if (Status s = p->start(); !s.isOk()) return failedToStart(*p, std::move(s));
  return p;
}

}  // namespace hcoll::backends::mpi
