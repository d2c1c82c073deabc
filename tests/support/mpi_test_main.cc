// Catch2 runner for multi-rank tests: initializes hcoll (which initializes MPI) before the first
// test case and shuts it down after the last. Every rank runs the same test cases in order.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "hcoll/hcoll.h"

int main(int argc, char** argv) {
  if (hcoll_initialize(nullptr) != HCOLL_SUCCESS) {
    std::fprintf(stderr, "hcoll_initialize failed: %s\n", hcoll_last_error());
    return 2;
  }
  int result = Catch::Session().run(argc, argv);
  if (hcoll_is_initialized()) hcoll_shutdown();
  return result;
}
