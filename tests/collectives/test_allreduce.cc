// allreduce and grouped_allreduce: every dtype x op, in place and out of place, sizes 0/1/odd/
// multi-dim/large, prescale/postscale with integer truncation, bool OR/AND.
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "collectives/reference.h"

using namespace htest;
using namespace htest::ref;

namespace {

struct Case {
  Case(hcoll_dtype_t t, hcoll_reduce_op_t o, std::vector<int64_t> shape, bool inPlace)
      : dtype(t), op(o), in(t, shape), out(t, shape), inPlace(inPlace) {}
  hcoll_dtype_t dtype;
  hcoll_reduce_op_t op;
  Tensor in, out;
  bool inPlace;
  hcoll_request_t req = HCOLL_REQUEST_NULL;
  double pre = 1.0, post = 1.0;
};

std::string caseName(const Case& c, size_t k) {
  return std::string("ar.") + dtypeName(c.dtype) + "." + opName(c.op) + "." + std::to_string(k);
}

// Submits every case at once (so they are negotiated and fused together), waits for all, checks.
void runCases(std::vector<std::unique_ptr<Case>>& cases) {
  const int r = worldRank();
  const int n = worldSize();
  for (size_t k = 0; k < cases.size(); ++k) {
    Case& c = *cases[k];
    for (int64_t i = 0; i < c.in.elements(); ++i) c.in.set(i, value(c.dtype, c.op, r, i));
    auto in = c.in.desc();
    auto out = c.inPlace ? in : c.out.desc();
    HCOLL_REQUIRE_OK(
        hcoll_allreduce(world(), caseName(c, k).c_str(), &in, &out, c.op, c.pre, c.post, &c.req));
  }
  for (size_t k = 0; k < cases.size(); ++k) {
    Case& c = *cases[k];
    HINFO(caseName(c, k) << (c.inPlace ? " in place" : " out of place"));
    HCOLL_REQUIRE_OK(waitAndFree(c.req));
    const Tensor& result = c.inPlace ? c.in : c.out;
    checkAll(
        c.dtype, result.elements(), [&](int64_t i) { return result.get(i); },
        [&](int64_t i) { return expected(c.dtype, c.op, n, i, c.pre, c.post); }, caseName(c, k));
    if (!c.inPlace) {  // out of place leaves the input untouched
      for (int64_t i = 0; i < c.in.elements(); ++i) {
        HREQUIRE(c.in.get(i) == value(c.dtype, c.op, r, i));
      }
    }
  }
}

}  // namespace

HTEST_CASE("allreduce: every dtype and op, in place and out of place", "[allreduce]") {
  // {5003}: over 4 KiB in every dtype and not a multiple of any small rank count, so the MPI
  // backend's point-to-point schedule runs with uneven blocks (mpi_p2p.h).
  const std::vector<std::vector<int64_t>> shapes = {{0}, {1}, {7}, {3, 5, 2}, {}, {5003}};
  for (hcoll_dtype_t t : allDtypes()) {
    if (!memoryReduces(t)) continue;  // UNSUPPORTED at submission (tests/gpu checks that)
    std::vector<std::unique_ptr<Case>> cases;
    for (hcoll_reduce_op_t op : allOps()) {
      if (t == HCOLL_BOOL && op == HCOLL_AVERAGE) continue;  // INVALID_ARGUMENT, tested elsewhere
      for (const auto& shape : shapes) {
        for (bool inPlace : {true, false}) {
          cases.push_back(std::make_unique<Case>(t, op, shape, inPlace));
        }
      }
    }
    runCases(cases);
  }
}

HTEST_CASE("allreduce: prescale and postscale, integers truncate toward zero", "[allreduce]") {
  for (hcoll_dtype_t t : allDtypes()) {
    if (t == HCOLL_BOOL || !memoryReduces(t)) continue;
    std::vector<std::unique_ptr<Case>> cases;
    for (hcoll_reduce_op_t op : {HCOLL_SUM, HCOLL_AVERAGE, HCOLL_MAX}) {
      for (bool inPlace : {true, false}) {
        auto c = std::make_unique<Case>(t, op, std::vector<int64_t>{11}, inPlace);
        c->pre = 1.5;
        c->post = 0.5;
        cases.push_back(std::move(c));
      }
    }
    runCases(cases);
  }
}

HTEST_CASE("allreduce: integer AVERAGE truncates toward zero", "[allreduce]") {
  const int r = worldRank();
  const int n = worldSize();
  // Rank 0 contributes -n-1 (or n+1), the others 0: the mean -(n+1)/n truncates to -1 (1), on
  // one rank it is -2 (2).
  Tensor t(HCOLL_INT32, {2});
  t.set(0, r == 0 ? -(n + 1) : 0);
  t.set(1, r == 0 ? n + 1 : 0);
  auto d = t.desc();
  hcoll_request_t req;
  HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "ar.avgtrunc", &d, &d, HCOLL_AVERAGE, 1.0, 1.0, &req));
  HCOLL_REQUIRE_OK(waitAndFree(req));
  HREQUIRE(t.get(0) == (n == 1 ? -2 : -1));
  HREQUIRE(t.get(1) == (n == 1 ? 2 : 1));
}

HTEST_CASE("allreduce: AVERAGE is exact when the sum is a multiple of N", "[allreduce]") {
  const int r = worldRank();
  const int n = worldSize();
  // Element i on rank r is i % 5 + 2 * ((r + i) % n) (minus 5 for signed types): the ranks' sum is
  // n * (i % 5) + n * (n - 1), so the mean i % 5 + n - 1 (- 5) is an integer and SUM x 1/N gives
  // it exactly in every dtype (checked without tolerance; at N = 3, 1/N is inexact in any float).
  for (hcoll_dtype_t t : allDtypes()) {
    if (t == HCOLL_BOOL || !memoryReduces(t)) continue;  // AVERAGE of bool: INVALID_ARGUMENT
    const double shift = isUnsigned(t) ? 0 : -5;
    Tensor in(t, {13}), out(t, {13});
    for (int64_t i = 0; i < 13; ++i) in.set(i, i % 5 + 2 * ((r + i) % n) + shift);
    auto id = in.desc(), od = out.desc();
    hcoll_request_t req;
    const std::string name = std::string("ar.avgexact.") + dtypeName(t);
    HCOLL_REQUIRE_OK(
        hcoll_allreduce(world(), name.c_str(), &id, &od, HCOLL_AVERAGE, 1.0, 1.0, &req));
    HCOLL_REQUIRE_OK(waitAndFree(req));
    for (int64_t i = 0; i < 13; ++i) {
      HINFO(name << " element " << i);
      HREQUIRE(out.get(i) == i % 5 + n - 1 + shift);
    }
  }
}

HTEST_CASE("allreduce: bool treats any nonzero byte as true", "[allreduce]") {
  const int r = worldRank();
  Tensor orT(HCOLL_BOOL, {3}), andT(HCOLL_BOOL, {3});
  auto* o = static_cast<uint8_t*>(orT.data());
  auto* a = static_cast<uint8_t*>(andT.data());
  // element 0: only rank 0 true (as 0x80); 1: all true (0xff); 2: none true.
  o[0] = r == 0 ? 0x80 : 0;
  o[1] = 0xff;
  o[2] = 0;
  a[0] = r == 0 ? 0x80 : 0;
  a[1] = static_cast<uint8_t>(2 + r);
  a[2] = 0;
  auto od = orT.desc(), ad = andT.desc();
  hcoll_request_t r1, r2;
  HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "ar.bool.or", &od, &od, HCOLL_MAX, 1.0, 1.0, &r1));
  HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "ar.bool.and", &ad, &ad, HCOLL_PRODUCT, 1.0, 1.0, &r2));
  HCOLL_REQUIRE_OK(waitAndFree(r1));
  HCOLL_REQUIRE_OK(waitAndFree(r2));
  HREQUIRE(o[0] != 0);
  HREQUIRE(o[1] != 0);
  HREQUIRE(o[2] == 0);
  HREQUIRE((a[0] != 0) == (worldSize() == 1));  // false wherever another rank contributes
  HREQUIRE(a[1] != 0);
  HREQUIRE(a[2] == 0);
}

HTEST_CASE("allreduce: large tensors", "[allreduce][large]") {
  std::vector<std::unique_ptr<Case>> cases;
  cases.push_back(
      std::make_unique<Case>(HCOLL_FLOAT32, HCOLL_SUM, std::vector<int64_t>{1 << 20}, true));
  cases.push_back(
      std::make_unique<Case>(HCOLL_INT32, HCOLL_AVERAGE, std::vector<int64_t>{1 << 20}, false));
  cases.push_back(std::make_unique<Case>(HCOLL_FLOAT16, HCOLL_MAX,
                                         std::vector<int64_t>{1 << 10, 1 << 10}, false));
  runCases(cases);
}

HTEST_CASE("grouped_allreduce: mixed shapes and dtypes in one request", "[allreduce][grouped]") {
  const int r = worldRank();
  const int n = worldSize();
  const std::vector<std::pair<hcoll_dtype_t, std::vector<int64_t>>> members = {
      {HCOLL_FLOAT32, {4}}, {HCOLL_INT64, {2, 3}},      {HCOLL_FLOAT16, {5}},  {HCOLL_FLOAT32, {0}},
      {HCOLL_UINT8, {9}},   {HCOLL_FLOAT64, {1, 1, 3}}, {HCOLL_BFLOAT16, {6}}, {HCOLL_INT32, {}}};
  for (hcoll_reduce_op_t op : allOps()) {
    std::vector<std::unique_ptr<Tensor>> ins, outs;
    std::vector<hcoll_tensor_t> inDescs, outDescs;
    for (size_t m = 0; m < members.size(); ++m) {
      ins.push_back(std::make_unique<Tensor>(members[m].first, members[m].second));
      outs.push_back(std::make_unique<Tensor>(members[m].first, members[m].second));
      for (int64_t i = 0; i < ins[m]->elements(); ++i)
        ins[m]->set(i, value(members[m].first, op, r, i));
      inDescs.push_back(ins[m]->desc());
      // Alternate in place and out of place within the group.
      outDescs.push_back(m % 2 ? ins[m]->desc() : outs[m]->desc());
    }
    hcoll_request_t req;
    HCOLL_REQUIRE_OK(hcoll_grouped_allreduce(world(), (std::string("gar.") + opName(op)).c_str(),
                                             static_cast<int>(members.size()), inDescs.data(),
                                             outDescs.data(), op, 1.0, 1.0, &req));
    HCOLL_REQUIRE_OK(waitAndFree(req));
    for (size_t m = 0; m < members.size(); ++m) {
      const Tensor& res = m % 2 ? *ins[m] : *outs[m];
      hcoll_dtype_t t = members[m].first;
      checkAll(
          t, res.elements(), [&](int64_t i) { return res.get(i); },
          [&](int64_t i) { return expected(t, op, n, i); },
          std::string("grouped member ") + std::to_string(m) + " " + opName(op));
    }
  }
}

HTEST_CASE("allreduce: repeated names hit the response cache and stay correct", "[allreduce]") {
  const int r = worldRank();
  const int n = worldSize();
  hcoll_comm_stats_t before{HCOLL_COMM_STATS_FIELD_ALL}, after{HCOLL_COMM_STATS_FIELD_ALL};
  HCOLL_REQUIRE_OK(hcoll_comm_stats(world(), &before));
  for (int iter = 0; iter < 5; ++iter) {
    Tensor t(HCOLL_INT32, {3});
    for (int i = 0; i < 3; ++i) t.set(i, r * 10 + i + iter);
    auto d = t.desc();
    hcoll_request_t req;
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "ar.cached", &d, &d, HCOLL_SUM, 1.0, 1.0, &req));
    HCOLL_REQUIRE_OK(waitAndFree(req));
    for (int i = 0; i < 3; ++i) HREQUIRE(t.get(i) == 10 * n * (n - 1) / 2 + n * (i + iter));
  }
  HCOLL_REQUIRE_OK(hcoll_comm_stats(world(), &after));
  // Only with the response cache on (the suite may also run under HCOLL_CACHE_CAPACITY=0).
  const char* capacity = std::getenv("HCOLL_CACHE_CAPACITY");
  if (capacity == nullptr || std::string(capacity) != "0") {
    HREQUIRE(after.cache_hits - before.cache_hits >= 4);
  } else {
    HREQUIRE(after.cache_hits == before.cache_hits);
  }
}

HTEST_CASE("allreduce: float16/bfloat16 SUM accumulates in float32 and rounds once",
           "[allreduce][half_accumulate]") {
  // Rank 0 holds a value whose 16-bit neighbours are 2 apart (float16 2048, bfloat16 256); every
  // other rank adds 1. Rounded to 16 bits after each pairwise step, big + 1 is big again, so the
  // sum stayed at 2048 (3 ranks); in float32 it is big + N - 1, rounded once (2050 at 3 ranks,
  // 2052 at 4: 2051 is a tie, to even).
  const int r = worldRank();
  const int n = worldSize();
  for (hcoll_dtype_t dtype : {HCOLL_FLOAT16, HCOLL_BFLOAT16}) {
    const float big = dtype == HCOLL_FLOAT16 ? 2048.0f : 256.0f;
    const std::string tag = dtype == HCOLL_FLOAT16 ? "f16" : "bf16";
    Tensor t(dtype, {3});
    t.set(0, r == 0 ? big : 1.0);
    t.set(1, 0.5);
    t.set(2, r == 0 ? -big : 1.0);
    auto d = t.desc();
    hcoll_request_t req;
    HCOLL_REQUIRE_OK(
        hcoll_allreduce(world(), ("half.sum." + tag).c_str(), &d, &d, HCOLL_SUM, 1, 1, &req));
    HCOLL_REQUIRE_OK(waitAndFree(req));
    HINFO(tag << " at " << n << " ranks");
    HREQUIRE(t.get(0) == ref::roundToHalfPrecision(dtype, big + static_cast<float>(n - 1)));
    HREQUIRE(t.get(1) == 0.5 * n);
    HREQUIRE(t.get(2) == ref::roundToHalfPrecision(dtype, -big + static_cast<float>(n - 1)));

    // Out of place: AVERAGE divides the once-rounded sum by N (in the unpack, after the
    // reduction), and rounds that once more.
    Tensor in(dtype, {2}), out(dtype, {2});
    in.set(0, r == 0 ? big : 1.0);
    in.set(1, 2.0);
    auto di = in.desc(), dout = out.desc();
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), ("half.avg." + tag).c_str(), &di, &dout,
                                     HCOLL_AVERAGE, 1, 1, &req));
    HCOLL_REQUIRE_OK(waitAndFree(req));
    const double sum = ref::roundToHalfPrecision(dtype, big + static_cast<float>(n - 1));
    HREQUIRE(out.get(0) == ref::roundToHalfPrecision(dtype, static_cast<float>(sum / n)));
    HREQUIRE(out.get(1) == 2.0);
  }
}

// Every rank must end with bitwise the same result, also where the op's result depends on operand
// order (MIN/MAX of a NaN, of -0 and +0): one block reduced on one rank and copied, never
// reduced in a different order per rank. Checked by allgathering each rank's result bytes.
HTEST_CASE("allreduce: every rank gets bitwise the same result, NaN and signed zeros included",
           "[allreduce]") {
  const int r = worldRank();
  const int n = worldSize();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t elements : {int64_t{8}, int64_t{4099}}) {  // both sides of the p2p threshold
    for (hcoll_dtype_t dtype : {HCOLL_FLOAT32, HCOLL_FLOAT64, HCOLL_FLOAT16}) {
      for (hcoll_reduce_op_t op : {HCOLL_MIN, HCOLL_MAX, HCOLL_SUM}) {
        const size_t width = dtypeSize(dtype);
        Tensor in(dtype, {elements});
        for (int64_t i = 0; i < elements; ++i) {
          // Ranks disagree on which element is NaN or which zero is negative.
          const int64_t kind = (i + r) % 4;
          in.set(i, kind == 0 ? nan : kind == 1 ? -0.0 : kind == 2 ? 0.0 : double(i % 7));
        }
        auto desc = in.desc();
        hcoll_request_t req = HCOLL_REQUEST_NULL;
        const std::string name =
            "bitwise." + std::to_string(elements) + "." + dtypeName(dtype) + "." + opName(op);
        HCOLL_REQUIRE_OK(hcoll_allreduce(world(), name.c_str(), &desc, &desc, op, 1.0, 1.0, &req));
        HCOLL_REQUIRE_OK(waitAndFree(req));
        // Gather every rank's result as bytes and compare them with rank 0's.
        const auto rankBytes = static_cast<int64_t>(static_cast<size_t>(elements) * width);
        Tensor mine(HCOLL_UINT8, {rankBytes});
        std::memcpy(mine.data(), in.data(), static_cast<size_t>(rankBytes));
        Tensor all(HCOLL_UINT8, {rankBytes * n});
        auto mineDesc = mine.desc();
        auto allDesc = all.desc();
        HCOLL_REQUIRE_OK(hcoll_allgather_into(world(), (name + ".check").c_str(), &mineDesc,
                                              &allDesc, nullptr, &req));
        HCOLL_REQUIRE_OK(waitAndFree(req));
        const auto* bytes = static_cast<const uint8_t*>(all.data());
        for (int j = 1; j < n; ++j) {
          HINFO(name << ": rank " << j << "'s result against rank 0's");
          HREQUIRE(std::memcmp(bytes, bytes + j * rankBytes, static_cast<size_t>(rankBytes)) == 0);
        }
      }
    }
  }
}

// The values of MIN/MAX, not only the ranks' agreement (common/reduce.h's rules, on every host
// backend): a NaN on any one rank gives NaN, and -0 orders below +0, whichever rank holds the
// NaN or the negative zero. Each rank in turn holds it, on both sides of the point-to-point
// threshold (MPI's own collectives with hcoll's user ops, and the point-to-point schedules).
HTEST_CASE("allreduce: MIN/MAX propagate NaN and order -0 below +0 on whichever rank holds them",
           "[allreduce][nan]") {
  const int r = worldRank();
  const int n = worldSize();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int64_t elements : {int64_t{8}, int64_t{4099}}) {
    for (hcoll_dtype_t dtype : {HCOLL_FLOAT32, HCOLL_FLOAT64, HCOLL_FLOAT16, HCOLL_BFLOAT16}) {
      for (hcoll_reduce_op_t op : {HCOLL_MIN, HCOLL_MAX}) {
        for (int holder = 0; holder < n; ++holder) {
          const bool mine = r == holder;
          // Element 4k: NaN on the holder, 1 elsewhere. 4k+1: NaN elsewhere, 1 on the holder
          // (with one rank, 1). 4k+2: -0 on the holder, +0 elsewhere. 4k+3: the reverse.
          Tensor in(dtype, {elements});
          for (int64_t i = 0; i < elements; ++i) {
            switch (i % 4) {
              case 0: in.set(i, mine ? nan : 1.0); break;
              case 1: in.set(i, mine ? 1.0 : nan); break;
              case 2: in.set(i, mine ? -0.0 : 0.0); break;
              default: in.set(i, mine ? 0.0 : -0.0); break;
            }
          }
          auto desc = in.desc();
          hcoll_request_t req = HCOLL_REQUEST_NULL;
          const std::string name = "nanrule." + std::to_string(elements) + "." +
                                   dtypeName(dtype) + "." + opName(op) + "." +
                                   std::to_string(holder);
          HCOLL_REQUIRE_OK(
              hcoll_allreduce(world(), name.c_str(), &desc, &desc, op, 1.0, 1.0, &req));
          HCOLL_REQUIRE_OK(waitAndFree(req));
          auto right = [&](int64_t i) {
            const double got = in.get(i);
            if (i % 4 == 0) return std::isnan(got);
            if (i % 4 == 1) return n == 1 ? got == 1.0 : std::isnan(got);
            // Both zeros meet whenever n > 1; one rank keeps its own.
            const bool negative = n == 1 ? (i % 4 == 2) == mine : op == HCOLL_MIN;
            return got == 0.0 && std::signbit(got) == negative;
          };
          int64_t wrong = -1;
          for (int64_t i = 0; i < elements && wrong < 0; ++i) {
            if (!right(i)) wrong = i;
          }
          HINFO(name << ": first wrong element " << wrong << " = "
                     << (wrong < 0 ? 0.0 : in.get(wrong)));
          HREQUIRE(wrong == -1);
        }
      }
    }
  }
}
