// alltoall: even (NULL) splits, explicit uneven splits, zero splits (empty sends and receives),
// trailing rows ignored, empty inputs (dim0 = 0) on one rank and on every rank, received splits,
// every dtype, multi-dim rows.
#include <memory>
#include <string>

#include "collectives/reference.h"

using namespace htest;
using namespace htest::ref;

namespace {

// Row k of rank `src` carries a value identifying (src, k, j).
double a2aValue(hcoll_dtype_t t, int src, int64_t row, int64_t j) {
  if (t == HCOLL_BOOL) return (src + row + j) % 2;
  int64_t v = (src * 31 + row * 5 + j) % 100;
  return isUnsigned(t) ? v : v - 50;
}

// splits[src][dst] for one pattern; the sum may be less than the rows `src` sends (trailing rows).
// Patterns 4-7 have dim0 = 0 on some or all ranks (an empty send), with NULL or explicit splits.
constexpr int kPatterns = 8;
// The completed alltoall's output, and its received splits (one per rank of an n-rank world).
hcoll_tensor_t outputOf(hcoll_request_t req) {
  hcoll_tensor_t out;
  HCOLL_REQUIRE_OK(hcoll_request_output(req, 0, &out));
  return out;
}
const int64_t* receivedSplitsOf(hcoll_request_t req, int n) {
  const int64_t* recv = nullptr;
  int count = 0;
  HCOLL_REQUIRE_OK(hcoll_request_received_splits(req, 0, &recv, &count));
  HREQUIRE(count == n);
  return recv;
}

int64_t splitOf(int pattern, int src, int dst, int n) {
  switch (pattern) {
    case 0: return 2;                                  // even
    case 1: return (src + 2 * dst) % 3;               // uneven, with zeros
    case 2: return dst == (src + 1) % n ? 3 : 0;       // each rank sends to one neighbour only
    case 4: return src == 0 ? 0 : 1 + dst % 2;         // rank 0's input is empty, it still receives
    case 7: return src == 0 ? 0 : 2;                   // NULL splits; rank 0's input is empty
    default: return 0;                                 // 3: nothing moves; 5, 6: all inputs empty
  }
}
// Rows beyond the splits' sum (ignored). Patterns 4-7 have none, so dim0 = 0 where splits are 0.
int64_t trailingRows(int pattern, int src) {
  return pattern == 0 || pattern >= 4 ? 0 : src % 2 + 1;
}
// Even patterns pass NULL splits (dim0 % N == 0 on every rank, 0 included).
bool nullSplits(int pattern) { return pattern == 0 || pattern == 6 || pattern == 7; }

struct Result {
  hcoll_request_t req = HCOLL_REQUEST_NULL;
  std::unique_ptr<Tensor> in;
  std::vector<int64_t> splits;
};

void check(hcoll_dtype_t t, int pattern, hcoll_request_t req, const std::vector<int64_t>& rowShape) {
  const int r = worldRank();
  const int n = worldSize();
  int64_t rowElems = 1;
  for (int64_t d : rowShape) rowElems *= d;
  const hcoll_tensor_t out = outputOf(req);
  const int64_t* recv = receivedSplitsOf(req, n);
  int64_t total = 0;
  for (int src = 0; src < n; ++src) {
    HREQUIRE(recv[src] == splitOf(pattern, src, r, n));
    total += recv[src];
  }
  HREQUIRE(out.dtype == t);
  HREQUIRE(out.ndim == static_cast<int>(rowShape.size()) + 1);
  HREQUIRE(out.shape[0] == total);
  int64_t at = 0;
  for (int src = 0; src < n; ++src) {
    int64_t first = 0;  // first row of src's input that goes to me
    for (int dst = 0; dst < r; ++dst) first += splitOf(pattern, src, dst, n);
    for (int64_t k = 0; k < recv[src]; ++k) {
      for (int64_t j = 0; j < rowElems; ++j, ++at) {
        HINFO("dtype " << dtypeName(t) << " pattern " << pattern << " src " << src << " row " << k);
        HREQUIRE(close(t, outputElement(out, at), a2aValue(t, src, first + k, j)));
      }
    }
  }
}

}  // namespace

HTEST_CASE("alltoall: every dtype, even/uneven/zero splits, trailing rows, empty inputs",
          "[alltoall]") {
  const int r = worldRank();
  const int n = worldSize();
  const std::vector<std::vector<int64_t>> rowShapes = {{}, {3}};
  for (hcoll_dtype_t t : allDtypes()) {
    struct Pending {
      Result res;
      int pattern;
      std::vector<int64_t> rowShape;
    };
    std::vector<Pending> pending;
    for (int pattern = 0; pattern < kPatterns; ++pattern) {
      for (const auto& rs : rowShapes) {
        Pending p;
        p.pattern = pattern;
        p.rowShape = rs;
        int64_t rows = trailingRows(pattern, r);
        for (int dst = 0; dst < n; ++dst) {
          p.res.splits.push_back(splitOf(pattern, r, dst, n));
          rows += p.res.splits.back();
        }
        std::vector<int64_t> shape = {rows};
        shape.insert(shape.end(), rs.begin(), rs.end());
        p.res.in = std::make_unique<Tensor>(t, shape);
        int64_t rowElems = rows == 0 ? 0 : p.res.in->elements() / rows;
        for (int64_t k = 0; k < rows; ++k) {
          for (int64_t j = 0; j < rowElems; ++j) p.res.in->set(k * rowElems + j, a2aValue(t, r, k, j));
        }
        auto d = p.res.in->desc();
        std::string name = std::string("a2a.") + dtypeName(t) + "." + std::to_string(pattern) +
                           "." + std::to_string(rs.size());
        HINFO(name << ": dim0 " << rows);
        HCOLL_REQUIRE_OK(hcoll_alltoall(world(), name.c_str(), &d,
                                        nullSplits(pattern) ? nullptr : p.res.splits.data(),
                                        &p.res.req));
        pending.push_back(std::move(p));
      }
    }
    for (auto& p : pending) {
      HCOLL_REQUIRE_OK(hcoll_wait(p.res.req, 30));
      check(t, p.pattern, p.res.req, p.rowShape);
      HCOLL_REQUIRE_OK(hcoll_request_free(p.res.req));
    }
  }
}

HTEST_CASE("alltoall: an empty input submitted alone, on one rank and on every rank", "[alltoall]") {
  const int r = worldRank();
  const int n = worldSize();
  // Alone in its cycle (waited before the next), unlike the batches above. Case 0: rank 0 sends
  // nothing with explicit zero splits, the others send it one row each; case 1: every input is
  // empty with NULL splits; case 2: every input is empty with explicit zero splits.
  for (int which = 0; which < 3; ++which) {
    const bool empty = which > 0 || r == 0;
    std::vector<int64_t> splits(n, empty ? 0 : 1);
    Tensor in(HCOLL_INT32, {empty ? 0 : n, 2});
    for (int64_t i = 0; i < in.elements(); ++i) in.set(i, r * 100 + i);
    auto d = in.desc();
    hcoll_request_t req;
    const std::string name = "a2a.empty." + std::to_string(which);
    HINFO(name);
    const int64_t* sp = which == 1 ? nullptr : splits.data();
    HCOLL_REQUIRE_OK(hcoll_alltoall(world(), name.c_str(), &d, sp, &req));
    HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
    const hcoll_tensor_t out = outputOf(req);
    const int64_t* recv = receivedSplitsOf(req, n);
    HREQUIRE(out.dtype == HCOLL_INT32);
    HREQUIRE(out.ndim == 2);
    HREQUIRE(out.shape[1] == 2);
    int64_t rows = 0;
    for (int src = 0; src < n; ++src) {
      const int64_t want = which == 0 && src != 0 ? 1 : 0;
      HREQUIRE(recv[src] == want);
      for (int64_t k = 0; k < want; ++k, ++rows) {
        // Rank src's row r (its r-th split of one row) holds src * 100 + 2r, + 1.
        HREQUIRE(outputElement(out, rows * 2) == src * 100 + 2 * r);
        HREQUIRE(outputElement(out, rows * 2 + 1) == src * 100 + 2 * r + 1);
      }
    }
    HREQUIRE(out.shape[0] == rows);
    HCOLL_REQUIRE_OK(hcoll_request_free(req));
  }
}

// Blocks at and around the MPI backend's 8 KiB pieces and its lanes' 128 KiB chunks
// (mpi_transport_impl.h, mpi_shm.h), even and uneven: each peer's block is cut and routed the same way
// on both sides, from the negotiated split; at 8192 one exchange has blocks of 8192 bytes (MPI
// messages) and 8193 (a lane, on one node).
HTEST_CASE("alltoall: blocks around the MPI backend's message pieces and lanes", "[alltoall]") {
  const int r = worldRank();
  const int n = worldSize();
  for (int64_t base : {8191, 8192, 8193, 20001, 32768, 32769, 131071, 131072, 200000}) {
    std::vector<int64_t> splits(static_cast<size_t>(n));
    int64_t total = 0;
    for (int j = 0; j < n; ++j) total += splits[j] = base + (r + j) % 2;  // uneven by a byte
    Tensor in(HCOLL_UINT8, {total});
    int64_t at = 0;
    for (int j = 0; j < n; ++j) {
      for (int64_t k = 0; k < splits[j]; ++k) in.set(at++, (r * 31 + j * 7 + k) % 251);
    }
    auto d = in.desc();
    hcoll_request_t req;
    const std::string name = "a2a.piece." + std::to_string(base);
    HCOLL_REQUIRE_OK(hcoll_alltoall(world(), name.c_str(), &d, splits.data(), &req));
    HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
    const hcoll_tensor_t out = outputOf(req);
    int64_t wrong = 0, row = 0;
    for (int src = 0; src < n; ++src) {
      const int64_t rows = base + (src + r) % 2;  // what src sent to this rank
      for (int64_t k = 0; k < rows; ++k) {
        wrong += outputElement(out, row++) != static_cast<double>((src * 31 + r * 7 + k) % 251);
      }
    }
    HINFO("block " << base);
    HREQUIRE(out.shape[0] == row);
    HREQUIRE(wrong == 0);
    hcoll_request_free(req);
  }
}

HTEST_CASE("alltoall: large even exchange", "[alltoall][large]") {
  const int r = worldRank();
  const int n = worldSize();
  const int64_t per = 1 << 17;
  Tensor in(HCOLL_INT64, {per * n});
  for (int64_t i = 0; i < in.elements(); ++i) in.set(i, r * 10000000 + i);
  auto d = in.desc();
  hcoll_request_t req;
  HCOLL_REQUIRE_OK(hcoll_alltoall(world(), "a2a.large", &d, nullptr, &req));
  HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
  const hcoll_tensor_t out = outputOf(req);
  HREQUIRE(out.shape[0] == per * n);
  int64_t wrong = 0;
  for (int src = 0; src < n; ++src) {
    for (int64_t k = 0; k < per; ++k) {
      wrong += outputElement(out, src * per + k) != src * 10000000 + r * per + k;
    }
  }
  HREQUIRE(wrong == 0);
  hcoll_request_free(req);
}
