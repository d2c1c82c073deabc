// InFlightNames (runtime/in_flight_names.h): a name is in flight once, whether it sits among the
// few compared one by one or in the hash set beyond them, and leaves when erased.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "runtime/in_flight_names.h"

using hcoll::runtime::InFlightNames;

TEST_CASE("in-flight names: one of each, below and beyond the few", "[in_flight_names]") {
  InFlightNames names;
  const size_t most = InFlightNames::kFew + 4;
  std::vector<std::string> in;
  for (int pass = 0; pass < 2; ++pass) {  // the second through the strings the first left
    for (size_t i = 0; i < most; ++i) {
      // Every other name longer than a string's inline buffer.
      in.push_back((i % 2 ? std::string(40, 'x') : std::string()) + "op." + std::to_string(i));
      REQUIRE(names.insert(in.back()));
      REQUIRE_FALSE(names.insert(in.back()));  // a duplicate, wherever the first one sits
      REQUIRE(names.size() == in.size());
    }
    for (const std::string& name : in) REQUIRE(names.contains(name));
    REQUIRE_FALSE(names.contains("op.absent"));
    REQUIRE_FALSE(names.erase("op.absent"));
    // Out of order: one of the few, then one of the set, and so on.
    for (size_t k = 0; !in.empty(); ++k) {
      const size_t at = k % 2 ? in.size() - 1 : 0;
      REQUIRE(names.erase(in[at]));
      REQUIRE_FALSE(names.contains(in[at]));
      REQUIRE_FALSE(names.erase(in[at]));
      in.erase(in.begin() + static_cast<std::ptrdiff_t>(at));
      REQUIRE(names.size() == in.size());
      for (const std::string& name : in) REQUIRE(names.contains(name));
    }
  }
  // A name that went to the set comes back among the few once they have room.
  for (size_t i = 0; i < most; ++i) REQUIRE(names.insert("n" + std::to_string(i)));
  REQUIRE(names.erase("n0"));
  REQUIRE(names.erase("n" + std::to_string(most - 1)));
  REQUIRE(names.insert("n" + std::to_string(most - 1)));
  REQUIRE_FALSE(names.insert("n1"));
  REQUIRE(names.size() == most - 1);
}
