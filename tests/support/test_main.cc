// Catch2 runner for multi-rank tests: initializes hcoll before the first test case and shuts it
// down after the last. Every rank runs the same test cases in order: one rank per process under
// MPI, or every rank in this process, one thread each, under the loopback backend
// (HCOLL_BACKEND=loopback; support/harness.h).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "support/harness.h"

#include <cstdio>
#include <string>

#include "support/test_util.h"

int main(int argc, char** argv) {
  if (!htest::initializeRanks()) return 2;
  // The CUDA instantiation (HCOLL_TEST_MEMORY=cuda) without a GPU per rank: skip, saying why.
  if (const std::string why = htest::memoryUnavailableOnAnyRank(); !why.empty()) {
    std::printf("SKIPPED: %s\n", why.c_str());
    htest::shutdownRanks();
    return 0;
  }
  const int result = Catch::Session().run(argc, argv);
  htest::shutdownRanks();
  return result;
}
