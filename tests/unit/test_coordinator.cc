// Coordinator: readiness (all ranks, or all not-joined ranks for allreduce/barrier), first-
// announced order, validation messages naming the operation, the field and the ranks, join.
#include <catch2/catch.hpp>

#include <algorithm>

#include "runtime/coordinator.h"

using namespace hcoll;
using namespace hcoll::runtime;

namespace {

using Clock = Coordinator::Clock;

OpSpec spec(const std::string& name, OpKind kind = OpKind::kAllreduce,
            DataType dtype = DataType::kFloat32, std::vector<int64_t> shape = {4}) {
  OpSpec s;
  s.name = name;
  s.kind = kind;
  s.members = {MemberSpec{dtype, std::move(shape)}};
  return s;
}

void announce(Coordinator& c, int rank, std::vector<OpSpec> ops) {
  RequestList l;
  l.ops = std::move(ops);
  c.add(rank, std::move(l), Clock::now());
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("coordinator: an op is ready once every rank announced it", "[coordinator]") {
  Coordinator c(3);
  announce(c, 0, {spec("a")});
  announce(c, 2, {spec("a")});
  REQUIRE(c.takeReady().empty());
  REQUIRE(!c.empty());
  announce(c, 1, {spec("a")});
  auto ready = c.takeReady();
  REQUIRE(ready.size() == 1);
  REQUIRE(ready[0].error == Code::kSuccess);
  REQUIRE(ready[0].spec.name == "a");
  REQUIRE(c.empty());
  REQUIRE(c.takeReady().empty());  // taken once
}

TEST_CASE("coordinator: ready ops come out in first-announced order", "[coordinator]") {
  Coordinator c(2);
  announce(c, 0, {spec("z"), spec("m"), spec("a")});
  announce(c, 1, {spec("a"), spec("m"), spec("z")});
  auto ready = c.takeReady();
  REQUIRE(ready.size() == 3);
  REQUIRE(ready[0].spec.name == "z");
  REQUIRE(ready[1].spec.name == "m");
  REQUIRE(ready[2].spec.name == "a");
}

TEST_CASE("coordinator: allgather and alltoall responses carry per-rank dim0 and splits", "[coordinator]") {
  Coordinator c(2);
  OpSpec a = spec("ag", OpKind::kAllgather, DataType::kInt8, {2, 3});
  OpSpec b = spec("ag", OpKind::kAllgather, DataType::kInt8, {0, 3});
  OpSpec x = spec("x", OpKind::kAlltoall, DataType::kInt8, {5});
  x.splits = {1, 4};
  OpSpec y = spec("x", OpKind::kAlltoall, DataType::kInt8, {3});
  y.splits = {3, 0};
  announce(c, 0, {a, x});
  announce(c, 1, {b, y});
  auto ready = c.takeReady();
  REQUIRE(ready.size() == 2);
  REQUIRE(ready[0].error == Code::kSuccess);
  REQUIRE(ready[0].dim0PerRank == std::vector<int64_t>{2, 0});
  REQUIRE(ready[1].error == Code::kSuccess);
  REQUIRE(ready[1].splitMatrix == std::vector<int64_t>{1, 4, 3, 0});
}

TEST_CASE("coordinator: mismatch messages name op, field and ranks", "[coordinator]") {
  Coordinator c(3);
  auto check = [&](OpSpec base, auto mutate, const std::vector<std::string>& parts) {
    OpSpec other = base;
    mutate(other);
    announce(c, 0, {base});
    announce(c, 1, {base});
    announce(c, 2, {other});
    auto ready = c.takeReady();
    REQUIRE(ready.size() == 1);
    INFO(ready[0].errorMessage);
    REQUIRE(ready[0].error == Code::kMismatch);
    REQUIRE(has(ready[0].errorMessage, "'" + base.name + "'"));
    REQUIRE(has(ready[0].errorMessage, "rank 0"));
    REQUIRE(has(ready[0].errorMessage, "rank 2"));
    REQUIRE(!has(ready[0].errorMessage, "rank 1 "));  // rank 1 agrees with rank 0
    for (auto& p : parts) REQUIRE(has(ready[0].errorMessage, p));
  };
  check(spec("dt"), [](OpSpec& s) { s.members[0].dtype = DataType::kInt64; }, {"dtype", "float32", "int64"});
  check(spec("sh"), [](OpSpec& s) { s.members[0].shape = {5}; }, {"shape"});
  check(spec("op"), [](OpSpec& s) { s.op = ReduceOp::kMin; }, {"reduce op"});
  check(spec("pre"), [](OpSpec& s) { s.prescale = 2; }, {"prescale", "2"});
  check(spec("post"), [](OpSpec& s) { s.postscale = 0.5; }, {"postscale", "0.5"});
  check(spec("kind"), [](OpSpec& s) { s.kind = OpKind::kBroadcast; }, {"kind"});
  check(spec("grp"), [](OpSpec& s) { s.members.push_back(s.members[0]); }, {"group size", "1", "2"});
  check(spec("mem"),
        [](OpSpec& s) {
          s.members.push_back(s.members[0]);
          s.members[1].dtype = DataType::kInt8;
        },
        {"group size"});
  OpSpec two = spec("mem2");
  two.members.push_back(two.members[0]);
  check(two, [](OpSpec& s) { s.members[1].shape = {9}; }, {"member 1", "shape"});
  check(spec("root", OpKind::kBroadcast), [](OpSpec& s) { s.root = 1; }, {"root"});
  check(spec("agrow", OpKind::kAllgather, DataType::kInt8, {2, 3}),
        [](OpSpec& s) { s.members[0].shape = {2, 4}; }, {"shape after dim 0"});
  check(spec("agnd", OpKind::kAllgather, DataType::kInt8, {2, 3}),
        [](OpSpec& s) { s.members[0].shape = {2}; }, {"ndim"});
  check(spec("rs", OpKind::kReducescatter), [](OpSpec& s) { s.op = ReduceOp::kProduct; }, {"reduce op"});
  OpSpec cc = spec("cc", OpKind::kCommCreate);
  cc.members.clear();
  cc.ranks = {0, 1};
  check(cc, [](OpSpec& s) { s.ranks = {0, 2}; }, {"rank list", "[0, 1]", "[0, 2]"});
}

TEST_CASE("coordinator: allgather dim0 may differ without a mismatch", "[coordinator]") {
  Coordinator c(2);
  announce(c, 0, {spec("ag", OpKind::kAllgather, DataType::kInt8, {1, 3})});
  announce(c, 1, {spec("ag", OpKind::kAllgather, DataType::kInt8, {7, 3})});
  auto ready = c.takeReady();
  REQUIRE(ready.size() == 1);
  REQUIRE(ready[0].error == Code::kSuccess);
}

TEST_CASE("coordinator: joined ranks count for allreduce and barrier only", "[coordinator][join]") {
  Coordinator c(3);
  OpSpec join = spec("join", OpKind::kJoin);
  join.members.clear();
  announce(c, 1, {join});
  REQUIRE(c.takeReady().empty());  // join waits for everyone
  announce(c, 0, {spec("ar"), spec("bc", OpKind::kBroadcast)});
  announce(c, 2, {spec("ar"), spec("bc", OpKind::kBroadcast)});
  auto ready = c.takeReady();
  REQUIRE(ready.size() == 2);
  REQUIRE(ready[0].spec.name == "ar");
  REQUIRE(ready[0].error == Code::kSuccess);
  REQUIRE(ready[1].spec.name == "bc");
  REQUIRE(ready[1].error == Code::kMismatch);
  INFO(ready[1].errorMessage);
  REQUIRE(has(ready[1].errorMessage, "joined"));
  REQUIRE(has(ready[1].errorMessage, "1"));
  announce(c, 2, {join});
  REQUIRE(c.takeReady().empty());
  announce(c, 0, {join});
  ready = c.takeReady();
  REQUIRE(ready.size() == 1);
  REQUIRE(ready[0].spec.kind == OpKind::kJoin);
  REQUIRE(ready[0].lastJoinedRank == 0);
  // After the join completed nobody counts as joined: a new allreduce needs all three again.
  announce(c, 0, {spec("ar2")});
  announce(c, 2, {spec("ar2")});
  REQUIRE(c.takeReady().empty());
  announce(c, 1, {spec("ar2")});
  REQUIRE(c.takeReady().size() == 1);
}

TEST_CASE("coordinator: stalled reports submitted and missing ranks; fail removes", "[coordinator]") {
  Coordinator c(3);
  auto t0 = Clock::now();
  RequestList l;
  l.ops = {spec("slow")};
  c.add(0, l, t0);
  c.add(2, l, t0);
  auto later = t0 + std::chrono::seconds(10);
  REQUIRE(c.stalled(60, later).empty());
  auto st = c.stalled(5, later);
  REQUIRE(st.size() == 1);
  REQUIRE(st[0].name == "slow");
  REQUIRE(st[0].submitted == std::vector<int>{0, 2});
  REQUIRE(st[0].missing == std::vector<int>{1});
  REQUIRE(st[0].waitedSeconds >= 9.9);
  Response r = c.fail("slow", Code::kTimeout, "stalled");
  REQUIRE(r.error == Code::kTimeout);
  REQUIRE(r.spec.name == "slow");
  REQUIRE(r.errorMessage == "stalled");
  REQUIRE(c.empty());
}

TEST_CASE("coordinator: forget drops a partially announced op", "[coordinator]") {
  Coordinator c(2);
  announce(c, 0, {spec("f")});
  c.forget("f");
  REQUIRE(c.empty());
  announce(c, 1, {spec("f")});
  REQUIRE(c.takeReady().empty());  // rank 0's announcement was forgotten
}

TEST_CASE("coordinator: malformed specs fail their operation naming the rank, no UB",
          "[coordinator][malformed]") {
  Coordinator c(3);
  // Announces `bad` from rank 1 and `good` from ranks 0 and 2; the op must fail on every rank
  // with an internal error naming rank 1, and the coordinator stays usable.
  auto expectRejected = [&](const OpSpec& good, const OpSpec& bad, const std::string& why) {
    announce(c, 0, {good});
    announce(c, 1, {bad});
    announce(c, 2, {good});
    auto ready = c.takeReady();
    REQUIRE(ready.size() == 1);
    INFO(ready[0].errorMessage);
    REQUIRE(ready[0].error == Code::kInternal);
    REQUIRE(has(ready[0].errorMessage, "'" + good.name + "'"));
    REQUIRE(has(ready[0].errorMessage, "rank 1 sent a malformed request"));
    REQUIRE(has(ready[0].errorMessage, why));
    REQUIRE(c.empty());
  };
  OpSpec a2a = spec("a2a", OpKind::kAlltoall, DataType::kInt8, {6, 2});
  a2a.splits = {2, 2, 2};
  SECTION("alltoall splits with fewer entries than ranks") {
    OpSpec bad = a2a;
    bad.splits = {6};
    expectRejected(a2a, bad, "splits has 1 entries for 3 ranks");
  }
  SECTION("alltoall splits with more entries than ranks") {
    OpSpec bad = a2a;
    bad.splits = {1, 1, 1, 1};
    expectRejected(a2a, bad, "splits has 4 entries");
  }
  SECTION("alltoall splits summing past dim0") {
    OpSpec bad = a2a;
    bad.splits = {2, 2, 3};
    expectRejected(a2a, bad, "more than dim0");
  }
  SECTION("alltoall with a 0-d or missing member") {
    OpSpec bad = a2a;
    bad.members[0].shape.clear();
    expectRejected(a2a, bad, "0-d");
    bad = a2a;
    bad.members.clear();
    expectRejected(a2a, bad, "0 members");
  }
  SECTION("allgather 0-d on one rank") {
    OpSpec good = spec("ag", OpKind::kAllgather, DataType::kInt8, {2});
    OpSpec bad = spec("ag", OpKind::kAllgather, DataType::kInt8, {});
    expectRejected(good, bad, "0-d");
  }
  SECTION("reducescatter 0-d") {
    OpSpec good = spec("rs", OpKind::kReducescatter, DataType::kInt8, {3});
    OpSpec bad = spec("rs", OpKind::kReducescatter, DataType::kInt8, {});
    expectRejected(good, bad, "0-d");
  }
  SECTION("broadcast root out of range") {
    OpSpec good = spec("bc", OpKind::kBroadcast);
    OpSpec bad = good;
    bad.root = 3;
    expectRejected(good, bad, "root 3");
  }
  // The coordinator keeps working after any of the above.
  announce(c, 0, {spec("after")});
  announce(c, 1, {spec("after")});
  announce(c, 2, {spec("after")});
  auto ready = c.takeReady();
  REQUIRE(ready.size() == 1);
  REQUIRE(ready[0].error == Code::kSuccess);
}

TEST_CASE("coordinator: allgather 0-d on every rank is an error, not shape[0] of nothing",
          "[coordinator][malformed]") {
  Coordinator c(2);
  OpSpec ag = spec("ag", OpKind::kAllgather, DataType::kFloat32, {});
  announce(c, 0, {ag});
  announce(c, 1, {ag});
  auto ready = c.takeReady();
  REQUIRE(ready.size() == 1);
  INFO(ready[0].errorMessage);
  REQUIRE(ready[0].error == Code::kInternal);
  REQUIRE(has(ready[0].errorMessage, "rank 0 sent a malformed request"));
  REQUIRE(ready[0].dim0PerRank.empty());
}

TEST_CASE("coordinator: outputs assembled from all ranks must not overflow",
          "[coordinator][malformed]") {
  // Each rank's part fits int64 bytes, their sum does not.
  const int64_t big = int64_t{3} << 61;
  Coordinator c(2);
  announce(c, 0, {spec("ag", OpKind::kAllgather, DataType::kInt8, {big})});
  announce(c, 1, {spec("ag", OpKind::kAllgather, DataType::kInt8, {big})});
  OpSpec x = spec("x", OpKind::kAlltoall, DataType::kInt8, {big});
  x.splits = {big, 0};  // rank 0 receives 2 * big rows
  announce(c, 0, {x});
  announce(c, 1, {x});
  auto ready = c.takeReady();
  REQUIRE(ready.size() == 2);
  for (const Response& r : ready) {
    INFO(r.errorMessage);
    REQUIRE(r.error == Code::kInternal);
    REQUIRE(has(r.errorMessage, "overflows"));
  }
  REQUIRE(has(ready[1].errorMessage, "for rank 0"));
}

TEST_CASE("coordinator: caller outputs (*_into) of the wrong size fail with MISMATCH naming them",
          "[coordinator][into]") {
  Coordinator c(2);
  OpSpec a0 = spec("ag", OpKind::kAllgather, DataType::kInt32, {1, 2});
  OpSpec a1 = spec("ag", OpKind::kAllgather, DataType::kInt32, {2, 2});
  a0.outputRows = {2};  // the result has 1 + 2 = 3 rows
  a1.outputRows = {3};
  announce(c, 0, {a0});
  announce(c, 1, {a1});
  auto ready = c.takeReady();
  REQUIRE(ready.size() == 1);
  REQUIRE(ready[0].error == Code::kMismatch);
  INFO(ready[0].errorMessage);
  REQUIRE(has(ready[0].errorMessage, "'ag'"));
  REQUIRE(has(ready[0].errorMessage, "output on rank 0 has dim0 2 but the result has 3 rows"));
  REQUIRE(!has(ready[0].errorMessage, "rank 1 has dim0"));

  // Right sizes pass; the response's rows are what each rank's output must hold.
  a0.outputRows = {3};
  announce(c, 0, {a0});
  announce(c, 1, {a1});
  ready = c.takeReady();
  REQUIRE(ready.size() == 1);
  REQUIRE(ready[0].error == Code::kSuccess);
  REQUIRE(ready[0].resultRows(0, 0, 2) == 3);
  // A cached response is replayed only for outputs that fit it.
  REQUIRE(ready[0].matchesLocal(a0, 0, 2));
  a0.outputRows = {4};
  REQUIRE(!ready[0].matchesLocal(a0, 0, 2));

  // reducescatter: exactly c_r rows (d0 = 5 over 2 ranks: 3 and 2); alltoall: at least.
  OpSpec r0 = spec("rs", OpKind::kReducescatter, DataType::kFloat32, {5});
  OpSpec r1 = r0;
  r0.outputRows = {3};
  r1.outputRows = {3};
  announce(c, 0, {r0});
  announce(c, 1, {r1});
  ready = c.takeReady();
  REQUIRE(ready[0].error == Code::kMismatch);
  REQUIRE(has(ready[0].errorMessage, "output on rank 1 has dim0 3 but the result has 2 rows"));
  OpSpec t0 = spec("a2a", OpKind::kAlltoall, DataType::kUint8, {4});
  t0.splits = {2, 2};
  OpSpec t1 = t0;
  t0.outputRows = {9};  // more than the 4 rows it receives: fine
  t1.outputRows = {3};  // fewer: refused
  announce(c, 0, {t0});
  announce(c, 1, {t1});
  ready = c.takeReady();
  REQUIRE(ready[0].error == Code::kMismatch);
  REQUIRE(has(ready[0].errorMessage, "rank 1 has dim0 3 but the result has 4 rows"));
  REQUIRE(!has(ready[0].errorMessage, "rank 0 has dim0"));
}

TEST_CASE("coordinator: join reports the rank that joined last in time, not the highest rank",
          "[coordinator][join]") {
  // All three joins arrive in one round (idle ranks do not negotiate until they submit); their
  // ages at announcement say rank 1 joined last, rank 0 first.
  for (auto ages :
       {std::vector<int64_t>{300000, 0, 150000}, std::vector<int64_t>{0, 150000, 300000}}) {
    Coordinator c(3);
    const auto now = Clock::now();
    for (int r = 0; r < 3; ++r) {
      OpSpec join = spec("join.0", OpKind::kJoin);
      join.members.clear();
      join.ageMicros = ages[r];
      RequestList l;
      l.ops = {join};
      c.add(r, std::move(l), now);
    }
    auto ready = c.takeReady();
    REQUIRE(ready.size() == 1);
    const int youngest =
        static_cast<int>(std::min_element(ages.begin(), ages.end()) - ages.begin());
    REQUIRE(ready[0].lastJoinedRank == youngest);
  }
}

TEST_CASE("coordinator: assembled outputs over the backend's count limit are UNSUPPORTED",
          "[coordinator][limits]") {
  // Each rank's part is within the limit (checked at submission); what one rank receives from
  // all of them is not. Every rank gets the same UNSUPPORTED response.
  Coordinator c(2, /*maxVectorCount=*/100);
  announce(c, 0, {spec("ag", OpKind::kAllgather, DataType::kFloat32, {20})});  // 80 bytes
  announce(c, 1, {spec("ag", OpKind::kAllgather, DataType::kFloat32, {20})});
  OpSpec a2a = spec("a2a", OpKind::kAlltoall, DataType::kUint8, {90});
  a2a.splits = {0, 60};  // rank 1 receives 60 + 60 bytes
  announce(c, 0, {a2a});
  announce(c, 1, {a2a});
  OpSpec ok = spec("ag.ok", OpKind::kAllgather, DataType::kFloat32,
                   {12});  // 12 + 13 floats: exactly 100 bytes
  ok.members[0].shape = {12};
  announce(c, 0, {ok});
  ok.members[0].shape = {13};
  announce(c, 1, {ok});
  auto ready = c.takeReady();
  REQUIRE(ready.size() == 3);
  REQUIRE(ready[0].error == Code::kUnsupported);
  REQUIRE(has(ready[0].errorMessage, "160 bytes"));
  REQUIRE(ready[1].error == Code::kUnsupported);
  REQUIRE(has(ready[1].errorMessage, "rank 1 would receive 120 bytes"));
  REQUIRE(ready[2].error == Code::kSuccess);
}
