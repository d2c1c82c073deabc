// Communicators: split (odd/even, key order, HCOLL_UNDEFINED), create (subset, differing lists,
// bad lists), from_mpi, destroy and recreate, two communicators driven from two user threads,
// rank/size/local_rank/local_size.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "support/test_util.h"

using namespace htest;

namespace {

// Sum-allreduce of one int64 per rank on `comm`; returns the sum.
int64_t sumOn(hcoll_comm_t comm, int64_t mine, const char* name = nullptr) {
  Tensor t(HCOLL_INT64, {1});
  t.set(0, static_cast<double>(mine));
  auto d = t.desc();
  hcoll_request_t req;
  REQUIRE(hcoll_allreduce(comm, name, &d, &d, HCOLL_SUM, 1.0, 1.0, &req) == HCOLL_SUCCESS);
  REQUIRE(waitAndFree(req) == HCOLL_SUCCESS);
  return static_cast<int64_t>(t.get(0));
}

}  // namespace

TEST_CASE("comm: world rank and size agree with MPI", "[comm]") {
  int mpiRank, mpiSize;
  MPI_Comm_rank(MPI_COMM_WORLD, &mpiRank);
  MPI_Comm_size(MPI_COMM_WORLD, &mpiSize);
  REQUIRE(worldRank() == mpiRank);
  REQUIRE(worldSize() == mpiSize);
  int lr = -1, ls = -1;
  HCOLL_REQUIRE_OK(hcoll_comm_local_rank(world(), &lr));
  HCOLL_REQUIRE_OK(hcoll_comm_local_size(world(), &ls));
  // Every test runs on one node.
  REQUIRE(ls == mpiSize);
  REQUIRE(lr == mpiRank);
}

TEST_CASE("comm: split into odd and even ranks, key reverses order", "[comm][split]") {
  const int r = worldRank();
  const int n = worldSize();
  hcoll_comm_t sub = HCOLL_COMM_NULL;
  HCOLL_REQUIRE_OK(hcoll_comm_split(world(), r % 2, -r, &sub));
  REQUIRE(sub != HCOLL_COMM_NULL);
  int expectSize = 0, expectRank = 0;
  for (int k = 0; k < n; ++k) {
    if (k % 2 != r % 2) continue;
    ++expectSize;
    if (k > r) ++expectRank;  // key -k: higher world ranks come first
  }
  REQUIRE(sizeOf(sub) == expectSize);
  REQUIRE(rankOf(sub) == expectRank);
  int lr = -1, ls = -1;
  HCOLL_REQUIRE_OK(hcoll_comm_local_rank(sub, &lr));
  HCOLL_REQUIRE_OK(hcoll_comm_local_size(sub, &ls));
  REQUIRE(ls == expectSize);
  REQUIRE(lr == expectRank);
  int64_t want = 0;
  for (int k = r % 2; k < n; k += 2) want += k;
  REQUIRE(sumOn(sub, r, "split.sum") == want);
  // The colour group, gathered in its rank order, is exactly the world ranks of my parity from
  // the highest down (at 3 ranks: {2, 0} and {1}; at 4: {2, 0} and {3, 1}).
  std::vector<int64_t> group;
  for (int k = n - 1; k >= 0; --k) {
    if (k % 2 == r % 2) group.push_back(k);
  }
  Tensor mine(HCOLL_INT64, {1});
  mine.set(0, r);
  auto md = mine.desc();
  hcoll_request_t gather;
  HCOLL_REQUIRE_OK(hcoll_allgather(sub, "split.members", &md, &gather));
  HCOLL_REQUIRE_OK(hcoll_wait(gather, 30));
  hcoll_tensor_t members;
  HCOLL_REQUIRE_OK(hcoll_request_output(gather, 0, &members));
  REQUIRE(members.shape[0] == static_cast<int64_t>(group.size()));
  for (size_t k = 0; k < group.size(); ++k) REQUIRE(outputElement(members, k) == group[k]);
  HCOLL_REQUIRE_OK(hcoll_request_free(gather));
  // The parent keeps working alongside.
  REQUIRE(sumOn(world(), 1, "split.world") == n);
  HCOLL_REQUIRE_OK(hcoll_comm_destroy(sub));
}

TEST_CASE("comm: split with HCOLL_UNDEFINED gives NULL", "[comm][split]") {
  const int r = worldRank();
  const int n = worldSize();
  hcoll_comm_t sub = reinterpret_cast<hcoll_comm_t>(0x1);
  HCOLL_REQUIRE_OK(hcoll_comm_split(world(), r == 0 ? HCOLL_UNDEFINED : 7, r, &sub));
  if (r == 0) {
    REQUIRE(sub == HCOLL_COMM_NULL);
  } else {
    REQUIRE(sub != HCOLL_COMM_NULL);
    REQUIRE(sizeOf(sub) == n - 1);
    REQUIRE(rankOf(sub) == r - 1);
    REQUIRE(sumOn(sub, 1) == n - 1);
    HCOLL_REQUIRE_OK(hcoll_comm_destroy(sub));
  }
  REQUIRE(sumOn(world(), r) == n * (n - 1) / 2);
}

TEST_CASE("comm: create a subset; ranks outside get NULL and continue", "[comm][create]") {
  const int r = worldRank();
  const int n = worldSize();
  // The last ranks first: new rank i is parent rank list[i].
  std::vector<int> list;
  for (int k = n - 1; k >= 1; --k) list.push_back(k);
  hcoll_comm_t sub = reinterpret_cast<hcoll_comm_t>(0x1);
  HCOLL_REQUIRE_OK(hcoll_comm_create(world(), list.data(), static_cast<int>(list.size()), &sub));
  if (r == 0) {
    REQUIRE(sub == HCOLL_COMM_NULL);
    // Not blocked by the members: world ops from here are matched once they come back.
    REQUIRE(sumOn(world(), 5, "create.world") == 5 * n);
  } else {
    REQUIRE(sub != HCOLL_COMM_NULL);
    REQUIRE(sizeOf(sub) == n - 1);
    REQUIRE(rankOf(sub) == n - 1 - r);
    for (int iter = 0; iter < 3; ++iter) REQUIRE(sumOn(sub, r) == n * (n - 1) / 2);
    REQUIRE(sumOn(world(), 5, "create.world") == 5 * n);
    HCOLL_REQUIRE_OK(hcoll_comm_destroy(sub));
  }
}

TEST_CASE("comm: ranks outside a stalled subset are untouched and not blocked", "[comm][create]") {
  const int r = worldRank();
  const int n = worldSize();
  if (n < 3) return;  // needs a rank outside a two-member subset
  // Members {1, 2}; rank 1 submits "stalled" at once, rank 2 only after a world barrier that the
  // outside ranks join once their own work is done. So everything the outside ranks do below
  // happens while the subset has an operation in flight that cannot complete.
  const int list[] = {1, 2};
  hcoll_comm_t sub = HCOLL_COMM_NULL, self = HCOLL_COMM_NULL;
  HCOLL_REQUIRE_OK(hcoll_comm_create(world(), list, 2, &sub));
  HCOLL_REQUIRE_OK(hcoll_comm_split(world(), r, 0, &self));  // every rank alone
  REQUIRE(sizeOf(self) == 1);
  const bool member = r == 1 || r == 2;
  REQUIRE((sub != HCOLL_COMM_NULL) == member);
  Tensor stalled(HCOLL_INT32, {4});
  for (int i = 0; i < 4; ++i) stalled.set(i, 10 * r + i);
  auto sd = stalled.desc();
  hcoll_request_t stalledReq = HCOLL_REQUEST_NULL, barrier;
  if (r == 1) {
    HCOLL_REQUIRE_OK(hcoll_allreduce(sub, "stalled", &sd, &sd, HCOLL_SUM, 1, 1, &stalledReq));
  }
  if (!member) {
    // Independent work on a self communicator, under the same name the subset is stuck on.
    // A sentinel buffer this rank never submits stays as it is.
    Tensor sentinel(HCOLL_INT32, {4});
    for (int i = 0; i < 4; ++i) sentinel.set(i, -7 - i);
    for (int iter = 0; iter < 5; ++iter) {
      auto d = stalled.desc();
      hcoll_request_t req;
      HCOLL_REQUIRE_OK(hcoll_allreduce(self, "stalled", &d, &d, HCOLL_SUM, 1, 1, &req));
      HCOLL_REQUIRE_OK(waitAndFree(req, 10));
      Tensor b(HCOLL_FLOAT32, {3});
      for (int i = 0; i < 3; ++i) b.set(i, r + i);
      auto bd = b.desc();
      HCOLL_REQUIRE_OK(hcoll_broadcast(self, "self.bc", &bd, 0, &req));
      HCOLL_REQUIRE_OK(waitAndFree(req, 10));
      for (int i = 0; i < 3; ++i) REQUIRE(b.get(i) == r + i);
    }
    for (int i = 0; i < 4; ++i) REQUIRE(stalled.get(i) == 10 * r + i);  // a sum over one rank
    for (int i = 0; i < 4; ++i) REQUIRE(sentinel.get(i) == -7 - i);
  }
  if (r == 1) REQUIRE(hcoll_test(stalledReq) == HCOLL_IN_PROGRESS);  // rank 2 has not submitted
  HCOLL_REQUIRE_OK(hcoll_barrier(world(), &barrier));
  HCOLL_REQUIRE_OK(waitAndFree(barrier));
  if (r == 2) {
    HCOLL_REQUIRE_OK(hcoll_allreduce(sub, "stalled", &sd, &sd, HCOLL_SUM, 1, 1, &stalledReq));
  }
  if (member) {
    HCOLL_REQUIRE_OK(waitAndFree(stalledReq));
    for (int i = 0; i < 4; ++i) REQUIRE(stalled.get(i) == 30 + 2 * i);
    HCOLL_REQUIRE_OK(hcoll_comm_destroy(sub));
  } else {
    for (int i = 0; i < 4; ++i) REQUIRE(stalled.get(i) == 10 * r + i);
  }
  HCOLL_REQUIRE_OK(hcoll_comm_destroy(self));
  REQUIRE(sumOn(world(), 1, "outside.after") == n);
}

TEST_CASE("comm: create with lists that differ across ranks is MISMATCH everywhere", "[comm][create]") {
  const int r = worldRank();
  const int n = worldSize();
  std::vector<int> list = {0};
  if (r == 0 && n > 1) list.push_back(1);
  hcoll_comm_t sub = HCOLL_COMM_NULL;
  hcoll_status_t s = hcoll_comm_create(world(), list.data(), static_cast<int>(list.size()), &sub);
  REQUIRE(s == HCOLL_ERR_MISMATCH);
  REQUIRE(sub == HCOLL_COMM_NULL);
  std::string msg = hcoll_last_error();
  INFO(msg);
  REQUIRE(msg.find("rank list") != std::string::npos);
  // The world keeps working.
  REQUIRE(sumOn(world(), 1) == n);
}

TEST_CASE("comm: create with duplicates or out-of-range ranks is INVALID_ARGUMENT", "[comm][create]") {
  const int n = worldSize();
  hcoll_comm_t sub = HCOLL_COMM_NULL;
  int dup[] = {0, 0};
  REQUIRE(hcoll_comm_create(world(), dup, 2, &sub) == HCOLL_ERR_INVALID_ARGUMENT);
  REQUIRE(std::string(hcoll_last_error()).size() > 0);
  int out[] = {0, n};
  REQUIRE(hcoll_comm_create(world(), out, 2, &sub) == HCOLL_ERR_INVALID_ARGUMENT);
  REQUIRE(std::string(hcoll_last_error()).size() > 0);
  int neg[] = {-1};
  REQUIRE(hcoll_comm_create(world(), neg, 1, &sub) == HCOLL_ERR_INVALID_ARGUMENT);
  REQUIRE(hcoll_comm_create(world(), dup, 0, &sub) == HCOLL_ERR_INVALID_ARGUMENT);
  REQUIRE(hcoll_comm_create(world(), nullptr, 1, &sub) == HCOLL_ERR_INVALID_ARGUMENT);
  REQUIRE(hcoll_comm_create(world(), dup, 1, nullptr) == HCOLL_ERR_INVALID_ARGUMENT);
  REQUIRE(sub == HCOLL_COMM_NULL);
  REQUIRE(sumOn(world(), 2) == 2 * n);
}

TEST_CASE("comm: from_mpi wraps a duplicate of MPI_COMM_WORLD", "[comm][mpi]") {
  const int n = worldSize();
  hcoll_comm_t c = HCOLL_COMM_NULL;
  HCOLL_REQUIRE_OK(hcoll_comm_from_mpi(static_cast<int>(MPI_Comm_c2f(MPI_COMM_WORLD)), &c));
  REQUIRE(c != HCOLL_COMM_NULL);
  REQUIRE(sizeOf(c) == n);
  REQUIRE(rankOf(c) == worldRank());
  REQUIRE(sumOn(c, worldRank() + 1) == n * (n + 1) / 2);
  // The caller's communicator still works for plain MPI.
  int one = 1, total = 0;
  REQUIRE(MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS);
  REQUIRE(total == n);
  HCOLL_REQUIRE_OK(hcoll_comm_destroy(c));
  // A split MPI communicator works too.
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, worldRank() % 2, 0, &half);
  int halfSize;
  MPI_Comm_size(half, &halfSize);
  HCOLL_REQUIRE_OK(hcoll_comm_from_mpi(static_cast<int>(MPI_Comm_c2f(half)), &c));
  REQUIRE(sizeOf(c) == halfSize);
  REQUIRE(sumOn(c, 1) == halfSize);
  HCOLL_REQUIRE_OK(hcoll_comm_destroy(c));
  MPI_Comm_free(&half);
  // A rank left out of an MPI communicator holds MPI_COMM_NULL: it is not a member.
  c = HCOLL_COMM_NULL;
  REQUIRE(hcoll_comm_from_mpi(static_cast<int>(MPI_Comm_c2f(MPI_COMM_NULL)), &c) ==
          HCOLL_ERR_NOT_MEMBER);
  REQUIRE(std::string(hcoll_last_error()).find("not a member") != std::string::npos);
  REQUIRE(c == HCOLL_COMM_NULL);
}

TEST_CASE("comm: destroy, then the handle is invalid; recreate works", "[comm]") {
  const int n = worldSize();
  for (int iter = 0; iter < 3; ++iter) {
    hcoll_comm_t sub = HCOLL_COMM_NULL;
    HCOLL_REQUIRE_OK(hcoll_comm_split(world(), 0, 0, &sub));
    REQUIRE(sumOn(sub, iter) == iter * n);
    HCOLL_REQUIRE_OK(hcoll_comm_destroy(sub));
    int x;
    REQUIRE(hcoll_comm_size(sub, &x) == HCOLL_ERR_INVALID_HANDLE);
    REQUIRE(hcoll_comm_destroy(sub) == HCOLL_ERR_INVALID_HANDLE);
    Tensor t(HCOLL_INT32, {1});
    auto d = t.desc();
    hcoll_request_t req;
    REQUIRE(hcoll_allreduce(sub, nullptr, &d, &d, HCOLL_SUM, 1, 1, &req) == HCOLL_ERR_INVALID_HANDLE);
    REQUIRE(std::string(hcoll_last_error()).size() > 0);
  }
  // The world cannot be destroyed.
  REQUIRE(hcoll_comm_destroy(world()) == HCOLL_ERR_INVALID_ARGUMENT);
  REQUIRE(sumOn(world(), 1) == n);
}

// Each communicator on one node reserves shared-memory lanes (the MPI backend, mpi_shm.h) within
// a budget per process; the communicators made beyond it must agree to use MPI alone, and every
// one computes right. Then, all destroyed, new ones get lanes again (nothing leaked).
TEST_CASE("comm: more communicators than the lanes' budget all compute right", "[comm][lanes]") {
  const int r = worldRank();
  const int n = worldSize();
  for (int round = 0; round < 2; ++round) {
    std::vector<hcoll_comm_t> comms(40, HCOLL_COMM_NULL);  // 40 x 1 MiB on 2 ranks > 32 MiB
    for (auto& c : comms) HCOLL_REQUIRE_OK(hcoll_comm_split(world(), 0, 0, &c));
    for (size_t i = 0; i < comms.size(); ++i) {
      const int root = static_cast<int>(i) % n;
      Tensor t(HCOLL_UINT8, {300001});
      for (int64_t k = 0; k < t.elements(); ++k) t.set(k, r == root ? (k + i) % 251 : 255);
      auto d = t.desc();
      hcoll_request_t req;
      HCOLL_REQUIRE_OK(hcoll_broadcast(comms[i], "bc", &d, root, &req));
      HCOLL_REQUIRE_OK(waitAndFree(req));
      int64_t wrong = 0;
      for (int64_t k = 0; k < t.elements(); ++k) wrong += t.get(k) != (k + i) % 251;
      INFO("round " << round << " communicator " << i);
      REQUIRE(wrong == 0);
    }
    for (auto& c : comms) HCOLL_REQUIRE_OK(hcoll_comm_destroy(c));
  }
}

TEST_CASE("comm: destroy drains operations every rank submitted", "[comm]") {
  const int n = worldSize();
  hcoll_comm_t sub = HCOLL_COMM_NULL;
  HCOLL_REQUIRE_OK(hcoll_comm_split(world(), 0, 0, &sub));
  Tensor t(HCOLL_INT32, {4});
  for (int i = 0; i < 4; ++i) t.set(i, i);
  auto d = t.desc();
  hcoll_request_t req;
  HCOLL_REQUIRE_OK(hcoll_allreduce(sub, "drain", &d, &d, HCOLL_SUM, 1, 1, &req));
  HCOLL_REQUIRE_OK(hcoll_comm_destroy(sub));
  HCOLL_REQUIRE_OK(waitAndFree(req));
  for (int i = 0; i < 4; ++i) REQUIRE(t.get(i) == n * i);
}

TEST_CASE("comm: two communicators driven concurrently from two threads", "[comm][threads]") {
  const int r = worldRank();
  const int n = worldSize();
  hcoll_comm_t a = HCOLL_COMM_NULL, b = HCOLL_COMM_NULL;
  HCOLL_REQUIRE_OK(hcoll_comm_split(world(), 0, r, &a));
  HCOLL_REQUIRE_OK(hcoll_comm_split(world(), 0, -r, &b));
  constexpr int kIters = 40;
  // Catch2 assertions are not thread-safe: threads record failures, the main thread checks.
  std::vector<int> wrong(2, 0);
  auto drive = [&](hcoll_comm_t c, int which) {
    for (int it = 0; it < kIters; ++it) {
      Tensor t(HCOLL_INT32, {8});
      for (int i = 0; i < 8; ++i) t.set(i, r + i + it + which);
      auto d = t.desc();
      hcoll_request_t req;
      std::string name = "thr." + std::to_string(it % 4);
      if (hcoll_allreduce(c, name.c_str(), &d, &d, HCOLL_SUM, 1, 1, &req) != HCOLL_SUCCESS ||
          waitAndFree(req) != HCOLL_SUCCESS) {
        ++wrong[which];
        return;
      }
      for (int i = 0; i < 8; ++i) wrong[which] += t.get(i) != n * (n - 1) / 2 + n * (i + it + which);
    }
  };
  std::thread ta(drive, a, 0), tb(drive, b, 1);
  ta.join();
  tb.join();
  REQUIRE(wrong[0] == 0);
  REQUIRE(wrong[1] == 0);
  HCOLL_REQUIRE_OK(hcoll_comm_destroy(a));
  HCOLL_REQUIRE_OK(hcoll_comm_destroy(b));
}

TEST_CASE("comm: split and create and destroy while another communicator has ops in flight",
          "[comm][threads][create]") {
  const int r = worldRank();
  const int n = worldSize();
  hcoll_comm_t a = HCOLL_COMM_NULL;
  HCOLL_REQUIRE_OK(hcoll_comm_split(world(), 0, r, &a));
  // A user thread loops verified allreduces on `a` until every rank's main thread has finished
  // its create/destroy loop. Element 8 carries "my main thread is done" (0/1); its SUM reaching
  // N stops all ranks in the same iteration, so the loops overlap whatever the timing.
  std::atomic<bool> mainDone{false};
  std::atomic<int> iters{0};
  int wrong = 0;
  std::thread driver([&] {
    for (int it = 0;; ++it) {
      Tensor t(HCOLL_INT32, {9});
      for (int i = 0; i < 8; ++i) t.set(i, r + i + it);
      t.set(8, it >= 2 && mainDone.load() ? 1 : 0);
      auto d = t.desc();
      hcoll_request_t req;
      const std::string name = "busy." + std::to_string(it % 3);
      if (hcoll_allreduce(a, name.c_str(), &d, &d, HCOLL_SUM, 1, 1, &req) != HCOLL_SUCCESS ||
          waitAndFree(req) != HCOLL_SUCCESS) {
        ++wrong;
        return;
      }
      for (int i = 0; i < 8; ++i) wrong += t.get(i) != n * (n - 1) / 2 + n * (i + it);
      iters.store(it + 1);
      if (t.get(8) == n) return;
    }
  });
  while (iters.load() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // Catch2 assertions are not thread-safe: the main thread counts failures while the driver runs.
  int mainWrong = 0;
  std::vector<int> reversed;
  for (int k = n - 1; k >= 0; --k) reversed.push_back(k);
  for (int iter = 0; iter < 4; ++iter) {
    hcoll_comm_t half = HCOLL_COMM_NULL, all = HCOLL_COMM_NULL;
    mainWrong += hcoll_comm_split(world(), r % 2, r, &half) != HCOLL_SUCCESS;
    mainWrong += hcoll_comm_create(world(), reversed.data(), n, &all) != HCOLL_SUCCESS;
    if (half == HCOLL_COMM_NULL || all == HCOLL_COMM_NULL) break;
    mainWrong += rankOf(all) != n - 1 - r;
    Tensor t(HCOLL_INT64, {2});
    t.set(0, r);
    t.set(1, iter);
    auto d = t.desc();
    hcoll_request_t q1 = HCOLL_REQUEST_NULL, q2 = HCOLL_REQUEST_NULL;
    mainWrong += hcoll_allreduce(half, "churn", &d, &d, HCOLL_SUM, 1, 1, &q1) != HCOLL_SUCCESS;
    mainWrong += waitAndFree(q1) != HCOLL_SUCCESS;
    // The half of world rank k sums the ranks of k's parity, and has that many members.
    auto halfSum = [&](int k) {
      int64_t s = 0;
      for (int j = k % 2; j < n; j += 2) s += j;
      return s;
    };
    auto halfSize = [&](int k) { return static_cast<int64_t>((n - k % 2 + 1) / 2); };
    mainWrong += t.get(0) != halfSum(r) || t.get(1) != halfSize(r) * iter;
    // Then `all` sums what each rank holds now.
    mainWrong += hcoll_allreduce(all, "churn", &d, &d, HCOLL_SUM, 1, 1, &q2) != HCOLL_SUCCESS;
    mainWrong += waitAndFree(q2) != HCOLL_SUCCESS;
    int64_t want0 = 0, want1 = 0;
    for (int k = 0; k < n; ++k) {
      want0 += halfSum(k);
      want1 += halfSize(k) * iter;
    }
    mainWrong += t.get(0) != want0 || t.get(1) != want1;
    mainWrong += hcoll_comm_destroy(half) != HCOLL_SUCCESS;
    mainWrong += hcoll_comm_destroy(all) != HCOLL_SUCCESS;
  }
  const int busyBefore = iters.load();
  mainDone.store(true);
  driver.join();
  INFO("driver iterations: " << busyBefore << " while the main thread churned, " << iters.load()
                             << " in all");
  REQUIRE(mainWrong == 0);
  REQUIRE(wrong == 0);
  REQUIRE(iters.load() > busyBefore);  // the driver was still running when the churn ended
  HCOLL_REQUIRE_OK(hcoll_comm_destroy(a));
}
