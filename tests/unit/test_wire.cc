// Wire encoding of negotiation messages: round trips, and rejection of truncated, garbage,
// oversized and out-of-range input without reading out of bounds.
#include <catch2/catch.hpp>

#include <cstring>
#include <limits>
#include <random>

#include "runtime/wire.h"

using namespace hcoll;
using namespace hcoll::runtime;

namespace {

OpSpec sampleSpec(const std::string& name, OpKind kind) {
  OpSpec s;
  s.name = name;
  s.kind = kind;
  s.op = ReduceOp::kProduct;
  s.prescale = 0.25;
  s.postscale = -3.5;
  s.root = 2;
  s.device = kHostDevice;
  s.members = {MemberSpec{DataType::kBfloat16, {3, 0, 7}}, MemberSpec{DataType::kBool, {}}};
  s.splits = {1, 0, 5};
  s.ranks = {2, 0};
  s.color = -1;
  s.key = 42;
  s.autoNamed = true;
  s.ageMicros = 123456789012;
  return s;
}

RequestList sampleRequests() {
  RequestList l;
  l.ops = {sampleSpec("a", OpKind::kAllreduce), sampleSpec("", OpKind::kAlltoall),
           sampleSpec(std::string(100, 'x'), OpKind::kCommCreate)};
  l.ops[1].outputRows = {9, 0};  // *_into: one per member
  return l;
}

ResponseList sampleResponses() {
  ResponseList l;
  Response ok;
  ok.spec = sampleSpec("ag", OpKind::kAllgather);
  ok.dim0PerRank = {1, 0, 3, 4, 5, 6};
  ok.splitMatrix = {0, 1, 2, 3};
  ok.lastJoinedRank = 3;
  ok.spec.outputRows = {5, 0};
  Response bad;
  bad.error = Code::kMismatch;
  bad.errorMessage = "mismatched dtype: rank 0 has float32, rank 1 has int8";
  bad.spec = sampleSpec("bad", OpKind::kBroadcast);
  l.responses = {ok, bad};
  return l;
}

}  // namespace

TEST_CASE("wire: request list round trip", "[wire]") {
  RequestList in = sampleRequests();
  auto bytes = wire::encode(in);
  RequestList out;
  REQUIRE(wire::decode(bytes.data(), bytes.size(), &out).isOk());
  REQUIRE(out.ops.size() == in.ops.size());
  for (size_t i = 0; i < in.ops.size(); ++i) REQUIRE(out.ops[i] == in.ops[i]);
  // Empty list.
  RequestList empty;
  bytes = wire::encode(empty);
  REQUIRE(wire::decode(bytes.data(), bytes.size(), &out).isOk());
  REQUIRE(out.ops.empty());
}

TEST_CASE("wire: response list round trip", "[wire]") {
  ResponseList in = sampleResponses();
  auto bytes = wire::encode(in);
  ResponseList out;
  REQUIRE(wire::decode(bytes.data(), bytes.size(), &out).isOk());
  REQUIRE(out.responses.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    const Response& a = in.responses[i];
    const Response& b = out.responses[i];
    REQUIRE(a.error == b.error);
    REQUIRE(a.errorMessage == b.errorMessage);
    REQUIRE(a.spec == b.spec);
    REQUIRE(a.dim0PerRank == b.dim0PerRank);
    REQUIRE(a.splitMatrix == b.splitMatrix);
    REQUIRE(a.lastJoinedRank == b.lastJoinedRank);
  }
}

TEST_CASE("wire: every truncation is rejected", "[wire]") {
  auto req = wire::encode(sampleRequests());
  for (size_t len = 0; len < req.size(); ++len) {
    RequestList out;
    out.ops.resize(77);
    INFO("request truncated to " << len << " of " << req.size());
    Status s = wire::decode(req.data(), len, &out);
    REQUIRE(!s.isOk());
    REQUIRE(!s.message().empty());
    REQUIRE(out.ops.size() == 77);  // output untouched on failure
  }
  auto resp = wire::encode(sampleResponses());
  for (size_t len = 0; len < resp.size(); ++len) {
    ResponseList out;
    INFO("response truncated to " << len);
    REQUIRE(!wire::decode(resp.data(), len, &out).isOk());
    REQUIRE(out.responses.empty());
  }
}

TEST_CASE("wire: trailing bytes, wrong magic, crossed types are rejected", "[wire]") {
  auto req = wire::encode(sampleRequests());
  auto longer = req;
  longer.push_back(0);
  RequestList rl;
  REQUIRE(!wire::decode(longer.data(), longer.size(), &rl).isOk());
  auto badMagic = req;
  badMagic[0] ^= 0xff;
  REQUIRE(!wire::decode(badMagic.data(), badMagic.size(), &rl).isOk());
  // A request is not a response and vice versa.
  ResponseList resp;
  REQUIRE(!wire::decode(req.data(), req.size(), &resp).isOk());
  auto respBytes = wire::encode(sampleResponses());
  REQUIRE(!wire::decode(respBytes.data(), respBytes.size(), &rl).isOk());
  REQUIRE(!wire::decode(nullptr, 0, &rl).isOk());
}

TEST_CASE("wire: out-of-range fields are rejected", "[wire]") {
  // Layout of a request with one op: magic, count, then the name length and bytes.
  RequestList one;
  one.ops = {sampleSpec("n", OpKind::kAllreduce)};
  auto good = wire::encode(one);
  const size_t nameAt = 8, kindAt = nameAt + 4 + 1, opAt = kindAt + 1;
  RequestList out;
  REQUIRE(wire::decode(good.data(), good.size(), &out).isOk());
  SECTION("bad op kind") {
    auto b = good;
    b[kindAt] = 200;
    REQUIRE(!wire::decode(b.data(), b.size(), &out).isOk());
  }
  SECTION("bad reduce op") {
    auto b = good;
    b[opAt] = 6;  // one past HCOLL_ADASUM
    REQUIRE(!wire::decode(b.data(), b.size(), &out).isOk());
  }
  SECTION("Adasum of a bool member, or off allreduce") {
    auto b = good;
    b[opAt] = static_cast<uint8_t>(ReduceOp::kAdasum);  // the sample's second member is bool
    REQUIRE(!wire::decode(b.data(), b.size(), &out).isOk());
    RequestList adasum;
    adasum.ops = {sampleSpec("n", OpKind::kAllreduce)};
    adasum.ops[0].op = ReduceOp::kAdasum;
    adasum.ops[0].members.pop_back();  // bfloat16 only: valid
    auto bytes = wire::encode(adasum);
    REQUIRE(wire::decode(bytes.data(), bytes.size(), &out).isOk());
    bytes[kindAt] = static_cast<uint8_t>(OpKind::kReducescatter);
    REQUIRE(!wire::decode(bytes.data(), bytes.size(), &out).isOk());
  }
  SECTION("huge name length") {
    auto b = good;
    uint32_t huge = 0xfffffff0u;
    std::memcpy(&b[nameAt], &huge, 4);
    REQUIRE(!wire::decode(b.data(), b.size(), &out).isOk());
  }
  SECTION("huge op count does not allocate") {
    auto b = good;
    uint32_t huge = 0xffffffffu;
    std::memcpy(&b[4], &huge, 4);
    REQUIRE(!wire::decode(b.data(), b.size(), &out).isOk());
  }
  SECTION("negative dimension") {
    RequestList neg;
    neg.ops = {sampleSpec("n", OpKind::kAllreduce)};
    neg.ops[0].members = {MemberSpec{DataType::kInt8, {-4}}};
    auto b = wire::encode(neg);
    REQUIRE(!wire::decode(b.data(), b.size(), &out).isOk());
  }
  SECTION("bad dtype") {
    RequestList bad;
    bad.ops = {sampleSpec("n", OpKind::kAllreduce)};
    bad.ops[0].members = {MemberSpec{static_cast<DataType>(11), {1}}};
    auto b = wire::encode(bad);
    REQUIRE(!wire::decode(b.data(), b.size(), &out).isOk());
  }
  SECTION("name longer than the limit") {
    RequestList longName;
    longName.ops = {sampleSpec(std::string(wire::kMaxNameLength + 1, 'n'), OpKind::kAllreduce)};
    auto b = wire::encode(longName);
    REQUIRE(!wire::decode(b.data(), b.size(), &out).isOk());
  }
}

TEST_CASE("wire: random garbage never decodes into nonsense or crashes", "[wire]") {
  std::mt19937 rng(12345);
  auto base = wire::encode(sampleRequests());
  auto respBase = wire::encode(sampleResponses());
  for (int iter = 0; iter < 3000; ++iter) {
    auto b = (iter % 2) ? base : respBase;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) b[rng() % b.size()] = static_cast<uint8_t>(rng());
    RequestList rl;
    ResponseList rs;
    // Either outcome is fine; decoding must stay in bounds (ASan/valgrind would catch it) and a
    // success must re-encode to the same bytes (the encoding is canonical).
    if (wire::decode(b.data(), b.size(), &rl).isOk()) REQUIRE(wire::encode(rl) == b);
    if (wire::decode(b.data(), b.size(), &rs).isOk()) REQUIRE(wire::encode(rs) == b);
  }
  for (int iter = 0; iter < 500; ++iter) {
    std::vector<uint8_t> b(rng() % 64);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    RequestList rl;
    ResponseList rs;
    wire::decode(b.data(), b.size(), &rl);
    wire::decode(b.data(), b.size(), &rs);
  }
  SUCCEED();
}

TEST_CASE("wire: specs no C API call can produce are rejected", "[wire]") {
  auto decodeOne = [](const OpSpec& s) {
    RequestList l;
    l.ops = {s};
    auto b = wire::encode(l);
    RequestList out;
    return wire::decode(b.data(), b.size(), &out);
  };
  auto rejected = [&](const OpSpec& s, const std::string& why) {
    Status st = decodeOne(s);
    INFO(st.message());
    REQUIRE(!st.isOk());
    REQUIRE(st.message().find(why) != std::string::npos);
  };
  OpSpec base = sampleSpec("n", OpKind::kAllreduce);
  REQUIRE(decodeOne(base).isOk());
  SECTION("more than HCOLL_MAX_NDIM dims") {
    OpSpec s = base;
    s.members = {MemberSpec{DataType::kInt8, std::vector<int64_t>(kMaxNdim, 1)}};
    REQUIRE(decodeOne(s).isOk());
    s.members[0].shape.push_back(1);
    rejected(s, "too many dimensions");
  }
  SECTION("element count overflow") {
    OpSpec s = base;
    s.members = {MemberSpec{DataType::kInt8, {int64_t{1} << 32, int64_t{1} << 32}}};
    rejected(s, "overflows");
  }
  SECTION("caller output rows: one per member, never negative") {
    OpSpec s = base;
    s.outputRows = {1, 2};
    REQUIRE(decodeOne(s).isOk());
    s.outputRows = {1};
    rejected(s, "output rows do not match the members");
    s.outputRows = {1, -1};
    rejected(s, "negative output rows");
  }
  SECTION("byte count overflow") {
    OpSpec s = base;
    s.members = {MemberSpec{DataType::kFloat64, {int64_t{1} << 61}}};
    rejected(s, "overflows");
    s.members[0].dtype = DataType::kInt8;
    REQUIRE(decodeOne(s).isOk());
  }
  SECTION("row count overflow in an empty tensor") {
    OpSpec s = base;
    s.members = {MemberSpec{DataType::kInt8, {0, int64_t{1} << 40, int64_t{1} << 40}}};
    rejected(s, "overflows");
  }
  SECTION("non-finite scale factors") {
    OpSpec s = base;
    s.prescale = std::numeric_limits<double>::quiet_NaN();
    rejected(s, "non-finite");
    s.prescale = 1.0;
    s.postscale = -std::numeric_limits<double>::infinity();
    rejected(s, "non-finite");
  }
  SECTION("negative split") {
    OpSpec s = sampleSpec("n", OpKind::kAlltoall);
    s.splits = {1, -1, 0};
    rejected(s, "negative split");
  }
}

TEST_CASE("wire: responses with negative row counts are rejected", "[wire]") {
  ResponseList l = sampleResponses();
  l.responses[0].dim0PerRank[1] = -1;
  auto b = wire::encode(l);
  ResponseList out;
  REQUIRE(!wire::decode(b.data(), b.size(), &out).isOk());
  l = sampleResponses();
  l.responses[0].splitMatrix[0] = -5;
  b = wire::encode(l);
  REQUIRE(!wire::decode(b.data(), b.size(), &out).isOk());
}

TEST_CASE("wire: Response::malformation checks per-rank parts against the size", "[wire]") {
  Response ag;
  ag.spec = sampleSpec("ag", OpKind::kAllgather);
  ag.spec.members = {MemberSpec{DataType::kInt8, {2, 3}}};
  ag.dim0PerRank = {2, 0};
  REQUIRE(ag.malformation(2).empty());
  REQUIRE(!ag.malformation(3).empty());  // one entry per rank
  ag.spec.members[0].shape.clear();
  ag.dim0PerRank = {0, 0};
  REQUIRE(!ag.malformation(2).empty());  // 0-d member
  ag.error = Code::kMismatch;
  REQUIRE(ag.malformation(2).empty());  // a failure only names the operation

  Response a2a;
  a2a.spec = sampleSpec("x", OpKind::kAlltoall);
  a2a.spec.members = {MemberSpec{DataType::kInt8, {4}}};
  a2a.splitMatrix = {1, 1, 2, 2};
  REQUIRE(a2a.malformation(2).empty());
  a2a.splitMatrix.pop_back();
  REQUIRE(!a2a.malformation(2).empty());

  Response bc;
  bc.spec = sampleSpec("b", OpKind::kBroadcast);
  bc.spec.root = 2;
  REQUIRE(bc.malformation(3).empty());
  REQUIRE(!bc.malformation(2).empty());
}
