// Caller-provided outputs (*_into): allgather, grouped allgather, alltoall, reducescatter and
// grouped reducescatter write into the caller's tensors, every dtype, in place where it applies;
// a wrong-sized output on one rank fails on every rank with MISMATCH (also when the operation's
// name is already in the response cache) and the caller's buffer is never written: canary bytes
// past its end (and, on failure, in all of it) stay as they were. Runs at 2 and 3 ranks.
#include <cstring>
#include <memory>
#include <string>

#include "collectives/reference.h"

using namespace htest;
using namespace htest::ref;

namespace {

constexpr uint8_t kCanary = 0xA5;
constexpr int64_t kCanaryRows = 2;

// A caller output of `rows` x cols, stored with kCanaryRows more rows of canary bytes after it.
class Out {
 public:
  Out(hcoll_dtype_t t, int64_t rows, int64_t cols)
      : t_(t), cols_(cols), store_(t, {rows + kCanaryRows, cols}), shape_{rows, cols} {
    std::memset(store_.data(), kCanary, bytes(rows + kCanaryRows));
  }
  hcoll_tensor_t desc() {
    hcoll_tensor_t d = store_.desc();
    d.shape = shape_;
    return d;
  }
  double get(int64_t i) const { return store_.get(i); }
  uint8_t* data() { return static_cast<uint8_t*>(store_.data()); }
  size_t bytes(int64_t rows) const { return static_cast<size_t>(rows * cols_) * dtypeSize(t_); }
  // Whether every byte from row `from` to the end of the storage still holds the canary.
  bool untouchedFrom(int64_t from) {
    const size_t end = bytes(shape_[0] + kCanaryRows);
    for (size_t b = bytes(from); b < end; ++b) {
      if (data()[b] != kCanary) return false;
    }
    return true;
  }

 private:
  hcoll_dtype_t t_;
  int64_t cols_;
  Tensor store_;
  int64_t shape_[2];
};

// Element i of rank r's allgather/alltoall input: small, exact in every dtype, distinct per rank.
double rowValue(hcoll_dtype_t t, int r, int64_t i) {
  if (t == HCOLL_BOOL) return (r + i) % 2;
  return static_cast<double>((r * 13 + i) % 100);
}

std::unique_ptr<Tensor> rowsOf(hcoll_dtype_t t, int r, int64_t rows, int64_t cols) {
  auto in = std::make_unique<Tensor>(t, std::vector<int64_t>{rows, cols});
  for (int64_t i = 0; i < in->elements(); ++i) in->set(i, rowValue(t, r, i));
  return in;
}

void expectMismatch(hcoll_request_t req, const std::string& name) {
  hcoll_status_t s = hcoll_wait(req, 30);
  std::string message = hcoll_request_error(req);
  hcoll_request_free(req);
  HINFO(hcoll_status_string(s) << ": " << message);
  HREQUIRE(s == HCOLL_ERR_MISMATCH);
  HREQUIRE(message.find("'" + name + "'") != std::string::npos);
  HREQUIRE(message.find("dim0") != std::string::npos);
  HREQUIRE(message.find("rank " + std::to_string(worldSize() - 1)) != std::string::npos);
}

constexpr int64_t kCols = 2;

}  // namespace

HTEST_CASE("allgather_into: every dtype, uneven dim0, in place, output descriptor", "[into]") {
  const int r = worldRank();
  const int n = worldSize();
  int64_t total = 0;
  for (int k = 0; k < n; ++k) total += k + 1;  // rank k gives k + 1 rows
  int64_t myOffset = r * (r + 1) / 2;
  for (hcoll_dtype_t t : allDtypes()) {
    for (bool inPlace : {false, true}) {
      Out out(t, total, kCols);
      auto in = rowsOf(t, r, r + 1, kCols);
      hcoll_tensor_t din = in->desc();
      // In place: the input is this rank's own block of the output, written there on the host
      // before out.desc() (which hands a CUDA run the device copy of it; descriptors' data, not
      // data(), are what the collective may be given).
      if (inPlace) std::memcpy(out.data() + out.bytes(myOffset), in->data(), out.bytes(r + 1));
      hcoll_tensor_t dout = out.desc();
      if (inPlace) din.data = static_cast<uint8_t*>(dout.data) + out.bytes(myOffset);
      hcoll_request_t req;
      HCOLL_REQUIRE_OK(hcoll_allgather_into(world(), nullptr, &din, &dout, nullptr, &req));
      HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
      hcoll_tensor_t view;
      HCOLL_REQUIRE_OK(hcoll_request_output(req, 0, &view));
      HREQUIRE(view.data == dout.data);  // the caller's memory, the result's shape
      HREQUIRE(view.ndim == 2);
      HREQUIRE(view.shape[0] == total);
      HCOLL_REQUIRE_OK(hcoll_request_free(req));
      int64_t row = 0;
      for (int k = 0; k < n; ++k) {
        for (int64_t i = 0; i < (k + 1) * kCols; ++i) {
          HINFO(dtypeName(t) << " in place " << inPlace << " rank " << k << " element " << i);
          HREQUIRE(close(t, out.get(row * kCols + i), rowValue(t, k, i)));
        }
        row += k + 1;
      }
      HREQUIRE(out.untouchedFrom(total));
    }
  }
}

HTEST_CASE("grouped_allgather_into: members of two dtypes, an empty one", "[into]") {
  const int r = worldRank();
  const int n = worldSize();
  auto a = rowsOf(HCOLL_INT32, r, 1, kCols);
  auto b = rowsOf(HCOLL_FLOAT16, r, r == 0 ? 0 : 2, kCols);  // rank 0 gives no rows
  Out outA(HCOLL_INT32, n, kCols), outB(HCOLL_FLOAT16, 2 * (n - 1), kCols);
  hcoll_tensor_t ins[2] = {a->desc(), b->desc()}, outs[2] = {outA.desc(), outB.desc()};
  hcoll_request_t req;
  HCOLL_REQUIRE_OK(hcoll_grouped_allgather_into(world(), "into.gag", 2, ins, outs, nullptr, &req));
  HCOLL_REQUIRE_OK(waitAndFree(req));
  for (int k = 0; k < n; ++k) {
    for (int64_t i = 0; i < kCols; ++i)
      HREQUIRE(outA.get(k * kCols + i) == rowValue(HCOLL_INT32, k, i));
  }
  for (int k = 1; k < n; ++k) {
    for (int64_t i = 0; i < 2 * kCols; ++i) {
      HREQUIRE(outB.get((k - 1) * 2 * kCols + i) == rowValue(HCOLL_FLOAT16, k, i));
    }
  }
  HREQUIRE(outA.untouchedFrom(n));
  HREQUIRE(outB.untouchedFrom(2 * (n - 1)));
}

HTEST_CASE("alltoall_into: every dtype, a receive buffer larger than needed", "[into]") {
  const int r = worldRank();
  const int n = worldSize();
  // Rank r sends j + 1 rows to rank j, so rank r receives n * (r + 1) rows (r + 1 from each).
  std::vector<int64_t> splits(static_cast<size_t>(n));
  int64_t sent = 0;
  for (int j = 0; j < n; ++j) sent += (splits[j] = j + 1);
  const int64_t received = static_cast<int64_t>(n) * (r + 1);
  for (hcoll_dtype_t t : allDtypes()) {
    auto in = rowsOf(t, r, sent, kCols);
    Out out(t, received + 1, kCols);  // one spare row: must stay untouched
    hcoll_tensor_t din = in->desc(), dout = out.desc();
    hcoll_request_t req;
    HCOLL_REQUIRE_OK(
        hcoll_alltoall_into(world(), "into.a2a", &din, splits.data(), &dout, nullptr, &req));
    HCOLL_REQUIRE_OK(hcoll_wait(req, 30));
    const int64_t* got;
    int count;
    HCOLL_REQUIRE_OK(hcoll_request_received_splits(req, 0, &got, &count));
    HREQUIRE(count == n);
    for (int k = 0; k < n; ++k) HREQUIRE(got[k] == r + 1);
    hcoll_tensor_t view;
    HCOLL_REQUIRE_OK(hcoll_request_output(req, 0, &view));
    HREQUIRE(view.data == dout.data);
    HREQUIRE(view.shape[0] == received);
    HCOLL_REQUIRE_OK(hcoll_request_free(req));
    // From rank k: its rows [sum_{j<r} (j + 1), + r + 1), i.e. starting at row r (r + 1) / 2.
    for (int k = 0; k < n; ++k) {
      const int64_t srcRow = r * (r + 1) / 2;
      for (int64_t i = 0; i < (r + 1) * kCols; ++i) {
        HINFO(dtypeName(t) << " from rank " << k << " element " << i);
        HREQUIRE(close(t, out.get((k * (r + 1)) * kCols + i), rowValue(t, k, srcRow * kCols + i)));
      }
    }
    HREQUIRE(out.untouchedFrom(received));
  }
}

HTEST_CASE("reducescatter_into: every dtype, uneven d0, in place", "[into]") {
  const int r = worldRank();
  const int n = worldSize();
  const int64_t d0 = 2 * n + 1;
  const int64_t rows = rsCount(d0, n, r);
  const int64_t first = rsOffset(d0, n, r) * kCols;
  for (hcoll_dtype_t t : allDtypes()) {
    if (!memoryReduces(t)) continue;  // UNSUPPORTED at submission (tests/gpu checks that)
    const hcoll_reduce_op_t op = t == HCOLL_BOOL ? HCOLL_MAX : HCOLL_SUM;
    for (bool inPlace : {false, true}) {
      Tensor in(t, {d0, kCols});
      for (int64_t i = 0; i < in.elements(); ++i) in.set(i, value(t, op, r, i));
      Out out(t, rows, kCols);
      hcoll_tensor_t din = in.desc(), dout = out.desc();
      // In place: the output is the input's own rows [off_r, off_r + c_r).
      if (inPlace) dout.data = static_cast<uint8_t*>(din.data) + first * dtypeSize(t);
      hcoll_request_t req;
      HCOLL_REQUIRE_OK(
          hcoll_reducescatter_into(world(), nullptr, &din, &dout, op, 1.0, 1.0, nullptr, &req));
      HCOLL_REQUIRE_OK(waitAndFree(req));
      for (int64_t i = 0; i < rows * kCols; ++i) {
        const double got = inPlace ? in.get(first + i) : out.get(i);
        HINFO(dtypeName(t) << " in place " << inPlace << " element " << i);
        HREQUIRE(close(t, got, expected(t, op, n, first + i)));
      }
      HREQUIRE(out.untouchedFrom(inPlace ? 0 : rows));
    }
  }
}

HTEST_CASE("grouped_reducescatter_into: two members, scaling", "[into]") {
  const int r = worldRank();
  const int n = worldSize();
  const std::vector<int64_t> d0s = {n + 1, 3 * n};
  std::vector<std::unique_ptr<Tensor>> ins;
  std::vector<std::unique_ptr<Out>> outs;
  std::vector<hcoll_tensor_t> dins, douts;
  for (int64_t d0 : d0s) {
    ins.push_back(std::make_unique<Tensor>(HCOLL_FLOAT32, std::vector<int64_t>{d0, kCols}));
    for (int64_t i = 0; i < ins.back()->elements(); ++i)
      ins.back()->set(i, value(HCOLL_FLOAT32, HCOLL_SUM, r, i));
    outs.push_back(std::make_unique<Out>(HCOLL_FLOAT32, rsCount(d0, n, r), kCols));
    dins.push_back(ins.back()->desc());
    douts.push_back(outs.back()->desc());
  }
  hcoll_request_t req;
  HCOLL_REQUIRE_OK(hcoll_grouped_reducescatter_into(
      world(), "into.grs", 2, dins.data(), douts.data(), HCOLL_SUM, 2.0, 0.5, nullptr, &req));
  HCOLL_REQUIRE_OK(waitAndFree(req));
  for (size_t m = 0; m < d0s.size(); ++m) {
    const int64_t rows = rsCount(d0s[m], n, r);
    const int64_t first = rsOffset(d0s[m], n, r) * kCols;
    for (int64_t i = 0; i < rows * kCols; ++i) {
      HREQUIRE(close(HCOLL_FLOAT32, outs[m]->get(i),
                    expected(HCOLL_FLOAT32, HCOLL_SUM, n, first + i, 2.0, 0.5)));
    }
    HREQUIRE(outs[m]->untouchedFrom(rows));
  }
}

HTEST_CASE("into: a wrong-sized output on one rank is MISMATCH everywhere, nothing written",
          "[into][mismatch]") {
  const int r = worldRank();
  const int n = worldSize();
  const bool bad = r == n - 1;
  // Each operation runs once correctly first, so the wrong size also meets the response cache.
  for (int round = 0; round < 3; ++round) {
    const bool wrong = round == 2;
    HINFO("round " << round);
    {  // allgather: the last rank's output is one row short
      auto in = rowsOf(HCOLL_INT64, r, 1, kCols);
      Out out(HCOLL_INT64, n - (wrong && bad ? 1 : 0), kCols);
      hcoll_tensor_t din = in->desc(), dout = out.desc();
      hcoll_request_t req;
      HCOLL_REQUIRE_OK(hcoll_allgather_into(world(), "into.bad.ag", &din, &dout, nullptr, &req));
      if (wrong) {
        expectMismatch(req, "into.bad.ag");
        HREQUIRE(out.untouchedFrom(0));
      } else {
        HCOLL_REQUIRE_OK(waitAndFree(req));
      }
    }
    {  // reducescatter: the last rank's output is one row too long
      const int64_t d0 = 2 * n;
      Tensor in(HCOLL_FLOAT32, {d0, kCols});
      Out out(HCOLL_FLOAT32, 2 + (wrong && bad ? 1 : 0), kCols);
      hcoll_tensor_t din = in.desc(), dout = out.desc();
      hcoll_request_t req;
      HCOLL_REQUIRE_OK(hcoll_reducescatter_into(world(), "into.bad.rs", &din, &dout, HCOLL_SUM, 1.0,
                                                1.0, nullptr, &req));
      if (wrong) {
        expectMismatch(req, "into.bad.rs");
        HREQUIRE(out.untouchedFrom(0));
      } else {
        HCOLL_REQUIRE_OK(waitAndFree(req));
      }
    }
    {  // alltoall: the last rank's receive buffer is one row too small (larger would be fine)
      auto in = rowsOf(HCOLL_UINT8, r, 2 * n, kCols);
      Out out(HCOLL_UINT8, 2 * n - (wrong && bad ? 1 : 0), kCols);
      hcoll_tensor_t din = in->desc(), dout = out.desc();
      hcoll_request_t req;
      HCOLL_REQUIRE_OK(
          hcoll_alltoall_into(world(), "into.bad.a2a", &din, nullptr, &dout, nullptr, &req));
      if (wrong) {
        expectMismatch(req, "into.bad.a2a");
        HREQUIRE(out.untouchedFrom(0));
      } else {
        HCOLL_REQUIRE_OK(waitAndFree(req));
      }
    }
    {  // grouped allgather: only member 1 of the last rank is wrong; the whole group fails
      auto a = rowsOf(HCOLL_INT32, r, 1, kCols);
      auto b = rowsOf(HCOLL_INT32, r, 2, kCols);
      Out outA(HCOLL_INT32, n, kCols), outB(HCOLL_INT32, 2 * n + (wrong && bad ? 5 : 0), kCols);
      hcoll_tensor_t ins[2] = {a->desc(), b->desc()}, outs[2] = {outA.desc(), outB.desc()};
      hcoll_request_t req;
      HCOLL_REQUIRE_OK(
          hcoll_grouped_allgather_into(world(), "into.bad.gag", 2, ins, outs, nullptr, &req));
      if (wrong) {
        expectMismatch(req, "into.bad.gag");
        HREQUIRE(outA.untouchedFrom(0));
        HREQUIRE(outB.untouchedFrom(0));
      } else {
        HCOLL_REQUIRE_OK(waitAndFree(req));
      }
    }
  }
  // The communicator keeps working after the mismatches.
  Tensor x(HCOLL_INT32, {1});
  x.set(0, 1);
  hcoll_tensor_t dx = x.desc();
  hcoll_request_t req;
  HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "into.after", &dx, &dx, HCOLL_SUM, 1, 1, &req));
  HCOLL_REQUIRE_OK(waitAndFree(req));
  HREQUIRE(x.get(0) == n);
}

HTEST_CASE("into: what one rank can check alone is INVALID_ARGUMENT at once", "[into][errors]") {
  Tensor in(HCOLL_FLOAT32, {4, kCols}), other(HCOLL_INT32, {4, kCols}),
      cols3(HCOLL_FLOAT32, {4, 3});
  Tensor scalar(HCOLL_FLOAT32, {});
  hcoll_tensor_t din = in.desc(), dother = other.desc(), d3 = cols3.desc(), d0 = scalar.desc();
  hcoll_request_t req = HCOLL_REQUEST_NULL;
  const auto E = HCOLL_ERR_INVALID_ARGUMENT;
  HREQUIRE(hcoll_allgather_into(world(), nullptr, &din, nullptr, nullptr, &req) == E);
  HREQUIRE(hcoll_allgather_into(world(), nullptr, &din, &dother, nullptr, &req) == E);  // dtype
  HREQUIRE(std::string(hcoll_last_error()).find("out") != std::string::npos);
  HREQUIRE(hcoll_allgather_into(world(), nullptr, &din, &d3, nullptr, &req) == E);  // dims[1:]
  HREQUIRE(hcoll_reducescatter_into(world(), nullptr, &din, &d0, HCOLL_SUM, 1, 1, nullptr, &req) ==
          E);  // ndim
  hcoll_tensor_t outs[1] = {din};
  HREQUIRE(hcoll_grouped_reducescatter_into(world(), nullptr, 1, &din, nullptr, HCOLL_SUM, 1, 1,
                                           nullptr, &req) == E);
  hcoll_op_options_t future{};
  future.mask = uint64_t{1} << 63;  // an option this library does not know
  HREQUIRE(hcoll_grouped_allgather_into(world(), nullptr, 1, &din, outs, &future, &req) == E);
  HREQUIRE(std::string(hcoll_last_error()).find("mask") != std::string::npos);
  // alltoall is not in place: out overlapping in is refused.
  HREQUIRE(hcoll_alltoall_into(world(), nullptr, &din, nullptr, &din, nullptr, &req) == E);
  HREQUIRE(req == HCOLL_REQUEST_NULL);  // nothing was enqueued
  // mask 0 is the same as NULL.
  hcoll_op_options_t none{};
  Out out(HCOLL_FLOAT32, 4 * worldSize(), kCols);
  hcoll_tensor_t dout = out.desc();
  HCOLL_REQUIRE_OK(hcoll_allgather_into(world(), "into.opts", &din, &dout, &none, &req));
  HCOLL_REQUIRE_OK(waitAndFree(req));
}
