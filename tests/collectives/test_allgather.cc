// allgather and grouped_allgather: every dtype, per-rank dim0 (0 included), multi-dim rows.
#include <memory>
#include <string>

#include "collectives/reference.h"

using namespace htest;
using namespace htest::ref;

namespace {

// Rank r contributes rows(r) rows; element (row, j) of rank r is agValue(r, row, j).
int64_t rowsOf(int r, int variant) {
  switch (variant) {
    case 0: return r + 1;              // all different
    case 1: return r % 2 == 0 ? 0 : 3;  // some ranks send nothing
    case 2: return 1;
    default: return 0;                 // nobody sends anything
  }
}
double agValue(hcoll_dtype_t t, int r, int64_t row, int64_t j) {
  if (t == HCOLL_BOOL) return (r + row + j) % 2;
  int64_t v = (r * 7 + row * 3 + j) % 50;
  return isUnsigned(t) ? v : v - 20;
}

// Checks output `out` of rank-order concatenation with `rowElems` elements per row.
void checkGathered(hcoll_dtype_t t, const hcoll_tensor_t& out, int variant,
                   const std::vector<int64_t>& rowShape) {
  const int n = worldSize();
  int64_t rowElems = 1;
  for (int64_t d : rowShape) rowElems *= d;
  int64_t totalRows = 0;
  for (int src = 0; src < n; ++src) totalRows += rowsOf(src, variant);
  HREQUIRE(out.dtype == t);
  HREQUIRE(out.ndim == static_cast<int>(rowShape.size()) + 1);
  HREQUIRE(out.shape[0] == totalRows);
  for (size_t d = 0; d < rowShape.size(); ++d) HREQUIRE(out.shape[d + 1] == rowShape[d]);
  int64_t at = 0;
  for (int src = 0; src < n; ++src) {
    for (int64_t row = 0; row < rowsOf(src, variant); ++row) {
      for (int64_t j = 0; j < rowElems; ++j, ++at) {
        HINFO("dtype " << dtypeName(t) << " src " << src << " row " << row << " j " << j);
        HREQUIRE(close(t, outputElement(out, at), agValue(t, src, row, j)));
      }
    }
  }
}

std::unique_ptr<Tensor> makeInput(hcoll_dtype_t t, int variant, const std::vector<int64_t>& rowShape) {
  const int r = worldRank();
  std::vector<int64_t> shape = {rowsOf(r, variant)};
  shape.insert(shape.end(), rowShape.begin(), rowShape.end());
  auto in = std::make_unique<Tensor>(t, shape);
  int64_t rowElems = shape[0] == 0 ? 0 : in->elements() / shape[0];
  for (int64_t row = 0; row < shape[0]; ++row) {
    for (int64_t j = 0; j < rowElems; ++j) in->set(row * rowElems + j, agValue(t, r, row, j));
  }
  return in;
}

}  // namespace

HTEST_CASE("allgather: every dtype with per-rank dim0", "[allgather]") {
  // The last: more dims than a Shape keeps inline (the output's dims then live on the heap).
  const std::vector<std::vector<int64_t>> rowShapes = {{}, {3}, {2, 2}, {2, 1, 1, 1, 1, 1, 2}};
  for (hcoll_dtype_t t : allDtypes()) {
    struct Pending {
      std::unique_ptr<Tensor> in;
      hcoll_request_t req;
      int variant;
      std::vector<int64_t> rowShape;
    };
    std::vector<Pending> pending;
    for (int variant = 0; variant < 4; ++variant) {
      for (const auto& rs : rowShapes) {
        Pending p{makeInput(t, variant, rs), HCOLL_REQUEST_NULL, variant, rs};
        auto d = p.in->desc();
        std::string name = std::string("ag.") + dtypeName(t) + "." + std::to_string(variant) +
                           "." + std::to_string(rs.size());
        HCOLL_REQUIRE_OK(hcoll_allgather(world(), name.c_str(), &d, &p.req));
        pending.push_back(std::move(p));
      }
    }
    for (auto& p : pending) {
      HCOLL_REQUIRE_OK(hcoll_wait(p.req, 30));
      hcoll_tensor_t out;
      HCOLL_REQUIRE_OK(hcoll_request_output(p.req, 0, &out));
      checkGathered(t, out, p.variant, p.rowShape);
      // Only output 0 exists.
      hcoll_tensor_t none;
      HREQUIRE(hcoll_request_output(p.req, 1, &none) == HCOLL_ERR_INVALID_ARGUMENT);
      HCOLL_REQUIRE_OK(hcoll_request_free(p.req));
    }
  }
}

HTEST_CASE("allgather: large input", "[allgather][large]") {
  const int r = worldRank();
  const int n = worldSize();
  const int64_t count = (1 << 18) + r;  // different dim0 per rank
  Tensor in(HCOLL_INT32, {count});
  for (int64_t i = 0; i < count; ++i) in.set(i, r * 1000000 + i);
  auto d = in.desc();
  hcoll_request_t req;
  HCOLL_REQUIRE_OK(hcoll_allgather(world(), "ag.large", &d, &req));
  HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
  hcoll_tensor_t out;
  HCOLL_REQUIRE_OK(hcoll_request_output(req, 0, &out));
  int64_t at = 0;
  int64_t wrong = 0;
  for (int src = 0; src < n; ++src) {
    for (int64_t i = 0; i < (1 << 18) + src; ++i, ++at) {
      wrong += outputElement(out, at) != src * 1000000 + i;
    }
  }
  HREQUIRE(out.shape[0] == at);
  HREQUIRE(wrong == 0);
  hcoll_request_free(req);
}

// Blocks around the MPI backend's pieces and its lanes' 128 KiB chunks (mpi_transport_impl.h,
// mpi_shm.h), one byte longer per rank: this rank's own block is copied a chunk at a time
// between lane moves when it is longer than one chunk.
HTEST_CASE("allgather: blocks around the MPI backend's pieces and lane chunks", "[allgather]") {
  const int r = worldRank();
  const int n = worldSize();
  for (int64_t base : {8193, 131071, 131072, 300000}) {
    Tensor in(HCOLL_UINT8, {base + r});
    for (int64_t i = 0; i < base + r; ++i) in.set(i, (r * 31 + i) % 251);
    auto d = in.desc();
    hcoll_request_t req;
    const std::string name = "ag.lanes." + std::to_string(base);
    HCOLL_REQUIRE_OK(hcoll_allgather(world(), name.c_str(), &d, &req));
    HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
    hcoll_tensor_t out;
    HCOLL_REQUIRE_OK(hcoll_request_output(req, 0, &out));
    int64_t at = 0, wrong = 0;
    for (int src = 0; src < n; ++src) {
      for (int64_t i = 0; i < base + src; ++i, ++at) {
        wrong += outputElement(out, at) != static_cast<double>((src * 31 + i) % 251);
      }
    }
    HINFO("block " << base);
    HREQUIRE(out.shape[0] == at);
    HREQUIRE(wrong == 0);
    hcoll_request_free(req);
  }
}

HTEST_CASE("grouped_allgather: mixed dtypes and shapes, output i belongs to ins[i]",
          "[allgather][grouped]") {
  const std::vector<std::pair<hcoll_dtype_t, std::pair<int, std::vector<int64_t>>>> members = {
      {HCOLL_FLOAT32, {0, {}}}, {HCOLL_INT16, {1, {2}}}, {HCOLL_FLOAT16, {0, {3, 1}}},
      {HCOLL_BOOL, {2, {4}}},   {HCOLL_INT64, {3, {}}}};
  std::vector<std::unique_ptr<Tensor>> ins;
  std::vector<hcoll_tensor_t> descs;
  for (auto& m : members) {
    ins.push_back(makeInput(m.first, m.second.first, m.second.second));
    descs.push_back(ins.back()->desc());
  }
  hcoll_request_t req;
  HCOLL_REQUIRE_OK(hcoll_grouped_allgather(world(), "gag", static_cast<int>(descs.size()),
                                           descs.data(), &req));
  HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
  for (size_t m = 0; m < members.size(); ++m) {
    hcoll_tensor_t out;
    HCOLL_REQUIRE_OK(hcoll_request_output(req, static_cast<int>(m), &out));
    checkGathered(members[m].first, out, members[m].second.first, members[m].second.second);
  }
  HCOLL_REQUIRE_OK(hcoll_request_free(req));
}
