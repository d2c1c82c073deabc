// What of the NCCL backend can be checked without a GPU: the device kernels compile with NVRTC
// for the architectures we target, dtype/op mapping, and the backend degrades to "no device"
// (UNSUPPORTED for CUDA tensors) instead of crashing when there is none.

#include <catch2/catch.hpp>

#include "backends/device.h"
#include "hcoll/config.h"

#if HCOLL_WITH_NCCL
#include "backends/nccl/nccl_kernels.h"
#include "backends/nccl/nccl_types.h"

TEST_CASE("Device kernels compile to PTX for Volta..Hopper", "[device]") {
  for (auto cc : {std::pair<int, int>{7, 5}, {8, 0}, {9, 0}}) {
    std::string ptx, log;
    hcoll::Status s = hcoll::backends::nccl::compileKernels(cc.first, cc.second, &ptx, &log);
    INFO(s.message() << "\n" << log);
    REQUIRE(s.isOk());
    for (int t = 0; t < hcoll::kNumDataTypes; ++t) {
      CHECK(ptx.find(hcoll::backends::nccl::scaleKernelName(static_cast<hcoll::DataType>(t))) !=
            std::string::npos);
    }
    CHECK(ptx.find("hcoll_normalize_bool") != std::string::npos);
  }
}

TEST_CASE("NCCL type mapping: bool as uint8 with MAX/MIN, 16-bit integers unsupported",
          "[device]") {
  using hcoll::DataType;
  using hcoll::ReduceOp;
  ncclDataType_t t;
  ncclRedOp_t op;
  REQUIRE(hcoll::backends::nccl::toNccl(DataType::kBool, ReduceOp::kSum, &t, &op).isOk());
  CHECK(t == ncclUint8);
  CHECK(op == ncclMax);
  REQUIRE(hcoll::backends::nccl::toNccl(DataType::kBool, ReduceOp::kProduct, &t, &op).isOk());
  CHECK(op == ncclMin);
  REQUIRE(hcoll::backends::nccl::toNccl(DataType::kFloat32, ReduceOp::kAverage, &t, &op).isOk());
  CHECK(t == ncclFloat32);
  CHECK(op == ncclSum);  // the executor applies 1/N
  REQUIRE(hcoll::backends::nccl::toNccl(DataType::kBfloat16, ReduceOp::kProduct, &t, &op).isOk());
  CHECK(t == ncclBfloat16);
  CHECK(op == ncclProd);
  CHECK(hcoll::backends::nccl::toNccl(DataType::kInt16, ReduceOp::kSum, &t, &op).code() ==
        hcoll::Code::kUnsupported);
}
#endif

TEST_CASE("Device backend: present exactly when built, never crashes without a GPU", "[device]") {
  hcoll::backends::DeviceBackend* backend = hcoll::backends::deviceBackend();
  CHECK((backend != nullptr) == (HCOLL_WITH_NCCL == 1));
  if (backend == nullptr) return;
  // 16-bit integers are refused at submission for CUDA tensors, GPU or not.
  CHECK(backend->checkReduction(hcoll::DataType::kInt16).code() == hcoll::Code::kUnsupported);
  CHECK(backend->checkReduction(hcoll::DataType::kUint16).code() == hcoll::Code::kUnsupported);
  CHECK(backend->checkReduction(hcoll::DataType::kBfloat16).isOk());
  const bool available = backend->available();  // cudaGetDeviceCount fails cleanly without one
  CHECK(backend->available() == available);     // probed once, stable
  if (!available) {
    hcoll::backends::StreamMarkerPtr marker;
    CHECK(backend->mark(0, nullptr, &marker).code() == hcoll::Code::kUnsupported);
    CHECK(marker == nullptr);
    CHECK(backend->allocate(0, 16) == nullptr);
    WARN("SKIPPED: no CUDA device (device checks of this test)");
  }
}
