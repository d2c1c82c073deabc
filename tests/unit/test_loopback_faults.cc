// The loopback backend when ranks misbehave: a rank that never arrives leaves its peers'
// Pendings unfinished (never a crash, never a read of freed memory: run under ASan), Pendings
// outlive their channels, mismatched calls fail on every rank, notices reach the peers, and a
// split a rank left before joining fails instead of hanging.
#include "loopback_harness.h"

using namespace htest::loopback;

namespace {

// Polls `p` a few times over ~50 ms; true if it finished.
bool finishesSoon(hcoll::backends::Pending& p, Status* s) {
  return drive(p, s, 0.05);
}

}  // namespace

TEST_CASE("loopback: a rank that never arrives leaves the others unfinished", "[loopback]") {
  Channels world = makeWorld(3);
  std::vector<float> a(64, 1.f), b(64, 2.f);
  auto p0 = world[0]->allreduce(nullptr, a.data(), a.size(), DataType::kFloat32, ReduceOp::kSum);
  auto p1 = world[1]->allreduce(nullptr, b.data(), b.size(), DataType::kFloat32, ReduceOp::kSum);
  auto c0 = world[0]->allreduceBitsAnd(nullptr, 0);
  Status s;
  CHECK_FALSE(finishesSoon(*p0, &s));
  CHECK_FALSE(finishesSoon(*p1, &s));
  CHECK_FALSE(finishesSoon(*c0, &s));
  CHECK(a[0] == 1.f);  // nothing written
  CHECK(b[0] == 2.f);
  // Everything can be destroyed in any order: Pendings first, then channels; or the reverse.
  p0.reset();
  world.clear();
  CHECK_FALSE(finishesSoon(*p1, &s));
  p1.reset();
  c0.reset();
}

TEST_CASE("loopback: a late rank never reads the buffers of peers that withdrew", "[loopback]") {
  Channels world = makeWorld(3);
  {
    // Ranks 0 and 1 publish buffers, give up (their Pendings are destroyed) and free them.
    std::vector<double> a(1000, 1.0), b(1000, 2.0);
    auto p0 = world[0]->allreduce(nullptr, a.data(), a.size(), DataType::kFloat64, ReduceOp::kSum);
    auto p1 = world[1]->allreduce(nullptr, b.data(), b.size(), DataType::kFloat64, ReduceOp::kSum);
    Status s;
    CHECK_FALSE(finishesSoon(*p0, &s));
  }
  // Rank 2 arrives at round 0 afterwards: the round is broken and never completes.
  std::vector<double> c(1000, 3.0);
  auto p2 = world[2]->allreduce(nullptr, c.data(), c.size(), DataType::kFloat64, ReduceOp::kSum);
  Status s;
  CHECK_FALSE(finishesSoon(*p2, &s));
  CHECK(c[0] == 3.0);
}

TEST_CASE("loopback: every rank arrived but one never reads", "[loopback]") {
  // Ranks 0 and 1 read and wait for rank 2 to have read their buffers; rank 2 never polls, then
  // withdraws. Ranks 0 and 1 stay unfinished: rank 2 might still have been reading.
  Channels world = makeWorld(3);
  std::vector<int32_t> v0(5, 1), v1(5, 1), v2(5, 1);
  auto p0 = world[0]->allreduce(nullptr, v0.data(), 5, DataType::kInt32, ReduceOp::kSum);
  auto p1 = world[1]->allreduce(nullptr, v1.data(), 5, DataType::kInt32, ReduceOp::kSum);
  auto p2 = world[2]->allreduce(nullptr, v2.data(), 5, DataType::kInt32, ReduceOp::kSum);
  Status s;
  CHECK_FALSE(finishesSoon(*p0, &s));
  CHECK_FALSE(finishesSoon(*p1, &s));
  CHECK(v0[0] == 1);  // nobody writes before everyone has read
  p2.reset();
  CHECK_FALSE(finishesSoon(*p0, &s));
  CHECK_FALSE(finishesSoon(*p1, &s));
}

TEST_CASE("loopback: Pendings outlive their channels", "[loopback]") {
  Channels world = makeWorld(2);
  std::vector<int64_t> a = {1, 2}, b = {10, 20};
  auto p0 = world[0]->allreduce(nullptr, a.data(), 2, DataType::kInt64, ReduceOp::kSum);
  auto p1 = world[1]->allreduce(nullptr, b.data(), 2, DataType::kInt64, ReduceOp::kSum);
  world.clear();
  std::vector<PendingPtr> both;
  both.push_back(std::move(p0));
  both.push_back(std::move(p1));
  std::vector<Status> statuses;
  REQUIRE(driveAll(both, &statuses, 5));
  CHECK(statuses[0].isOk());
  CHECK(a == std::vector<int64_t>{11, 22});
  CHECK(b == std::vector<int64_t>{11, 22});
}

TEST_CASE("loopback: mismatched calls fail on every rank", "[loopback]") {
  Channels world = makeWorld(2);
  std::vector<float> a(4), b(5);
  auto check = [&](PendingPtr p0, PendingPtr p1, const char* what) {
    INFO(what);
    std::vector<PendingPtr> both;
    both.push_back(std::move(p0));
    both.push_back(std::move(p1));
    std::vector<Status> statuses;
    REQUIRE(driveAll(both, &statuses, 5));
    CHECK(statuses[0].code() == Code::kBackend);
    CHECK(statuses[1].code() == Code::kBackend);
    CHECK_FALSE(statuses[0].message().empty());
  };
  check(world[0]->allreduce(nullptr, a.data(), 4, DataType::kFloat32, ReduceOp::kSum),
        world[1]->allreduce(nullptr, b.data(), 5, DataType::kFloat32, ReduceOp::kSum), "count");
  check(world[0]->allreduce(nullptr, a.data(), 4, DataType::kFloat32, ReduceOp::kSum),
        world[1]->broadcast(b.data(), 16, 0), "kind");
  check(world[0]->broadcast(a.data(), 4, 2), world[1]->broadcast(b.data(), 4, 2), "root");
  check(world[0]->alltoallv(a.data(), {4, 4}, b.data(), {4, 4}),
        world[1]->alltoallv(a.data(), {4, 8}, b.data(), {4, 4}), "alltoall sizes");
  // The communicator keeps working after a failed round.
  a = {1, 1, 1, 1};
  b = {2, 2, 2, 2, 0};
  std::vector<PendingPtr> both;
  both.push_back(world[0]->allreduce(nullptr, a.data(), 4, DataType::kFloat32, ReduceOp::kMax));
  both.push_back(world[1]->allreduce(nullptr, b.data(), 4, DataType::kFloat32, ReduceOp::kMax));
  std::vector<Status> statuses;
  REQUIRE(driveAll(both, &statuses, 5));
  CHECK(statuses[0].isOk());
  CHECK(a[3] == 2.f);
}

TEST_CASE("loopback notices reach every other member", "[loopback]") {
  Channels world = makeWorld(3);
  world[1]->signals().sendNotice(PeerSignals::NoticeKind::kGone, Code::kTimeout, "gave up");
  world[2]->signals().sendNotice(PeerSignals::NoticeKind::kClosing, Code::kShutDown, "closing");
  PeerSignals::Notice n;
  REQUIRE(world[0]->signals().pollNotice(&n));
  CHECK(n.rank == 1);
  CHECK(n.kind == PeerSignals::NoticeKind::kGone);
  CHECK(n.code == Code::kTimeout);
  CHECK(n.text == "gave up");
  REQUIRE(world[0]->signals().pollNotice(&n));
  CHECK(n.rank == 2);
  CHECK(n.kind == PeerSignals::NoticeKind::kClosing);
  CHECK_FALSE(world[0]->signals().pollNotice(&n));
  REQUIRE(world[1]->signals().pollNotice(&n));  // rank 1 sees rank 2's, not its own
  CHECK(n.rank == 2);
  CHECK_FALSE(world[1]->signals().pollNotice(&n));
  REQUIRE(world[2]->signals().pollNotice(&n));
  CHECK(n.rank == 1);
  CHECK_FALSE(world[2]->signals().pollNotice(&n));
}

TEST_CASE("loopback split fails when a rank left before joining it", "[loopback]") {
  Channels world = makeWorld(3);
  world[2].reset();
  world.pop_back();
  runRanks(world, [&](int, Channel& ch, RankLog& log) {
    std::unique_ptr<Channel> out;
    const Status s = ch.split(0, 0, &out);
    log.check(s.code() == Code::kShutDown, "split: " + s.message());
    log.check(!out, "got a channel");
  });
}
