#include "backends/loopback/loopback_group.h"

#include <string>

namespace hcoll::backends::loopback {

const char* opTagName(OpTag tag) {
  switch (tag) {
    case OpTag::kBitsAnd:
      return "allreduceBitsAnd";
    case OpTag::kGatherBytes:
      return "gatherBytes";
    case OpTag::kBroadcastBytes:
      return "broadcastBytes";
    case OpTag::kAllreduce:
      return "allreduce";
    case OpTag::kAllgatherv:
      return "allgatherv";
    case OpTag::kBroadcast:
      return "broadcast";
    case OpTag::kAlltoallv:
      return "alltoallv";
    case OpTag::kReduceScatter:
      return "reduceScatter";
    case OpTag::kBarrier:
      return "barrier";
    case OpTag::kSplit:
      return "split";
  }
  return "?";
}

Round::Round(const RoundParams& p, int size, std::shared_ptr<ScratchPool> pool)
    : params(p),
      slots(static_cast<size_t>(size)),
      present(static_cast<size_t>(size), false),
      pool_(std::move(pool)) {}

Round::~Round() {
  if (scratch.bytes) pool_->give(std::move(scratch));
}

Group::Group(int size)
    : size_(size),
      left_(static_cast<size_t>(size), false),
      mailboxes_(static_cast<size_t>(size)),
      notedRound_(static_cast<size_t>(size), 0) {}

std::shared_ptr<Round> Group::arrive(Plane plane, uint64_t seq, int rank, const RoundParams& params,
                                     Contribution mine) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = open_[{plane, seq}];
  if (!slot) {
    slot = std::make_shared<Round>(params, size_, pool_);
    if (params.tag == OpTag::kAllreduce && params.count > 0) {
      slot->scratchBytes = params.count * dataTypeSize(params.dtype);
      slot->scratch = pool_->take(slot->scratchBytes);
    }
  }
  std::shared_ptr<Round> round = slot;
  const auto r = static_cast<size_t>(rank);
  round->slots[r] = std::move(mine);
  round->present[r] = true;
  if (!(params == round->params) && round->failure.isOk()) {
    round->failure = backendError(
        "loopback: the ranks called different collectives or passed different sizes (rank " +
        std::to_string(rank) + ": " + opTagName(params.tag) + " of " +
        std::to_string(params.count) + ", another rank: " + opTagName(round->params.tag) + " of " +
        std::to_string(round->params.count) + ")");
  }
  if (++round->arrived == size_) {
    open_.erase({plane, seq});  // every rank holds it now
    if (round->failure.isOk()) round->failure = validate(*round);
  }
  changed_.notify_all();
  return round;
}

// Vector arguments must fit together before anyone reads a peer's buffer with them.
Status Group::validate(const Round& round) {
  const size_t n = round.slots.size();
  auto fail = [&](const std::string& what) {
    return backendError(std::string("loopback: ") + opTagName(round.params.tag) + ": " + what);
  };
  switch (round.params.tag) {
    case OpTag::kAllgatherv:
      for (size_t r = 0; r < n; ++r) {
        const Contribution& c = round.slots[r];
        if (c.recvBytes != round.slots[0].recvBytes || c.recvBytes.size() != n) {
          return fail("the ranks passed different block sizes");
        }
        if (c.sendBytes.size() != 1 || c.sendBytes[0] != c.recvBytes[r]) {
          return fail("rank " + std::to_string(r) + " sends a block of another size");
        }
      }
      break;
    case OpTag::kAlltoallv:
      for (size_t r = 0; r < n; ++r) {
        if (round.slots[r].sendBytes.size() != n || round.slots[r].recvBytes.size() != n) {
          return fail("rank " + std::to_string(r) + " passed a size per rank of the wrong length");
        }
      }
      for (size_t from = 0; from < n; ++from) {
        for (size_t to = 0; to < n; ++to) {
          if (round.slots[from].sendBytes[to] != round.slots[to].recvBytes[from]) {
            return fail("rank " + std::to_string(from) + " sends " +
                        std::to_string(round.slots[from].sendBytes[to]) + " bytes to rank " +
                        std::to_string(to) + ", which expects " +
                        std::to_string(round.slots[to].recvBytes[from]));
          }
        }
      }
      break;
    case OpTag::kBroadcast:
      if (round.params.root < 0 || static_cast<size_t>(round.params.root) >= n) {
        return fail("root " + std::to_string(round.params.root) + " out of range");
      }
      break;
    case OpTag::kReduceScatter:
      for (size_t r = 0; r < n; ++r) {
        if (round.slots[r].recvBytes != round.slots[0].recvBytes ||
            round.slots[r].recvBytes.size() != n) {
          return fail("the ranks passed different counts");
        }
      }
      break;
    default:
      break;
  }
  return Status::ok();
}

void Group::leave(int rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  left_[static_cast<size_t>(rank)] = true;
  changed_.notify_all();
}

void Group::post(int from, const PeerSignals::Notice& notice) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (int r = 0; r < size_; ++r) {
    if (r == from) continue;
    mailboxes_[static_cast<size_t>(r)].push_back(notice);
  }
}

bool Group::take(int rank, PeerSignals::Notice* out) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& box = mailboxes_[static_cast<size_t>(rank)];
  if (box.empty()) return false;
  *out = std::move(box.front());
  box.pop_front();
  return true;
}

void Group::noteWaiting(int rank, uint64_t round) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t& noted = notedRound_[static_cast<size_t>(rank)];
  if (round > noted) noted = round;
}

std::vector<int> Group::peersWaiting(int rank, uint64_t round) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<int> out;
  for (int r = 0; r < size_; ++r) {
    if (r != rank && notedRound_[static_cast<size_t>(r)] == round) out.push_back(r);
  }
  return out;
}

}  // namespace hcoll::backends::loopback
