// Communicator creation, destruction and queries.

#include <algorithm>
#include <vector>

#include "bindings/c/errors.h"
#include "bindings/c/state.h"
#include "hcoll/hcoll.h"

namespace hcoll::bindings {
namespace {

using runtime::Communicator;
using runtime::Runtime;

hcoll_status_t publish(const char* function, const Status& s, std::shared_ptr<Communicator> comm,
                       hcoll_comm_t* out) {
  if (!s.isOk()) return toC(Status(s.code(), std::string(function) + ": " + s.message()));
  *out = comm ? toHandle(commTable().insert(std::move(comm))) : HCOLL_COMM_NULL;
  return HCOLL_SUCCESS;
}

template <class Get>
hcoll_status_t query(const char* function, hcoll_comm_t comm, int* out, Get get) {
  std::shared_ptr<Runtime> rt;
  std::shared_ptr<Communicator> c;
  if (hcoll_status_t s = resolveComm(function, comm, &rt, &c); s != HCOLL_SUCCESS) return s;
  if (out == nullptr)
    return fail(HCOLL_ERR_INVALID_ARGUMENT, std::string(function) + ": out is NULL");
  *out = get(*c);
  return HCOLL_SUCCESS;
}

// A collective communicator call with bad arguments on this rank: the rank still takes part (as
// a refusal) so that the other ranks fail instead of waiting for it forever.
hcoll_status_t refuse(Runtime& rt, Communicator& parent, hcoll::OpKind kind,
                      const std::string& message) {
  return toC(rt.refuseCommOp(parent, kind, hcoll::invalidArgument(message)));
}

// comm_create's rank list: n in [1, size], every rank of the parent at most once.
std::string rankListError(const int* ranks, int n, int size) {
  if (ranks == nullptr) return "ranks is NULL";
  if (n < 1 || n > size) {
    return "n = " + std::to_string(n) + " is outside [1, " + std::to_string(size) + "]";
  }
  std::vector<bool> seen(static_cast<size_t>(size), false);
  for (int i = 0; i < n; ++i) {
    if (ranks[i] < 0 || ranks[i] >= size) {
      return "ranks[" + std::to_string(i) + "] = " + std::to_string(ranks[i]) +
             " is not a rank of the parent";
    }
    if (seen[ranks[i]]) return "rank " + std::to_string(ranks[i]) + " is listed twice";
    seen[ranks[i]] = true;
  }
  return "";
}

}  // namespace
}  // namespace hcoll::bindings

using namespace hcoll::bindings;
using hcoll::runtime::Communicator;
using hcoll::runtime::Runtime;

extern "C" {

HCOLL_API hcoll_status_t hcoll_comm_split(hcoll_comm_t parent, int color, int key,
                                          hcoll_comm_t* out) {
  return guarded("hcoll_comm_split", [&] {
    std::shared_ptr<Runtime> rt;
    std::shared_ptr<Communicator> p;
    if (hcoll_status_t s = resolveComm("hcoll_comm_split", parent, &rt, &p); s != HCOLL_SUCCESS)
      return s;
    if (out == nullptr) {
      return refuse(*rt, *p, hcoll::OpKind::kCommSplit, "hcoll_comm_split: out is NULL");
    }
    std::shared_ptr<Communicator> comm;
    hcoll::Status s = rt->split(*p, color < 0 ? -1 : color, key, &comm);
    return publish("hcoll_comm_split", s, std::move(comm), out);
  });
}

HCOLL_API hcoll_status_t hcoll_comm_create(hcoll_comm_t parent, const int* ranks, int n,
                                           hcoll_comm_t* out) {
  return guarded("hcoll_comm_create", [&] {
    std::shared_ptr<Runtime> rt;
    std::shared_ptr<Communicator> p;
    if (hcoll_status_t s = resolveComm("hcoll_comm_create", parent, &rt, &p); s != HCOLL_SUCCESS)
      return s;
    std::string error = out == nullptr ? "out is NULL" : rankListError(ranks, n, p->size());
    if (!error.empty()) {
      return refuse(*rt, *p, hcoll::OpKind::kCommCreate, "hcoll_comm_create: " + error);
    }
    std::shared_ptr<Communicator> comm;
    hcoll::Status s = rt->create(*p, std::vector<int32_t>(ranks, ranks + n), &comm);
    return publish("hcoll_comm_create", s, std::move(comm), out);
  });
}

HCOLL_API hcoll_status_t hcoll_comm_from_mpi(int mpi_comm_fint, hcoll_comm_t* out) {
  return guarded("hcoll_comm_from_mpi", [&] {
    std::shared_ptr<Runtime> rt;
    if (hcoll_status_t s = requireRuntime("hcoll_comm_from_mpi", &rt); s != HCOLL_SUCCESS) return s;
    if (out == nullptr) return fail(HCOLL_ERR_INVALID_ARGUMENT, "hcoll_comm_from_mpi: out is NULL");
    std::shared_ptr<Communicator> comm;
    hcoll::Status s = rt->fromExternal(mpi_comm_fint, &comm);
    return publish("hcoll_comm_from_mpi", s, std::move(comm), out);
  });
}

HCOLL_API hcoll_status_t hcoll_comm_destroy(hcoll_comm_t comm) {
  return guarded("hcoll_comm_destroy", [&] {
    std::shared_ptr<Runtime> rt;
    std::shared_ptr<Communicator> c;
    if (hcoll_status_t s = resolveComm("hcoll_comm_destroy", comm, &rt, &c); s != HCOLL_SUCCESS)
      return s;
    if (c == rt->world()) {
      return fail(HCOLL_ERR_INVALID_ARGUMENT,
                  "hcoll_comm_destroy: the world communicator is owned by the runtime");
    }
    // Invalidate first so no other thread submits through the handle while it drains.
    if (!commTable().remove(comm)) {
      return fail(HCOLL_ERR_INVALID_HANDLE, "hcoll_comm_destroy: comm was destroyed concurrently");
    }
    return toC(rt->destroy(c));
  });
}

HCOLL_API hcoll_status_t hcoll_comm_set_timeout(hcoll_comm_t comm, double seconds) {
  return guarded("hcoll_comm_set_timeout", [&] {
    std::shared_ptr<Runtime> rt;
    std::shared_ptr<Communicator> c;
    if (hcoll_status_t s = resolveComm("hcoll_comm_set_timeout", comm, &rt, &c);
        s != HCOLL_SUCCESS)
      return s;
    // A bad value on one rank still takes part (as a refusal), so that the other ranks fail
    // with MISMATCH instead of waiting for it.
    const bool valid = seconds >= 0 && seconds <= 1e6;  // false for NaN too
    hcoll::Status s = rt->setTimeout(*c, valid ? seconds : -1.0);
    if (!valid) {
      return fail(HCOLL_ERR_INVALID_ARGUMENT,
                  "hcoll_comm_set_timeout: seconds must be in [0, 1e6] (0 = never)");
    }
    if (!s.isOk()) return toC(hcoll::Status(s.code(), "hcoll_comm_set_timeout: " + s.message()));
    return HCOLL_SUCCESS;
  });
}

HCOLL_API hcoll_status_t hcoll_comm_rank(hcoll_comm_t comm, int* out) {
  return guarded("hcoll_comm_rank", [&] {
    return query("hcoll_comm_rank", comm, out, [](const Communicator& c) { return c.rank(); });
  });
}

HCOLL_API hcoll_status_t hcoll_comm_size(hcoll_comm_t comm, int* out) {
  return guarded("hcoll_comm_size", [&] {
    return query("hcoll_comm_size", comm, out, [](const Communicator& c) { return c.size(); });
  });
}

HCOLL_API hcoll_status_t hcoll_comm_local_rank(hcoll_comm_t comm, int* out) {
  return guarded("hcoll_comm_local_rank", [&] {
    return query("hcoll_comm_local_rank", comm, out,
                 [](const Communicator& c) { return c.localRank(); });
  });
}

HCOLL_API hcoll_status_t hcoll_comm_local_size(hcoll_comm_t comm, int* out) {
  return guarded("hcoll_comm_local_size", [&] {
    return query("hcoll_comm_local_size", comm, out,
                 [](const Communicator& c) { return c.localSize(); });
  });
}

HCOLL_API hcoll_status_t hcoll_comm_stats(hcoll_comm_t comm, hcoll_comm_stats_t* stats) {
  return guarded("hcoll_comm_stats", [&] {
    std::shared_ptr<Runtime> rt;
    std::shared_ptr<Communicator> c;
    if (hcoll_status_t s = resolveComm("hcoll_comm_stats", comm, &rt, &c); s != HCOLL_SUCCESS)
      return s;
    if (stats == nullptr)
      return fail(HCOLL_ERR_INVALID_ARGUMENT, "hcoll_comm_stats: stats is NULL");
    if (stats->mask & ~HCOLL_COMM_STATS_FIELD_ALL) {
      return fail(HCOLL_ERR_INVALID_ARGUMENT,
                  "hcoll_comm_stats: stats->mask has bits this library does not know");
    }
    auto snap = c->stats();
    const uint64_t m = stats->mask;
    if (m & HCOLL_COMM_STATS_FIELD_CYCLES) stats->cycles = snap.cycles;
    if (m & HCOLL_COMM_STATS_FIELD_SLOW_PATH) stats->slow_path_negotiations = snap.slowPath;
    if (m & HCOLL_COMM_STATS_FIELD_CACHE_HITS) stats->cache_hits = snap.cacheHits;
    if (m & HCOLL_COMM_STATS_FIELD_BACKEND_CALLS) stats->backend_calls = snap.backendCalls;
    if (m & HCOLL_COMM_STATS_FIELD_FUSED_TENSORS) stats->fused_tensors = snap.fusedTensors;
    if (m & HCOLL_COMM_STATS_FIELD_BYTES) stats->bytes = snap.bytes;
    if (m & HCOLL_COMM_STATS_FIELD_QUEUE_DEPTH) stats->queue_depth = snap.queueDepth;
    if (m & HCOLL_COMM_STATS_FIELD_CALLER_ROUNDS) stats->caller_rounds = snap.callerRounds;
    if (m & HCOLL_COMM_STATS_FIELD_FOLDED) stats->folded = snap.foldedOps;
    return HCOLL_SUCCESS;
  });
}

}  // extern "C"
