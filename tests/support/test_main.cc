// Catch2 runner for multi-rank tests: initializes hcoll before the first test case and shuts it
// down after the last. Every rank runs the same test cases in order: one rank per process under
// MPI, or every rank in this process, one thread each, under the loopback backend
// (HCOLL_BACKEND=loopback; support/harness.h).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "support/harness.h"

int main(int argc, char** argv) {
  if (!htest::initializeRanks()) return 2;
  const int result = Catch::Session().run(argc, argv);
  htest::shutdownRanks();
  return result;
}
