// The MPI backend's point-to-point transport seam (mpi_transport.h) without MPI: ranks are
// threads of this process, and each rank's transport is RoutedTransport over two sets of
// in-memory shared-memory lanes (ShmLanes::overMemory) standing for MPI messages (transfers up to
// kLanesFrom) and for the lanes (above it), exactly as the MPI backend routes them. Covered: the
// router and the lanes' FIFO rule on every chunk boundary and across stages, a transfer
// abandoned half-way (no side claims it complete, the receiver gets exactly what was pushed, and
// giving up neither blocks nor crashes), and every schedule of mpi_p2p.h (broadcast from every
// root, allgather(v), alltoall(v), reduce-scatter, allreduce in and out of place, Adasum) at 2
// and 3 ranks, with and without the lanes, at block sizes around the lanes' chunks.

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "backends/mpi/mpi_p2p.h"
#include "backends/mpi/mpi_transport_impl.h"

namespace {

using hcoll::Code;
using hcoll::DataType;
using hcoll::ReduceOp;
using hcoll::ScratchPool;
using hcoll::Status;
using hcoll::backends::PendingPtr;
using namespace hcoll::backends::mpi;

constexpr size_t kChunk = ShmLanes::kChunkBytes;

// Zeroed memory for one set of lanes between `size` ranks, aligned for the rings' counters.
struct alignas(ShmRing::kLine) Line {
  char bytes[ShmRing::kLine];
};
std::vector<Line> laneMemory(int size) {
  return std::vector<Line>(ShmLanes::segmentBytes(size) / sizeof(Line) + 1, Line{});
}

// The lanes of `size` ranks: one set standing for MPI messages, one for the lanes (optional).
struct World {
  World(int size, bool lanes) : size(size), small(laneMemory(size)) {
    if (lanes) large = laneMemory(size);
  }
  int size;
  std::vector<Line> small, large;
};

// One rank's transports over a World, routed as the MPI backend routes them (CommTransports).
class InMemoryTransports final : public TransportFactory {
 public:
  InMemoryTransports(World& world, int rank)
      : small_(ShmLanes::overMemory(world.small.data(), rank, world.size)),
        large_(world.large.empty() ? nullptr
                                   : ShmLanes::overMemory(world.large.data(), rank, world.size)) {}
  std::unique_ptr<P2pTransport> open(size_t transfersPerStage) const override {
    return std::make_unique<RoutedTransport<LaneTransport, LaneTransport>>(
        LaneTransport(small_, transfersPerStage), LaneTransport(large_, transfersPerStage));
  }

 private:
  std::shared_ptr<ShmLanes> small_, large_;
};

bool poll(P2pTransport& transport, Status* status, std::chrono::seconds bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (!transport.poll(status)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// Runs `start` on every rank (threads), each polling its schedule until it finishes (bounded:
// a schedule that never finishes fails the test instead of hanging it). Returns each rank's status.
std::vector<Status> runRanks(int size, bool lanes, Reduction reduction,
                             const std::function<PendingPtr(const ScheduleContext&)>& start) {
  World world(size, lanes);
  std::vector<Status> statuses(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      InMemoryTransports transports(world, rank);
      const ScheduleContext context{rank, size, &transports, std::make_shared<ScratchPool>(),
                                    reduction};
      PendingPtr pending = start(context);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      Status status;
      bool done = false;
      while (!(done = pending->poll(&status)) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
      }
      statuses[static_cast<size_t>(rank)] =
          done ? status : Status(Code::kInternal, "the schedule did not finish");
    });
  }
  for (auto& t : threads) t.join();
  return statuses;
}

void checkAllOk(const std::vector<Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    INFO("rank " << r << ": " << statuses[r].message());
    CHECK(statuses[r].isOk());
  }
}

// Byte i of rank r's data for transfer/block t: differs between ranks, blocks and chunks.
char pattern(size_t r, size_t t, size_t i) {
  return static_cast<char>((r * 97 + t * 131 + i * 7 + i / kChunk) & 0xff);
}

// Transfer sizes on both sides of the router's threshold and of every chunk boundary.
std::vector<size_t> boundarySizes() {
  std::vector<size_t> sizes = {1, kLanesFrom - 1, kLanesFrom, kLanesFrom + 1};
  for (size_t k = 1; k <= ShmLanes::kChunks + 2; ++k) {
    for (size_t s : {k * kChunk - 1, k * kChunk, k * kChunk + 1}) sizes.push_back(s);
  }
  return sizes;
}

}  // namespace

TEST_CASE("p2p transport: transfers on every chunk boundary, both ways, stage after stage",
          "[p2p_transport]") {
  const bool lanes = GENERATE(true, false);
  INFO("lanes " << lanes);
  World world(2, lanes);
  const std::vector<size_t> sizes = boundarySizes();
  // Catch's assertions are not thread-safe: the ranks record, the main thread checks.
  std::vector<size_t> wrong(2, 0);
  std::vector<bool> finished(2, false);
  auto rank = [&](int me) {
    InMemoryTransports transports(world, me);
    const int peer = 1 - me;
    // Two stages: every size at once (transfers queue on one lane in posting order), then every
    // size again in reverse, so the second stage starts where the first left each lane's stream.
    for (int stage = 0; stage < 2; ++stage) {
      std::unique_ptr<P2pTransport> transport = transports.open(2 * sizes.size());
      std::vector<std::vector<char>> out(sizes.size()), in(sizes.size());
      for (size_t k = 0; k < sizes.size(); ++k) {
        const size_t t = stage == 0 ? k : sizes.size() - 1 - k;
        in[k].assign(sizes[t], 0);
        if (!transport->postRecv(peer, in[k].data(), sizes[t]).isOk()) return;
      }
      for (size_t k = 0; k < sizes.size(); ++k) {
        const size_t t = stage == 0 ? k : sizes.size() - 1 - k;
        out[k].resize(sizes[t]);
        for (size_t i = 0; i < sizes[t]; ++i) out[k][i] = pattern(me, t, i);
        if (!transport->postSend(peer, out[k].data(), sizes[t]).isOk()) return;
      }
      Status status;
      if (!poll(*transport, &status, std::chrono::seconds(30))) return;
      if (!status.isOk() || !transport->idle()) return;
      for (size_t k = 0; k < sizes.size(); ++k) {
        const size_t t = stage == 0 ? k : sizes.size() - 1 - k;
        for (size_t i = 0; i < sizes[t]; ++i) {
          if (in[k][i] != pattern(peer, t, i)) {
            ++wrong[me];
            break;
          }
        }
      }
    }
    finished[me] = true;
  };
  std::thread other(rank, 1);
  rank(0);
  other.join();
  CHECK(finished[0]);
  CHECK(finished[1]);
  CHECK(wrong[0] == 0);
  CHECK(wrong[1] == 0);
}

TEST_CASE("p2p transport: a transfer abandoned half-way is complete on neither side",
          "[p2p_transport]") {
  // The sender gives up on a 6.5-chunk transfer once its lane is full (the receiver stopped
  // pulling after the first chunks): neither side may report the stage complete, the receiver
  // holds exactly the pushed chunks, and giving up returns at once.
  World world(2, true);
  InMemoryTransports sender(world, 0), receiver(world, 1);
  const size_t size = 6 * kChunk + kChunk / 2;
  std::vector<char> data(size), got(size, 0);
  for (size_t i = 0; i < size; ++i) data[i] = pattern(0, 0, i);
  std::unique_ptr<P2pTransport> send = sender.open(1);
  REQUIRE(send->postSend(1, data.data(), size).isOk());
  Status status;
  int completions = 0;
  for (int i = 0; i < 100; ++i) completions += send->poll(&status) ? 1 : 0;  // fills, stalls
  CHECK(completions == 0);
  send->abandon();
  send.reset();
  std::unique_ptr<P2pTransport> recv = receiver.open(1);
  REQUIRE(recv->postRecv(0, got.data(), size).isOk());
  for (int i = 0; i < 100; ++i) completions += recv->poll(&status) ? 1 : 0;
  CHECK(completions == 0);
  const size_t pushed = ShmLanes::kChunks * kChunk;
  CHECK(std::memcmp(got.data(), data.data(), pushed) == 0);
  CHECK(std::all_of(got.begin() + pushed, got.end(), [](char c) { return c == 0; }));
  recv->abandon();
}

TEST_CASE("p2p transport: a schedule abandoned half-way by a lost peer", "[p2p_transport]") {
  // Broadcast of 6.5 chunks from rank 0 to a rank 1 that never starts: the root pushes what the
  // lane holds and never finishes; destroying it (the executor giving up) neither blocks nor
  // touches the buffer afterwards.
  World world(2, true);
  InMemoryTransports transports(world, 0);
  const ScheduleContext context{0, 2, &transports, std::make_shared<ScratchPool>(), Reduction{}};
  std::vector<char> buf(6 * kChunk + kChunk / 2, 'x');
  PendingPtr pending = binomialBroadcast(context, buf.data(), buf.size(), 0);
  Status status;
  for (int i = 0; i < 100; ++i) CHECK_FALSE(pending->poll(&status));
  pending.reset();
  CHECK(buf[0] == 'x');
}

TEST_CASE("p2p schedules over the transport: broadcast from every root", "[p2p_transport]") {
  const int size = GENERATE(2, 3);
  const bool lanes = GENERATE(true, false);
  for (size_t bytes : {size_t{1}, kLanesFrom + 1, 3 * kChunk + 5}) {
    for (int root = 0; root < size; ++root) {
      INFO("ranks " << size << " lanes " << lanes << " bytes " << bytes << " root " << root);
      std::vector<std::vector<char>> buf(static_cast<size_t>(size));
      for (int r = 0; r < size; ++r) {
        buf[r].resize(bytes);
        for (size_t i = 0; i < bytes; ++i) buf[r][i] = pattern(r, 0, i);
      }
      checkAllOk(runRanks(size, lanes, Reduction{}, [&](const ScheduleContext& c) {
        return binomialBroadcast(c, buf[c.rank].data(), bytes, root);
      }));
      for (int r = 0; r < size; ++r) CHECK(buf[r] == buf[root]);
    }
  }
}

TEST_CASE("p2p schedules over the transport: allgatherv and alltoall(v)", "[p2p_transport]") {
  const int size = GENERATE(2, 3);
  const bool lanes = GENERATE(true, false);
  const bool inPlace = GENERATE(true, false);
  INFO("ranks " << size << " lanes " << lanes << " in place " << inPlace);
  const auto n = static_cast<size_t>(size);
  // Uneven blocks, one empty, one above the chunk boundary, one above the router's threshold.
  const std::vector<size_t> shapes = {kChunk + 1, 0, kLanesFrom + 3, 17};
  std::vector<size_t> blocks(shapes.begin(), shapes.begin() + size);
  const size_t total = std::accumulate(blocks.begin(), blocks.end(), size_t{0});
  std::vector<std::vector<char>> send(n), recv(n, std::vector<char>(total, 0));
  std::vector<size_t> offset(n, 0);
  for (size_t j = 1; j < n; ++j) offset[j] = offset[j - 1] + blocks[j - 1];
  for (size_t r = 0; r < n; ++r) {
    send[r].resize(blocks[r]);
    for (size_t i = 0; i < blocks[r]; ++i) send[r][i] = pattern(r, 1, i);
    if (inPlace) std::copy(send[r].begin(), send[r].end(), recv[r].begin() + offset[r]);
  }
  checkAllOk(runRanks(size, lanes, Reduction{}, [&](const ScheduleContext& c) {
    const auto r = static_cast<size_t>(c.rank);
    return pointToPointAllgatherv(c, inPlace ? nullptr : send[r].data(), blocks[r], recv[r].data(),
                                  blocks);
  }));
  std::vector<char> expected;
  for (size_t r = 0; r < n; ++r) expected.insert(expected.end(), send[r].begin(), send[r].end());
  for (size_t r = 0; r < n; ++r) CHECK(recv[r] == expected);

  // Alltoallv: rank r sends (r + j) % n's shape to rank j; rank j receives that from r.
  auto bytes = [&](size_t from, size_t to) { return shapes[(from + 2 * to) % shapes.size()]; };
  std::vector<std::vector<size_t>> sendBytes(n), recvBytes(n);
  std::vector<std::vector<char>> a2aSend(n), a2aRecv(n);
  for (size_t r = 0; r < n; ++r) {
    for (size_t j = 0; j < n; ++j) {
      sendBytes[r].push_back(bytes(r, j));
      recvBytes[r].push_back(bytes(j, r));
    }
    for (size_t j = 0; j < n; ++j) {
      for (size_t i = 0; i < bytes(r, j); ++i) a2aSend[r].push_back(pattern(r, j, i));
    }
    a2aRecv[r].assign(std::accumulate(recvBytes[r].begin(), recvBytes[r].end(), size_t{0}), 0);
  }
  checkAllOk(runRanks(size, lanes, Reduction{}, [&](const ScheduleContext& c) {
    const auto r = static_cast<size_t>(c.rank);
    return pointToPointAlltoallv(c, a2aSend[r].data(), sendBytes[r], a2aRecv[r].data(),
                                 recvBytes[r]);
  }));
  for (size_t r = 0; r < n; ++r) {
    std::vector<char> want;
    for (size_t j = 0; j < n; ++j) {
      for (size_t i = 0; i < bytes(j, r); ++i) want.push_back(pattern(j, r, i));
    }
    INFO("alltoallv at rank " << r);
    CHECK(a2aRecv[r] == want);
  }

  // Even alltoall with blocks above a chunk (the own block copied between lane moves).
  const size_t each = kChunk + 9;
  std::vector<std::vector<char>> evenSend(n, std::vector<char>(n * each)),
      evenRecv(n, std::vector<char>(n * each, 0));
  for (size_t r = 0; r < n; ++r) {
    for (size_t i = 0; i < n * each; ++i) evenSend[r][i] = pattern(r, i / each, i % each);
  }
  checkAllOk(runRanks(size, lanes, Reduction{}, [&](const ScheduleContext& c) {
    const auto r = static_cast<size_t>(c.rank);
    return pointToPointAlltoall(c, evenSend[r].data(), evenRecv[r].data(), each);
  }));
  for (size_t r = 0; r < n; ++r) {
    bool same = true;
    for (size_t i = 0; i < n * each; ++i)
      same = same && evenRecv[r][i] == pattern(i / each, r, i % each);
    INFO("alltoall at rank " << r);
    CHECK(same);
  }
}

TEST_CASE("p2p schedules over the transport: reduce-scatter and allreduce", "[p2p_transport]") {
  const int size = GENERATE(2, 3);
  const bool lanes = GENERATE(true, false);
  const auto n = static_cast<size_t>(size);
  const Reduction sum = reductionFor(DataType::kInt32, ReduceOp::kSum);
  auto value = [](size_t r, size_t i) { return static_cast<int32_t>(r * 1000003 + i); };

  // Reduce-scatter, uneven counts (one empty, one above a chunk of int32).
  const std::vector<size_t> shapes = {kChunk / 4 + 3, 0, kLanesFrom / 4 + 1};
  std::vector<size_t> counts(shapes.begin(), shapes.begin() + size);
  const size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
  std::vector<std::vector<int32_t>> send(n, std::vector<int32_t>(total)), recv(n);
  for (size_t r = 0; r < n; ++r) {
    for (size_t i = 0; i < total; ++i) send[r][i] = value(r, i);
    recv[r].assign(counts[r], -1);
  }
  checkAllOk(runRanks(size, lanes, sum, [&](const ScheduleContext& c) {
    const auto r = static_cast<size_t>(c.rank);
    return pointToPointReduceScatter(c, send[r].data(), recv[r].data(), counts);
  }));
  size_t first = 0;
  for (size_t r = 0; r < n; ++r) {
    bool same = true;
    for (size_t i = 0; i < counts[r]; ++i) {
      int32_t want = 0;
      for (size_t q = 0; q < n; ++q) want += value(q, first + i);
      same = same && recv[r][i] == want;
    }
    INFO("reduce-scatter at rank " << r);
    CHECK(same);
    first += counts[r];
  }

  // Allreduce: fewer elements than ranks, blocks on both sides of the router's threshold and of
  // a chunk, in place and out of place.
  for (size_t count : {size_t{1}, size_t{2}, n * (kLanesFrom / 4) + 1, n * (kChunk / 4) + 2}) {
    for (bool inPlace : {true, false}) {
      INFO("ranks " << size << " lanes " << lanes << " count " << count << " in place " << inPlace);
      std::vector<std::vector<int32_t>> in(n, std::vector<int32_t>(count)), out(n);
      for (size_t r = 0; r < n; ++r) {
        for (size_t i = 0; i < count; ++i) in[r][i] = value(r, i);
        out[r] = inPlace ? in[r] : std::vector<int32_t>(count, -1);
      }
      checkAllOk(runRanks(size, lanes, sum, [&](const ScheduleContext& c) {
        const auto r = static_cast<size_t>(c.rank);
        return pointToPointAllreduce(c, inPlace ? nullptr : in[r].data(), out[r].data(), count);
      }));
      bool same = true;
      for (size_t i = 0; i < count; ++i) {
        int32_t want = 0;
        for (size_t q = 0; q < n; ++q) want += value(q, i);
        for (size_t r = 0; r < n; ++r) same = same && out[r][i] == want;
      }
      CHECK(same);
    }
  }
}

TEST_CASE("p2p schedules over the transport: Adasum of orthogonal vectors is their sum",
          "[p2p_transport]") {
  // Rank r's vector is non-zero only where i % size == r: every dot product between ranks is
  // exactly 0, so Adasum's coefficients are exactly 1 and the result is the plain sum on every
  // rank, through every stage of the tree (fold, halving, dot sums, gather, unfold).
  const int size = GENERATE(2, 3);
  const bool lanes = GENERATE(true, false);
  const auto n = static_cast<size_t>(size);
  for (size_t count : {size_t{5}, kChunk / 4 + 7}) {
    INFO("ranks " << size << " lanes " << lanes << " count " << count);
    std::vector<std::vector<float>> buf(n, std::vector<float>(count, 0.0f));
    for (size_t r = 0; r < n; ++r) {
      for (size_t i = r; i < count; i += n) buf[r][i] = static_cast<float>(i % 251) + 0.5f;
    }
    checkAllOk(runRanks(size, lanes, Reduction{}, [&](const ScheduleContext& c) {
      return pointToPointAdasum(c, buf[c.rank].data(), count, DataType::kFloat32,
                                std::vector<size_t>{count});
    }));
    bool same = true;
    for (size_t r = 0; r < n; ++r) {
      for (size_t i = 0; i < count; ++i) {
        same = same && buf[r][i] == static_cast<float>(i % 251) + 0.5f;
      }
    }
    CHECK(same);
  }
}
