// Response cache: lookup by name and local spec, LRU eviction, slot reuse and trimming.
#include <catch2/catch.hpp>

#include "runtime/response_cache.h"

using namespace hcoll;
using namespace hcoll::runtime;

namespace {

Response allreduce(const std::string& name, int64_t count = 4) {
  Response r;
  r.spec.name = name;
  r.spec.kind = OpKind::kAllreduce;
  r.spec.members = {MemberSpec{DataType::kFloat32, {count}}};
  return r;
}

ResponsePtr cached(const std::string& name, int64_t count = 4) {
  return std::make_shared<const Response>(allreduce(name, count));
}

}  // namespace

TEST_CASE("response cache: disabled at capacity 0", "[cache]") {
  ResponseCache c(0);
  REQUIRE(!c.enabled());
  c.put(cached("a"));
  REQUIRE(c.size() == 0);
  REQUIRE(c.lookup(allreduce("a").spec, 0, 2) == -1);
}

TEST_CASE("response cache: lookup matches name and local spec", "[cache]") {
  ResponseCache c(4);
  c.put(cached("a"));
  REQUIRE(c.size() == 1);
  REQUIRE(c.slotCount() == 1);
  int slot = c.lookup(allreduce("a").spec, 0, 2);
  REQUIRE(slot == 0);
  REQUIRE(c.at(slot).spec.name == "a");
  // A different shape, dtype, op or scale under the same name misses.
  REQUIRE(c.lookup(allreduce("a", 5).spec, 0, 2) == -1);
  OpSpec other = allreduce("a").spec;
  other.op = ReduceOp::kMax;
  REQUIRE(c.lookup(other, 0, 2) == -1);
  other = allreduce("a").spec;
  other.prescale = 2;
  REQUIRE(c.lookup(other, 0, 2) == -1);
  other = allreduce("a").spec;
  other.members[0].dtype = DataType::kInt32;
  REQUIRE(c.lookup(other, 0, 2) == -1);
  REQUIRE(c.lookup(allreduce("b").spec, 0, 2) == -1);
}

TEST_CASE("response cache: allgather and alltoall match this rank's dim0 and splits", "[cache]") {
  ResponseCache c(4);
  Response ag;
  ag.spec.name = "ag";
  ag.spec.kind = OpKind::kAllgather;
  ag.spec.members = {MemberSpec{DataType::kInt8, {2, 3}}};
  ag.dim0PerRank = {2, 5};  // rank 0 sends 2 rows, rank 1 sends 5
  c.put(std::make_shared<const Response>(ag));
  OpSpec local = ag.spec;
  REQUIRE(c.lookup(local, 0, 2) == 0);
  local.members[0].shape = {5, 3};
  REQUIRE(c.lookup(local, 1, 2) == 0);
  REQUIRE(c.lookup(local, 0, 2) == -1);
  local.members[0].shape = {5, 4};
  REQUIRE(c.lookup(local, 1, 2) == -1);

  Response a2a;
  a2a.spec.name = "a2a";
  a2a.spec.kind = OpKind::kAlltoall;
  a2a.spec.members = {MemberSpec{DataType::kInt8, {4}}};
  a2a.spec.splits = {1, 3};
  a2a.splitMatrix = {1, 3, 2, 2};
  c.put(std::make_shared<const Response>(a2a));
  OpSpec l2 = a2a.spec;
  REQUIRE(c.lookup(l2, 0, 2) >= 0);
  REQUIRE(c.lookup(l2, 1, 2) == -1);  // rank 1 sent {2, 2}
  l2.splits = {2, 2};
  REQUIRE(c.lookup(l2, 1, 2) >= 0);
}

TEST_CASE("response cache: LRU eviction at capacity", "[cache]") {
  ResponseCache c(3);
  c.put(cached("a"));
  c.put(cached("b"));
  c.put(cached("c"));
  REQUIRE(c.size() == 3);
  // Touch a: b is now the least recently used.
  c.touch(c.lookup(allreduce("a").spec, 0, 2));
  c.put(cached("d"));
  REQUIRE(c.size() == 3);
  REQUIRE(c.lookup(allreduce("b").spec, 0, 2) == -1);
  REQUIRE(c.lookup(allreduce("a").spec, 0, 2) >= 0);
  REQUIRE(c.lookup(allreduce("c").spec, 0, 2) >= 0);
  int d = c.lookup(allreduce("d").spec, 0, 2);
  REQUIRE(d == 1);  // reused b's slot
  REQUIRE(c.slotCount() == 3);
  // Next eviction: c (a was touched, d is new).
  c.put(cached("e"));
  REQUIRE(c.lookup(allreduce("c").spec, 0, 2) == -1);
  REQUIRE(c.lookup(allreduce("e").spec, 0, 2) == 2);
}

TEST_CASE("response cache: replacing a name keeps its slot and refreshes it", "[cache]") {
  ResponseCache c(2);
  c.put(cached("a", 4));
  c.put(cached("b"));
  c.put(cached("a", 8));  // replace: a becomes most recent
  REQUIRE(c.size() == 2);
  REQUIRE(c.lookup(allreduce("a", 4).spec, 0, 2) == -1);
  REQUIRE(c.lookup(allreduce("a", 8).spec, 0, 2) == 0);
  c.put(cached("c"));  // evicts b
  REQUIRE(c.lookup(allreduce("b").spec, 0, 2) == -1);
  REQUIRE(c.lookup(allreduce("a", 8).spec, 0, 2) == 0);
}

TEST_CASE("response cache: erase leaves holes reused lowest first; trailing holes trimmed", "[cache]") {
  ResponseCache c(8);
  for (const char* n : {"a", "b", "c", "d"}) c.put(cached(n));
  REQUIRE(c.slotCount() == 4);
  c.erase("b");
  c.erase("a");
  REQUIRE(c.size() == 2);
  REQUIRE(c.slotCount() == 4);
  c.put(cached("x"));
  REQUIRE(c.lookup(allreduce("x").spec, 0, 2) == 0);
  c.put(cached("y"));
  REQUIRE(c.lookup(allreduce("y").spec, 0, 2) == 1);
  c.erase("d");
  REQUIRE(c.slotCount() == 3);
  c.erase("c");
  REQUIRE(c.slotCount() == 2);
  c.erase("nope");  // unknown name: no effect
  REQUIRE(c.size() == 2);
  c.erase("x");
  c.erase("y");
  REQUIRE(c.slotCount() == 0);
  REQUIRE(c.size() == 0);
  c.put(cached("z"));
  REQUIRE(c.lookup(allreduce("z").spec, 0, 2) == 0);
}

TEST_CASE("response cache: automatically named operations are cached by shape", "[cache]") {
  ResponseCache c(4);
  Response first = allreduce("allreduce.0", 4);
  first.spec.autoNamed = true;
  c.put(std::make_shared<const Response>(first));
  // The next unnamed call of the same shape has a new name and still finds it.
  OpSpec next = allreduce("allreduce.1", 4).spec;
  next.autoNamed = true;
  REQUIRE(ResponseCache::keyOf(next) == ResponseCache::keyOf(first.spec));
  REQUIRE(c.lookup(next, 0, 2) == 0);
  // Another shape, reduction or scale is another key; a named operation never matches it.
  OpSpec other = next;
  other.members[0].shape = {5};
  REQUIRE(ResponseCache::keyOf(other) != ResponseCache::keyOf(next));
  REQUIRE(c.lookup(other, 0, 2) == -1);
  other = next;
  other.op = ReduceOp::kMax;
  REQUIRE(c.lookup(other, 0, 2) == -1);
  other = next;
  other.postscale = 0.5;
  REQUIRE(c.lookup(other, 0, 2) == -1);
  REQUIRE(c.lookup(allreduce("allreduce.1", 4).spec, 0, 2) == -1);
  // A named operation is keyed by its name, which can never be an automatic key.
  REQUIRE(ResponseCache::keyOf(allreduce("a").spec) == "a");
  REQUIRE(ResponseCache::keyOf(next).front() == '\0');
  // A later response of the same shape replaces it in place; erasing by key frees the slot.
  Response later = allreduce("allreduce.7", 4);
  later.spec.autoNamed = true;
  c.put(std::make_shared<const Response>(later));
  REQUIRE(c.size() == 1);
  REQUIRE(c.at(0).spec.name == "allreduce.7");
  c.erase(ResponseCache::keyOf(later.spec));
  REQUIRE(c.size() == 0);
}

TEST_CASE("response cache: an unnamed allgather's key leaves out the dim0 ranks differ in",
          "[cache]") {
  ResponseCache c(4);
  Response ag;
  ag.spec.name = "allgather.3";
  ag.spec.autoNamed = true;
  ag.spec.kind = OpKind::kAllgather;
  ag.spec.members = {MemberSpec{DataType::kInt8, {2, 3}}};  // rank 0's spec: 2 rows
  ag.dim0PerRank = {2, 5};
  c.put(std::make_shared<const Response>(ag));
  OpSpec rank1 = ag.spec;
  rank1.name = "allgather.4";
  rank1.members[0].shape = {5, 3};
  REQUIRE(ResponseCache::keyOf(rank1) == ResponseCache::keyOf(ag.spec));
  REQUIRE(c.lookup(rank1, 1, 2) == 0);
  REQUIRE(c.lookup(rank1, 0, 2) == -1);  // rank 0 sent 2 rows, not 5
  rank1.members[0].shape = {5, 4};       // another row shape: another key
  REQUIRE(c.lookup(rank1, 1, 2) == -1);
}
