// Shape: dims inline up to kInline, on the heap beyond, with the vector semantics the core uses.
#include <catch2/catch.hpp>

#include <limits>
#include <utility>
#include <vector>

#include "common/shape.h"
#include "common/types.h"

using hcoll::Shape;

namespace {

// 2, 3, 4, 2, 3, 4, ...: distinct neighbours, and a product that fits int64 even for 32 dims.
std::vector<int64_t> dims(size_t n) {
  std::vector<int64_t> v;
  for (size_t i = 0; i < n; ++i) v.push_back(static_cast<int64_t>(i % 3 + 2));
  return v;
}

}  // namespace

TEST_CASE("a shape keeps its dims inline and on the heap alike", "[shape]") {
  for (size_t n : {size_t{0}, size_t{1}, Shape::kInline, Shape::kInline + 1, size_t{32}}) {
    const std::vector<int64_t> want = dims(n);
    const Shape s(want);
    CAPTURE(n);
    REQUIRE(s.size() == n);
    REQUIRE(s.empty() == (n == 0));
    REQUIRE(std::vector<int64_t>(s.begin(), s.end()) == want);
    REQUIRE(s.toVector() == want);
    if (n > 0) {
      REQUIRE(s.front() == want.front());
      REQUIRE(s.back() == want.back());
      REQUIRE(s[n - 1] == want[n - 1]);
    }
    REQUIRE(hcoll::numElements(s) == hcoll::numElements(want));
  }
}

TEST_CASE("copies and moves of a shape are independent and complete", "[shape]") {
  for (size_t n : {size_t{3}, Shape::kInline + 2}) {
    CAPTURE(n);
    Shape a(dims(n));
    Shape copy = a;
    copy[0] = 99;
    REQUIRE(a[0] == 2);  // the copy owns its dims, inline or not
    REQUIRE(copy != a);
    Shape moved = std::move(copy);
    REQUIRE(moved.size() == n);
    REQUIRE(moved[0] == 99);
    REQUIRE(moved[n - 1] == dims(n)[n - 1]);
    Shape assigned;
    assigned = moved;
    REQUIRE(assigned == moved);
    Shape moveAssigned{7};
    moveAssigned = std::move(assigned);
    REQUIRE(moveAssigned == moved);
    const Shape& self = a;
    a = self;  // self-assignment keeps the dims
    REQUIRE(a == Shape(dims(n)));
  }
}

TEST_CASE("push_back crosses from inline to heap storage", "[shape]") {
  Shape s;
  std::vector<int64_t> want;
  for (int64_t d = 1; d <= 10; ++d) {
    s.push_back(d);
    want.push_back(d);
    REQUIRE(s.toVector() == want);
  }
  s.clear();
  REQUIRE(s.empty());
  s.push_back(4);
  REQUIRE(s == Shape{4});
}

TEST_CASE("shapes compare by dims", "[shape]") {
  REQUIRE(Shape{2, 3} == Shape(std::vector<int64_t>{2, 3}));
  REQUIRE(Shape{2, 3} != Shape{3, 2});
  REQUIRE(Shape{2} != Shape{2, 1});
  REQUIRE(Shape{} == Shape());
  REQUIRE(hcoll::rowElements(Shape{4, 5, 6}) == 30);
  REQUIRE(hcoll::shapeString(Shape{4, 5}) == "[4, 5]");
}

TEST_CASE("checkedCounts: element, row and byte counts that fit int64, products left to right",
          "[shape]") {
  using hcoll::DataType;
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  struct Case {
    std::vector<int64_t> dims;
    DataType dtype;
    int64_t elements;  // -1: rejected
  };
  const std::vector<Case> cases = {
      {{}, DataType::kFloat64, 1},                                   // 0-d: one element
      {{4, 3}, DataType::kFloat32, 12},
      {{0, 7}, DataType::kInt8, 0},                                  // empty
      {{kMax / 8}, DataType::kFloat64, kMax / 8},                    // the largest that fits
      {{kMax / 8 + 1}, DataType::kFloat64, -1},                      // bytes past int64
      {{kMax / 2}, DataType::kInt8, kMax / 2},                       // as many int8 bytes: fits
      {{int64_t{1} << 32, int64_t{1} << 32}, DataType::kInt8, -1},   // elements overflow
      {{0, int64_t{1} << 40, int64_t{1} << 40}, DataType::kInt8, -1},  // empty, rows overflow
      {{0, int64_t{1} << 61}, DataType::kFloat64, -1},               // empty, row bytes overflow
      {{int64_t{1} << 62, int64_t{1} << 62, 0}, DataType::kInt8, -1},  // overflows before the 0
      {{5, -1}, DataType::kInt32, -1},                               // negative
  };
  for (const Case& c : cases) {
    INFO("shape " << hcoll::shapeString(Shape(c.dims.data(), c.dims.data() + c.dims.size())));
    int64_t got = -1;
    const bool ok = hcoll::checkedCounts(c.dims.data(), c.dims.size(), c.dtype, &got);
    CHECK(ok == (c.elements >= 0));
    if (ok) CHECK(got == c.elements);
    // The two checks it replaces on the submission path agree with it.
    int64_t count = 0;
    CHECK((hcoll::elementCount(c.dims.data(), c.dims.size(), &count) &&
           hcoll::byteCountsFit(c.dims.data(), c.dims.size(), c.dtype)) == ok);
  }
}
