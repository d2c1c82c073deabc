// The protocol floor: what hcoll's way of running one operation costs in raw MPI, with none of
// hcoll's own code. Every hcoll operation first agrees that all ranks are ready (a readiness AND:
// on a power-of-two communicator the MPI backend exchanges one word with rank ^ 1, ^ 2, ...; else
// an MPI_Iallreduce of one word), then runs the non-blocking collective and polls it with
// MPI_Test (a blocking call could never be given up on when a peer dies); on communicators of up
// to 7 ranks, every collective runs as point-to-point messages instead (the backend's mpi_p2p.h:
// a binomial tree, every message posted at once, local reductions; allreduce from 4 KiB; under
// MPICH, transfers of (8, 32] KiB in 8 KiB pieces, mpi_transport_impl.h). This
// section times exactly that against the blocking collective, interleaved like the sweep, so the
// sweep's ratios can be read against what no implementation of this protocol can beat on this
// machine. The readiness exchange and the point-to-point schedules are written out here in raw MPI
// on purpose (the backend's are internal to the library): keep the two alike. Reference only: no
// targets. On one node of 2-4 ranks the backend moves transfers above 8 KiB through its
// shared-memory lanes instead of MPI messages (mpi_shm.h), and on one node of 2-8 ranks the
// readiness AND and every operation of up to 16 KiB per rank through a shared-memory control
// block (mpi_shm_control.h): hcoll can then beat this MPI-only floor.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.h"
#include "scenarios.h"

namespace hbench {
namespace {

enum class Coll { kAllreduce, kBroadcast, kAllgather, kAlltoall, kReducescatter };

struct FloorComms {
  MPI_Comm control = MPI_COMM_NULL;
  MPI_Comm data = MPI_COMM_NULL;
  FloorComms() {
    MPI_Comm_dup(MPI_COMM_WORLD, &control);
    MPI_Comm_dup(MPI_COMM_WORLD, &data);
  }
  ~FloorComms() {
    MPI_Comm_free(&control);
    MPI_Comm_free(&data);
  }
  FloorComms(const FloorComms&) = delete;
  FloorComms& operator=(const FloorComms&) = delete;
};

void waitRequest(MPI_Request* r) {
  int done = 0;
  while (!done) MPI_Test(r, &done, MPI_STATUS_IGNORE);
}

// The readiness AND of one word, as the MPI backend runs it.
void readiness(const Context& ctx, MPI_Comm control) {
  uint64_t mine = ~0ull, theirs = 0;
  if ((ctx.size & (ctx.size - 1)) != 0) {
    MPI_Request r;
    MPI_Iallreduce(MPI_IN_PLACE, &mine, 1, MPI_UINT64_T, MPI_BAND, control, &r);
    waitRequest(&r);
    return;
  }
  for (int mask = 1; mask < ctx.size; mask <<= 1) {
    const int peer = ctx.rank ^ mask;
    MPI_Request r[2];
    MPI_Irecv(&theirs, 1, MPI_UINT64_T, peer, 8, control, &r[0]);
    MPI_Isend(&mine, 1, MPI_UINT64_T, peer, 8, control, &r[1]);
    int done = 0;
    while (!done) MPI_Testall(2, r, &done, MPI_STATUSES_IGNORE);
    mine &= theirs;
  }
}

// The backend's kMaxPointToPointRanks (src/backends/mpi/mpi_algorithms.h).
constexpr int kMaxPointToPointRanks = 7;

// One transfer as the backend posts it (mpi_transport_impl.h): under MPICH, (8, 32] KiB in 8 KiB pieces
// (sent eagerly, where one message would pay the rendezvous handshake); else whole.
void post(bool receive, void* buf, size_t bytes, int peer, MPI_Comm comm,
          std::vector<MPI_Request>& r) {
#ifdef MPICH
  const size_t piece = bytes > 8192 && bytes <= 32768 ? 8192 : bytes;
#else
  const size_t piece = bytes;
#endif
  size_t offset = 0;
  do {
    const size_t n = std::min(piece, bytes - offset);
    char* at = static_cast<char*>(buf) + offset;
    r.emplace_back();
    if (receive) {
      MPI_Irecv(at, static_cast<int>(n), MPI_BYTE, peer, 0, comm, &r.back());
    } else {
      MPI_Isend(at, static_cast<int>(n), MPI_BYTE, peer, 0, comm, &r.back());
    }
    offset += n;
  } while (offset < bytes);
}

void waitAll(std::vector<MPI_Request>& requests) {
  int done = 0;
  while (!done) {
    MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
  }
  requests.clear();
}

// Broadcast from rank 0 down a binomial tree: receive from the parent, then send to the children.
void p2pBroadcast(const Context& ctx, MPI_Comm data, char* buf, int bytes) {
  std::vector<MPI_Request> r;
  int mask = 1;
  while (mask < ctx.size) {
    if ((ctx.rank & mask) != 0) {
      post(true, buf, static_cast<size_t>(bytes), ctx.rank - mask, data, r);
      waitAll(r);
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (ctx.rank + mask >= ctx.size) continue;
    post(false, buf, static_cast<size_t>(bytes), ctx.rank + mask, data, r);
  }
  waitAll(r);
}

// Allgather (everyone's block is `in`'s first share) or alltoall (block j of `in` goes to rank j):
// every receive, then every send, posted at once; the own block is copied.
void p2pExchange(const Context& ctx, MPI_Comm data, bool alltoall, const char* in, char* out,
                 int share) {
  std::vector<MPI_Request> r;
  const auto bytes = static_cast<size_t>(share);
  for (int step = 1; step < ctx.size; ++step) {
    const int from = (ctx.rank - step + ctx.size) % ctx.size;
    post(true, out + static_cast<size_t>(from) * bytes, bytes, from, data, r);
  }
  for (int step = 1; step < ctx.size; ++step) {
    const int to = (ctx.rank + step) % ctx.size;
    const char* block = alltoall ? in + static_cast<size_t>(to) * bytes : in;
    post(false, const_cast<char*>(block), bytes, to, data, r);
  }
  const char* own = alltoall ? in + static_cast<size_t>(ctx.rank) * share : in;
  std::memcpy(out + static_cast<size_t>(ctx.rank) * share, own, static_cast<size_t>(share));
  waitAll(r);
}

// Reduce-scatter of float sums: rank - 1's contribution to this rank's block straight into
// `out`, the others' into `scratch`, then MPI_Reduce_local.
void p2pReduceScatter(const Context& ctx, MPI_Comm data, const char* in, char* out,
                      std::vector<char>& scratch, int share) {
  const int count = share / 4;
  const size_t bytes = static_cast<size_t>(count) * 4;
  std::vector<MPI_Request> r;
  for (int step = 1; step < ctx.size; ++step) {
    const int from = (ctx.rank - step + ctx.size) % ctx.size;
    char* slot = step == 1 ? out : scratch.data() + static_cast<size_t>(step - 2) * share;
    post(true, slot, bytes, from, data, r);
  }
  for (int step = 1; step < ctx.size; ++step) {
    const int to = (ctx.rank + step) % ctx.size;
    post(false, const_cast<char*>(in) + static_cast<size_t>(to) * share, bytes, to, data, r);
  }
  waitAll(r);
  MPI_Reduce_local(in + static_cast<size_t>(ctx.rank) * share, out, count, MPI_FLOAT, MPI_SUM);
  for (int step = 2; step < ctx.size; ++step) {
    MPI_Reduce_local(scratch.data() + static_cast<size_t>(step - 2) * share, out, count, MPI_FLOAT,
                     MPI_SUM);
  }
}

// Allreduce of float sums as the backend runs it from 4 KiB: the reduce-scatter above into this
// rank's block of `out` (rank j owns the j-th of near-equal blocks), then an allgather of the
// reduced blocks.
void p2pAllreduce(const Context& ctx, MPI_Comm data, const char* in, char* out,
                  std::vector<char>& scratch, size_t bytes) {
  const size_t n = static_cast<size_t>(ctx.size), count = bytes / 4;
  auto owned = [&](int j) { return count / n + (static_cast<size_t>(j) < count % n ? 1 : 0); };
  auto first = [&](int j) {
    const auto k = static_cast<size_t>(j);
    return 4 * (k * (count / n) + std::min(k, count % n));  // bytes
  };
  const int mine = static_cast<int>(owned(ctx.rank));
  char* own = out + first(ctx.rank);
  std::vector<MPI_Request> r;
  for (int step = 1; step < ctx.size; ++step) {
    const int from = (ctx.rank - step + ctx.size) % ctx.size;
    char* slot = step == 1 ? own : scratch.data() + static_cast<size_t>(step - 2) * mine * 4;
    post(true, slot, static_cast<size_t>(mine) * 4, from, data, r);
  }
  for (int step = 1; step < ctx.size; ++step) {
    const int to = (ctx.rank + step) % ctx.size;
    post(false, const_cast<char*>(in) + first(to), owned(to) * 4, to, data, r);
  }
  waitAll(r);
  MPI_Reduce_local(in + first(ctx.rank), own, mine, MPI_FLOAT, MPI_SUM);
  for (int step = 2; step < ctx.size; ++step) {
    MPI_Reduce_local(scratch.data() + static_cast<size_t>(step - 2) * mine * 4, own, mine,
                     MPI_FLOAT, MPI_SUM);
  }
  for (int step = 1; step < ctx.size; ++step) {
    const int from = (ctx.rank - step + ctx.size) % ctx.size;
    post(true, out + first(from), owned(from) * 4, from, data, r);
  }
  for (int step = 1; step < ctx.size; ++step) {
    post(false, own, static_cast<size_t>(mine) * 4, (ctx.rank + step) % ctx.size, data, r);
  }
  waitAll(r);
}

void blocking(Coll c, std::vector<char>& in, std::vector<char>& out, size_t bytes, int size) {
  const int share = static_cast<int>(bytes / static_cast<size_t>(size));
  switch (c) {
    case Coll::kAllreduce:
      MPI_Allreduce(in.data(), out.data(), static_cast<int>(bytes / 4), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
      break;
    case Coll::kBroadcast:
      MPI_Bcast(in.data(), static_cast<int>(bytes), MPI_BYTE, 0, MPI_COMM_WORLD);
      break;
    case Coll::kAllgather:
      MPI_Allgather(in.data(), share, MPI_BYTE, out.data(), share, MPI_BYTE, MPI_COMM_WORLD);
      break;
    case Coll::kAlltoall:
      MPI_Alltoall(in.data(), share, MPI_BYTE, out.data(), share, MPI_BYTE, MPI_COMM_WORLD);
      break;
    case Coll::kReducescatter:
      MPI_Reduce_scatter_block(in.data(), out.data(), share / 4, MPI_FLOAT, MPI_SUM,
                               MPI_COMM_WORLD);
      break;
  }
}

void protocol(const Context& ctx, const FloorComms& comms, Coll c, std::vector<char>& in,
              std::vector<char>& out, std::vector<char>& scratch, size_t bytes) {
  readiness(ctx, comms.control);
  const int share = static_cast<int>(bytes / static_cast<size_t>(ctx.size));
  if (ctx.size <= kMaxPointToPointRanks) {
    switch (c) {
      case Coll::kBroadcast:
        p2pBroadcast(ctx, comms.data, in.data(), static_cast<int>(bytes));
        return;
      case Coll::kAllgather:
      case Coll::kAlltoall:
        p2pExchange(ctx, comms.data, c == Coll::kAlltoall, in.data(), out.data(), share);
        return;
      case Coll::kReducescatter:
        p2pReduceScatter(ctx, comms.data, in.data(), out.data(), scratch, share);
        return;
      case Coll::kAllreduce:
        if (bytes >= 4096) {  // the backend's allreduce rule (mpi_algorithms.h)
          p2pAllreduce(ctx, comms.data, in.data(), out.data(), scratch, bytes);
          return;
        }
        break;
    }
  }
  MPI_Request r;
  switch (c) {
    case Coll::kAllreduce:
      MPI_Iallreduce(in.data(), out.data(), static_cast<int>(bytes / 4), MPI_FLOAT, MPI_SUM,
                     comms.data, &r);
      break;
    case Coll::kBroadcast:
      MPI_Ibcast(in.data(), static_cast<int>(bytes), MPI_BYTE, 0, comms.data, &r);
      break;
    case Coll::kAllgather:
      MPI_Iallgather(in.data(), share, MPI_BYTE, out.data(), share, MPI_BYTE, comms.data, &r);
      break;
    case Coll::kAlltoall:
      MPI_Ialltoall(in.data(), share, MPI_BYTE, out.data(), share, MPI_BYTE, comms.data, &r);
      break;
    case Coll::kReducescatter: {
      // hcoll's MPI backend calls MPI_Ireduce_scatter (counts per rank), not the _block form.
      std::vector<int> counts(static_cast<size_t>(ctx.size), share / 4);
      MPI_Ireduce_scatter(in.data(), out.data(), counts.data(), MPI_FLOAT, MPI_SUM, comms.data, &r);
      break;
    }
  }
  waitRequest(&r);
}

}  // namespace

void runFloor(Context& ctx) {
  struct Named {
    const char* name;
    Coll coll;
  };
  const Named all[] = {{"allreduce", Coll::kAllreduce},
                       {"allgather", Coll::kAllgather},
                       {"broadcast", Coll::kBroadcast},
                       {"alltoall", Coll::kAlltoall},
                       {"reducescatter", Coll::kReducescatter}};
  const std::vector<size_t> sizes =
      ctx.options.quick ? std::vector<size_t>{32u << 10}
                        : std::vector<size_t>{32u << 10, 128u << 10, 512u << 10, 2u << 20};
  FloorComms comms;
  std::vector<char> in(sizes.back()), out(sizes.back()), scratch(sizes.back());
  std::memset(in.data(), 0, in.size());
  say(ctx,
      "\n# protocol floor (raw MPI, no hcoll code): readiness AND + the backend's schedule "
      "(non-blocking collective polled with MPI_Test; point-to-point messages up to %d "
      "ranks), / the blocking collective; median of "
      "interleaved blocks\n",
      kMaxPointToPointRanks);
  std::string header = "#              ";
  for (size_t b : sizes) header += "  " + std::to_string(b >> 10) + " KiB";
  say(ctx, "%s\n", header.c_str());
  for (const Named& c : all) {
    std::string line = "  " + std::string(c.name);
    line.resize(15, ' ');
    for (size_t bytes : sizes) {
      // Timed like the sweep: interleaved blocks, median (bench_util.h).
      const std::vector<double> perCall = timeInterleaved(
          ctx.options, {[&] { blocking(c.coll, in, out, bytes, ctx.size); },
                        [&] { protocol(ctx, comms, c.coll, in, out, scratch, bytes); }});
      const double ratio = perCall[1] / perCall[0];
      char cell[32];
      std::snprintf(cell, sizeof cell, "  %*.2f",
                    static_cast<int>(std::to_string(bytes >> 10).size() + 4), ratio);
      line += cell;
      auto& rec = json().add("floor", c.name);
      rec.numbers = {{"size", double(bytes)},
                     {"blocking_us", perCall[0] * 1e6},
                     {"protocol_us", perCall[1] * 1e6},
                     {"ratio", ratio}};
    }
    say(ctx, "%s\n", line.c_str());
  }
}

}  // namespace hbench
