// A backend whose v-collectives take only int counts (an MPI without MPI-4 large counts, such as
// Open MPI 4.1) has allgather, alltoall and reducescatter parts above its limit refused at
// submission with UNSUPPORTED, instead of failing on every rank after negotiation. Exercised
// with a stub channel whose limit is small, so no multi-GiB buffer is needed.
#include <catch2/catch.hpp>

#include "runtime/communicator.h"
#include "stub_channel.h"

using namespace hcoll;
using namespace hcoll::runtime;

namespace {

class LimitedChannel : public htest::StubChannel {
 public:
  LimitedChannel() : StubChannel(0, 2, Status::ok()) {}
  size_t maxVectorCount() const override { return 100; }
  std::string maxVectorCountReason() const override { return "no MPI-4 large-count calls"; }
};

std::unique_ptr<LocalOp> hostOp(OpKind kind, const std::string& name, std::vector<int64_t> shape,
                                std::vector<float>* data) {
  auto op = std::make_unique<LocalOp>();
  op->spec.name = name;
  op->spec.kind = kind;
  op->spec.members = {MemberSpec{DataType::kFloat32, shape}};
  if (kind == OpKind::kAlltoall) op->spec.splits = {shape[0] / 2, shape[0] - shape[0] / 2};
  TensorDesc t;
  t.data = data->data();
  t.dtype = DataType::kFloat32;
  t.shape = std::move(shape);
  op->inputs = {t};
  op->request = std::make_shared<Request>(nullptr);
  return op;
}

}  // namespace

TEST_CASE("backend limits: parts above the backend's count limit fail at submission", "[limits]") {
  Communicator comm(std::make_unique<LimitedChannel>(), Config{}, nullptr, -1);
  std::vector<float> data(64);
  // 26 float32 = 104 bytes > 100: refused for the byte-counted collectives.
  for (OpKind kind : {OpKind::kAllgather, OpKind::kAlltoall}) {
    Status s = comm.submit(hostOp(kind, "big", {26}, &data));
    INFO(s.message());
    REQUIRE(s.code() == Code::kUnsupported);
    REQUIRE(s.message().find("MPI-4 large-count") != std::string::npos);
  }
  // reducescatter counts elements: 102 elements (51 rows of 2) are over, 100 are not.
  std::vector<float> rs(102);
  REQUIRE(comm.submit(hostOp(OpKind::kReducescatter, "rs.big", {51, 2}, &rs)).code() ==
          Code::kUnsupported);
  // Nothing was enqueued: the names are free, and parts within the limit are accepted.
  REQUIRE(comm.submit(hostOp(OpKind::kAllgather, "big", {25}, &data)).isOk());
  REQUIRE(comm.submit(hostOp(OpKind::kReducescatter, "rs.big", {50, 2}, &rs)).isOk());
  comm.abort();
}
