// Emulated multi-node runs: MPICH's MPIR_CVAR_NUM_CLIQUES=2 makes the ranks of this one machine
// look like two nodes (MPICH 4.0 deals ranks out round-robin: odd and even ranks).
// local_rank/local_size must follow the emulated nodes on the world and on split communicators,
// and every collective must still compute the right values when MPI's algorithms turn
// node-aware. HCOLL_TEST_NODES says which layout the test was started with: "odd_even" (CTest
// sets it; without it, one node is expected).
#include <mpi.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "support/test_util.h"

using namespace htest;

namespace {

// The emulated node of world rank r at size n.
int nodeOf(int r, int n) {
  const char* layout = std::getenv("HCOLL_TEST_NODES");
  const std::string nodes = layout ? layout : "";
  if (nodes == "odd_even") return r % 2;
  return 0;
}

// Local rank and size of world rank r among the ranks of `members` (world ranks, in comm order).
void expectedLocal(const std::vector<int>& members, int me, int* localRank, int* localSize) {
  const int n = worldSize();
  *localRank = 0;
  *localSize = 0;
  for (int m : members) {
    if (nodeOf(m, n) != nodeOf(me, n)) continue;
    if (m == me) *localRank = *localSize;
    ++*localSize;
  }
}

int64_t sumOf(hcoll_comm_t comm, int64_t mine, const std::string& name) {
  Tensor t(HCOLL_INT64, {1});
  t.set(0, static_cast<double>(mine));
  auto d = t.desc();
  hcoll_request_t req;
  HCOLL_REQUIRE_OK(hcoll_allreduce(comm, name.c_str(), &d, &d, HCOLL_SUM, 1, 1, &req));
  REQUIRE(waitAndFree(req) == HCOLL_SUCCESS);
  return static_cast<int64_t>(t.get(0));
}

}  // namespace

TEST_CASE("nodes: local rank and size follow the emulated nodes", "[nodes]") {
  const int r = worldRank();
  const int n = worldSize();
  std::vector<int> all;
  for (int k = 0; k < n; ++k) all.push_back(k);
  int wantRank = 0, wantSize = 0;
  expectedLocal(all, r, &wantRank, &wantSize);
  int lr = -1, ls = -1;
  HCOLL_REQUIRE_OK(hcoll_comm_local_rank(world(), &lr));
  HCOLL_REQUIRE_OK(hcoll_comm_local_size(world(), &ls));
  // MPI's own view, as a cross-check that the environment took effect.
  MPI_Comm shared;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shared);
  int mpiLocalSize = 0;
  MPI_Comm_size(shared, &mpiLocalSize);
  MPI_Comm_free(&shared);
  INFO("rank " << r << " of " << n << ", layout " << ((std::getenv("HCOLL_TEST_NODES") ? std::getenv("HCOLL_TEST_NODES") : "one node")));
  REQUIRE(mpiLocalSize == wantSize);
  REQUIRE(ls == wantSize);
  REQUIRE(lr == wantRank);
  // Every rank agrees on the layout: the sum of local sizes over ranks is the sum of squares
  // of the node sizes.
  int64_t squares = 0;
  for (int node = 0; node < 2; ++node) {
    int64_t size = 0;
    for (int k = 0; k < n; ++k) size += nodeOf(k, n) == node ? 1 : 0;
    squares += size * size;
  }
  REQUIRE(sumOf(world(), ls, "nodes.local_size") == squares);
}

TEST_CASE("nodes: a split across the emulated nodes has its own local ranks", "[nodes]") {
  const int r = worldRank();
  const int n = worldSize();
  // Ranks 0 and n-1: on two nodes at an even size, on one at an odd size.
  const int ranks[2] = {0, n - 1};
  hcoll_comm_t sub = HCOLL_COMM_NULL;
  HCOLL_REQUIRE_OK(hcoll_comm_create(world(), ranks, n > 1 ? 2 : 1, &sub));
  if (r != 0 && r != n - 1) {
    REQUIRE(sub == HCOLL_COMM_NULL);
    return;
  }
  REQUIRE(sub != HCOLL_COMM_NULL);
  std::vector<int> members(ranks, ranks + (n > 1 ? 2 : 1));
  int wantRank = 0, wantSize = 0;
  expectedLocal(members, r, &wantRank, &wantSize);
  int lr = -1, ls = -1;
  HCOLL_REQUIRE_OK(hcoll_comm_local_rank(sub, &lr));
  HCOLL_REQUIRE_OK(hcoll_comm_local_size(sub, &ls));
  REQUIRE(ls == wantSize);
  REQUIRE(lr == wantRank);
  REQUIRE(sumOf(sub, r + 1, "nodes.sub") == (n > 1 ? n + 1 : 1));
  HCOLL_REQUIRE_OK(hcoll_comm_destroy(sub));
}

TEST_CASE("nodes: every collective is right across the emulated nodes", "[nodes]") {
  const int r = worldRank();
  const int n = worldSize();
  hcoll_request_t req;
  // allreduce, grouped and fused (two sizes so MPI may pick different algorithms)
  for (int64_t count : {7, 70000}) {
    Tensor a(HCOLL_FLOAT64, {count});
    for (int64_t i = 0; i < count; ++i) a.set(i, r + i % 5);
    auto d = a.desc();
    const std::string name = "nodes.ar." + std::to_string(count);
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), name.c_str(), &d, &d, HCOLL_SUM, 1, 1, &req));
    REQUIRE(waitAndFree(req) == HCOLL_SUCCESS);
    for (int64_t i = 0; i < count; i += count / 7) {
      REQUIRE(a.get(i) == n * (n - 1) / 2 + n * (i % 5));
    }
  }
  // allgather with a different dim0 per rank
  Tensor g(HCOLL_INT32, {r + 1, 2});
  for (int64_t i = 0; i < g.elements(); ++i) g.set(i, 100 * r + i);
  auto gd = g.desc();
  HCOLL_REQUIRE_OK(hcoll_allgather(world(), "nodes.ag", &gd, &req));
  REQUIRE(hcoll_wait(req, 30) == HCOLL_SUCCESS);
  hcoll_tensor_t out;
  HCOLL_REQUIRE_OK(hcoll_request_output(req, 0, &out));
  REQUIRE(out.shape[0] == n * (n + 1) / 2);
  int64_t at = 0;
  for (int k = 0; k < n; ++k) {
    for (int64_t i = 0; i < 2 * (k + 1); ++i) REQUIRE(outputElement(out, at++) == 100 * k + i);
  }
  HCOLL_REQUIRE_OK(hcoll_request_free(req));
  // broadcast from the last rank (on the other emulated node than rank 0 at an even size)
  Tensor b(HCOLL_INT64, {5});
  for (int64_t i = 0; i < 5; ++i) b.set(i, r == n - 1 ? 7 * i : -1);
  auto bd = b.desc();
  HCOLL_REQUIRE_OK(hcoll_broadcast(world(), "nodes.bc", &bd, n - 1, &req));
  REQUIRE(waitAndFree(req) == HCOLL_SUCCESS);
  for (int64_t i = 0; i < 5; ++i) REQUIRE(b.get(i) == 7 * i);
  // alltoall, even: element j of rank r's row block k is 1000 r + k
  Tensor t(HCOLL_INT32, {n, 3});
  for (int k = 0; k < n; ++k) {
    for (int j = 0; j < 3; ++j) t.set(k * 3 + j, 1000 * r + k);
  }
  auto td = t.desc();
  HCOLL_REQUIRE_OK(hcoll_alltoall(world(), "nodes.a2a", &td, nullptr, &req));
  REQUIRE(hcoll_wait(req, 30) == HCOLL_SUCCESS);
  HCOLL_REQUIRE_OK(hcoll_request_output(req, 0, &out));
  for (int k = 0; k < n; ++k) {
    for (int j = 0; j < 3; ++j) REQUIRE(outputElement(out, k * 3 + j) == 1000 * k + r);
  }
  HCOLL_REQUIRE_OK(hcoll_request_free(req));
  // reducescatter of n + 1 rows: rank 0 gets two
  Tensor s(HCOLL_FLOAT32, {n + 1});
  for (int64_t i = 0; i < n + 1; ++i) s.set(i, i + r);
  auto sd = s.desc();
  HCOLL_REQUIRE_OK(hcoll_reducescatter(world(), "nodes.rs", &sd, HCOLL_SUM, 1, 1, &req));
  REQUIRE(hcoll_wait(req, 30) == HCOLL_SUCCESS);
  HCOLL_REQUIRE_OK(hcoll_request_output(req, 0, &out));
  const int64_t first = r == 0 ? 0 : r + 1;
  REQUIRE(outputElements(out) == (r == 0 ? 2 : 1));
  for (int64_t i = 0; i < outputElements(out); ++i) {
    REQUIRE(outputElement(out, i) == n * (first + i) + n * (n - 1) / 2);
  }
  HCOLL_REQUIRE_OK(hcoll_request_free(req));
}
