#pragma once
// Helpers shared by the multi-rank tests: typed host tensors, waiting, world rank and size.

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "hcoll/hcoll.h"
#include "support/harness.h"

namespace htest {

// This rank's world: hcoll_comm_world, or on a rank thread of the collective harness the world of
// the rank it runs (support/harness.h).
hcoll_comm_t world();
int worldRank();
int worldSize();
int rankOf(hcoll_comm_t comm);
int sizeOf(hcoll_comm_t comm);

// Fails the test with hcoll's message when a call does not return HCOLL_SUCCESS (through the
// collective harness on a rank thread, else Catch2).
#define HCOLL_REQUIRE_OK(expr)                                                              \
  do {                                                                                      \
    hcoll_status_t status_ = (expr);                                                        \
    if (::htest::ranksOnThreads()) {                                                        \
      HINFO(#expr << " -> " << hcoll_status_string(status_) << ": " << hcoll_last_error()); \
      HREQUIRE(status_ == HCOLL_SUCCESS);                                                   \
    } else {                                                                                \
      INFO(#expr << " -> " << hcoll_status_string(status_) << ": " << hcoll_last_error());  \
      REQUIRE(status_ == HCOLL_SUCCESS);                                                    \
    }                                                                                       \
  } while (0)

// Every counter of hcoll_comm_stats (the call must succeed). Inline, so that programs sharing
// test_util.cc without Catch2's runner (the reliability tests) do not need its runtime.
inline hcoll_comm_stats_t commStats(hcoll_comm_t comm) {
  hcoll_comm_stats_t s{};
  s.mask = HCOLL_COMM_STATS_FIELD_ALL;
  const hcoll_status_t status = hcoll_comm_stats(comm, &s);
  if (::htest::ranksOnThreads()) {
    HREQUIRE(status == HCOLL_SUCCESS);
  } else {
    REQUIRE(status == HCOLL_SUCCESS);
  }
  return s;
}

// Waits (30 s at most, so a hang fails the test) and frees the request; returns the status.
hcoll_status_t waitAndFree(hcoll_request_t req, double timeoutSeconds = 30.0);

size_t dtypeSize(hcoll_dtype_t t);
const char* dtypeName(hcoll_dtype_t t);

// float16 / bfloat16 <-> float for building inputs and checking outputs.
uint16_t toHalf(float f);
float fromHalf(uint16_t h);
uint16_t toBfloat16(float f);
float fromBfloat16(uint16_t b);

// The memory the collective tests' tensors live in: host memory, or with HCOLL_TEST_MEMORY=cuda
// the GPU of this rank's local rank (the CUDA instantiation of the same tests, run by the device
// backend). Read once.
bool cudaMemory();
// Why this run cannot use its memory, "" if it can: CUDA requested but the tests were built
// without it, no device is visible, or a node has fewer devices than ranks (NCCL refuses two
// ranks of one communicator on one GPU). The runner then skips every test, saying why.
std::string memoryUnavailable();
// memoryUnavailable, agreed by every rank (collective over the world under one rank per
// process): a reason if any rank has one.
std::string memoryUnavailableOnAnyRank();
// Whether the backend serving this run's memory reduces `t` (NCCL has no 16-bit integers).
bool memoryReduces(hcoll_dtype_t t);

// A tensor holding its own bytes and shape. Values are set and read as double and converted to
// the dtype (so tests use small integers that every dtype represents exactly). In CUDA memory
// (cudaMemory()) the values live on the host until desc() uploads them to the tensor's device
// buffer, which then holds the truth until the next set/get/data downloads it back: call desc()
// after setting the inputs and read results after the operation completed, as with host memory.
class Tensor {
 public:
  Tensor(hcoll_dtype_t dtype, std::vector<int64_t> shape);
  hcoll_tensor_t desc() const;
  int64_t elements() const;
  void set(int64_t i, double v);
  double get(int64_t i) const;
  void* data();  // the host values
  const std::vector<int64_t>& shape() const { return shape_; }
  hcoll_dtype_t dtype() const { return dtype_; }

 private:
  void download() const;

  hcoll_dtype_t dtype_;
  std::vector<int64_t> shape_;
  mutable std::vector<uint8_t> bytes_;
  mutable std::shared_ptr<void> device_;  // CUDA memory: the device copy, allocated by desc()
  mutable bool deviceNewer_ = false;      // desc() handed the device copy out
};

// Reads element i of an output tensor returned by hcoll_request_output.
double outputElement(const hcoll_tensor_t& t, int64_t i);
int64_t outputElements(const hcoll_tensor_t& t);

}  // namespace htest
