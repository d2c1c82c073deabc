// The pool of runtime-owned host outputs: large buffers are reused, small ones are not pooled,
// and what is kept stays within its bounds.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "runtime/output_pool.h"

using hcoll::runtime::OutputPool;

TEST_CASE("output pool reuses a released large buffer of a fitting size", "[output_pool]") {
  OutputPool pool;
  const size_t big = 8u << 20;
  void* a = pool.allocate(big);
  REQUIRE(a != nullptr);
  std::memset(a, 1, big);
  pool.release(a);
  void* b = pool.allocate(big - 100);  // fits without wasting half: the same memory again
  REQUIRE(b == a);
  pool.release(b);
  void* c = pool.allocate(big / 4);  // would waste more than half: fresh memory
  REQUIRE(c != a);
  pool.release(c);
  pool.trim();
}

TEST_CASE("output pool does not keep small blocks or more than its bounds", "[output_pool]") {
  OutputPool pool;
  void* small = pool.allocate(100);
  REQUIRE(small != nullptr);
  pool.release(small);
  REQUIRE(pool.keptBuffers() == 0);  // small blocks go straight back to malloc

  std::vector<void*> live;
  for (size_t i = 0; i < OutputPool::kMaxPooledBuffers + 3; ++i) {
    live.push_back(pool.allocate((2u << 20) + i * 4096));
  }
  for (void* p : live) pool.release(p);
  REQUIRE(pool.keptBuffers() == OutputPool::kMaxPooledBuffers);
  REQUIRE(pool.keptBytes() <= OutputPool::kMaxPooledBytes);
  void* reused = pool.allocate(2u << 20);  // served from what was kept
  REQUIRE(pool.keptBuffers() == OutputPool::kMaxPooledBuffers - 1);
  pool.release(reused);
  pool.trim();
  REQUIRE(pool.keptBuffers() == 0);
  REQUIRE(pool.keptBytes() == 0);
}
