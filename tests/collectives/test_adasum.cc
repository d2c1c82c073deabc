// HCOLL_ADASUM allreduce: every floating dtype, grouped calls of tensors with different norms
// and directions (dot products per tensor, never across), zero vectors, in place and out of
// place, prescale/postscale, a joined rank's zeros, the argument checks. Two references: an
// independent one written here (the pairwise formula on whole vectors, in double, over the tree
// docs/api.md describes), compared with a tolerance for the dtype; and src/common/adasum.cc's
// reduceAll (what the loopback backend runs), which every backend must match bit for bit.
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/adasum.h"
#include "common/half.h"
#include "support/test_util.h"

using namespace htest;

namespace {

const hcoll_dtype_t kFloatTypes[] = {HCOLL_FLOAT16, HCOLL_BFLOAT16, HCOLL_FLOAT32, HCOLL_FLOAT64};

// The members of the grouped call: shapes and how their values relate across ranks.
enum class Pattern { kSame, kRandom, kZero, kTiny, kOpposed, kZeroOnRank0 };
struct Member {
  std::vector<int64_t> shape;
  Pattern pattern;
};
const std::vector<Member>& members() {
  static const std::vector<Member> kMembers = {
      {{33}, Pattern::kSame},        // identical on every rank: adasum(a, a) = a
      {{1000}, Pattern::kRandom},    // independent on each rank, large norm
      {{17}, Pattern::kZero},        // zero everywhere: 0/0 gives coefficient 1, result 0
      {{5, 7}, Pattern::kTiny},      // a small norm next to the large one
      {{64}, Pattern::kOpposed},     // anti-correlated across ranks (negative dot products)
      {{1}, Pattern::kRandom},       // one element
      {{0}, Pattern::kRandom},       // empty
      {{9}, Pattern::kZeroOnRank0},  // rank 0 contributes zeros: the identity
  };
  return kMembers;
}

// A value in roughly [-1, 1] from (rank, member, element), reproducible on every rank.
double noise(int r, size_t m, int64_t i) {
  return std::sin(1.7 * r + 0.31 * static_cast<double>(i) + 2.3 * static_cast<double>(m) +
                  0.05 * r * static_cast<double>(i));
}

double valueOf(Pattern p, int r, size_t m, int64_t i) {
  switch (p) {
    case Pattern::kSame:
      return 0.5 + 0.25 * noise(0, m, i);
    case Pattern::kRandom:
      return 8.0 * noise(r, m, i);
    case Pattern::kZero:
      return 0;
    case Pattern::kTiny:
      return 1e-3 * noise(r, m, i);
    case Pattern::kOpposed:
      return (r % 2 == 0 ? 1.0 : -0.75) * (1 + noise(0, m, i)) + 0.1 * noise(r, m, i);
    case Pattern::kZeroOnRank0:
      return r == 0 ? 0 : 2 * noise(r, m, i);
  }
  return 0;
}

// Stores v rounded to nearest (the test helper's float16 conversion is exact only for the
// small integers the other tests use: no subnormals, which these values reach).
void setValue(Tensor& t, int64_t i, double v) {
  auto* bits = static_cast<uint16_t*>(t.data());
  if (t.dtype() == HCOLL_FLOAT16) {
    bits[i] = hcoll::floatToHalf(static_cast<float>(v));
  } else if (t.dtype() == HCOLL_BFLOAT16) {
    bits[i] = hcoll::floatToBfloat16(static_cast<float>(v));
  } else {
    t.set(i, v);
  }
}

// Every rank's inputs (the values as stored in `dtype`, so rounding to 16 bits is included).
std::vector<std::vector<Tensor>> inputsOfAllRanks(hcoll_dtype_t dtype, int n) {
  std::vector<std::vector<Tensor>> all(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    for (size_t m = 0; m < members().size(); ++m) {
      Tensor t(dtype, members()[m].shape);
      for (int64_t i = 0; i < t.elements(); ++i)
        setValue(t, i, valueOf(members()[m].pattern, r, m, i));
      all[static_cast<size_t>(r)].push_back(std::move(t));
    }
  }
  return all;
}

// --- The independent reference: whole vectors in double. ---
using Vec = std::vector<double>;
Vec pairwise(const Vec& a, const Vec& b) {
  double dot = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  const double tiny = std::sqrt(DBL_MIN);  // a zero vector's coefficient is 1 (Horovod)
  const double ca = aa >= tiny ? 1 - dot / (2 * aa) : 1;
  const double cb = bb >= tiny ? 1 - dot / (2 * bb) : 1;
  Vec out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = ca * a[i] + cb * b[i];
  return out;
}
// Ranks P+i fold into i; then pairs (r, r + 2^k) for r a multiple of 2^(k+1), left = lower.
Vec referenceTree(std::vector<Vec> v) {
  const size_t n = v.size();
  size_t p = 1;
  while (p * 2 <= n) p *= 2;
  for (size_t e = p; e < n; ++e) v[e - p] = pairwise(v[e - p], v[e]);
  for (size_t d = 1; d < p; d *= 2) {
    for (size_t r = 0; r < p; r += 2 * d) v[r] = pairwise(v[r], v[r + d]);
  }
  return v[0];
}

double tolerance(hcoll_dtype_t t) {
  switch (t) {
    case HCOLL_FLOAT16:
      return 4e-3;  // a rounding to 11 bits per tree level
    case HCOLL_BFLOAT16:
      return 3e-2;  // to 8 bits per level
    case HCOLL_FLOAT32:
      return 2e-6;
    default:
      return 1e-12;
  }
}

// Checks member m of this rank's result against the reference, relative to the largest value.
void checkMember(hcoll_dtype_t dtype, const std::vector<std::vector<Tensor>>& all, size_t m,
                 const Tensor& got, double scale) {
  std::vector<Vec> v;
  for (const auto& rankInputs : all) {
    const Tensor& t = rankInputs[m];
    Vec x(static_cast<size_t>(t.elements()));
    for (int64_t i = 0; i < t.elements(); ++i) x[static_cast<size_t>(i)] = t.get(i);
    v.push_back(std::move(x));
  }
  const Vec want = referenceTree(std::move(v));
  double largest = 0;
  for (double w : want) largest = std::max(largest, std::abs(w * scale));
  int64_t wrong = 0;
  for (int64_t i = 0; i < got.elements(); ++i) {
    const double w = want[static_cast<size_t>(i)] * scale;
    if (!(std::abs(got.get(i) - w) <= tolerance(dtype) * largest)) {
      if (wrong++ == 0) {
        HINFO("member " << m << " [" << dtypeName(dtype) << "] element " << i << ": got "
                        << got.get(i) << ", want " << w);
        HCHECK(false);
      }
    }
  }
  HINFO("member " << m << " [" << dtypeName(dtype) << "]: " << wrong << " wrong");
  HREQUIRE(wrong == 0);
  if (members()[m].pattern == Pattern::kZero) {  // 0/0: exactly zero, no NaN
    for (int64_t i = 0; i < got.elements(); ++i) HREQUIRE(got.get(i) == 0);
  }
}

hcoll::DataType coreType(hcoll_dtype_t t) {
  return static_cast<hcoll::DataType>(t);
}

// The fused buffer the runtime reduces (the members in order) through adasum::reduceAll.
std::vector<uint8_t> treeResult(hcoll_dtype_t dtype, const std::vector<std::vector<Tensor>>& all) {
  std::vector<size_t> counts;
  for (const Tensor& t : all[0]) counts.push_back(static_cast<size_t>(t.elements()));
  size_t total = 0;
  for (size_t c : counts) total += c;
  const size_t es = dtypeSize(dtype);
  std::vector<std::vector<uint8_t>> fused(all.size(), std::vector<uint8_t>(total * es));
  std::vector<const void*> inputs;
  for (size_t r = 0; r < all.size(); ++r) {
    size_t at = 0;
    for (const Tensor& t : all[r]) {
      const size_t bytes = static_cast<size_t>(t.elements()) * es;
      if (bytes) std::memcpy(fused[r].data() + at, const_cast<Tensor&>(t).data(), bytes);
      at += bytes;
    }
    inputs.push_back(fused[r].data());
  }
  std::vector<uint8_t> out(total * es);
  hcoll::adasum::reduceAll(coreType(dtype), inputs, total, counts, out.data());
  return out;
}

}  // namespace

HTEST_CASE("adasum: grouped, every float dtype, per-tensor dot products, bitwise the tree",
           "[adasum]") {
  const int r = worldRank();
  const int n = worldSize();
  for (hcoll_dtype_t dtype : kFloatTypes) {
    for (bool inPlace : {true, false}) {
      HINFO(dtypeName(dtype) << (inPlace ? " in place" : " out of place"));
      const auto all = inputsOfAllRanks(dtype, n);
      std::vector<Tensor> mine;
      std::vector<Tensor> outs;
      std::vector<hcoll_tensor_t> ins, outDescs;
      for (size_t m = 0; m < members().size(); ++m) {
        mine.push_back(all[static_cast<size_t>(r)][m]);
        outs.emplace_back(dtype, members()[m].shape);
      }
      for (size_t m = 0; m < members().size(); ++m) {
        ins.push_back(mine[m].desc());
        outDescs.push_back(inPlace ? ins.back() : outs[m].desc());
      }
      hcoll_request_t req;
      const std::string name =
          std::string("adasum.group.") + dtypeName(dtype) + (inPlace ? ".in" : ".out");
      HCOLL_REQUIRE_OK(hcoll_grouped_allreduce(world(), name.c_str(), static_cast<int>(ins.size()),
                                               ins.data(), outDescs.data(), HCOLL_ADASUM, 1, 1,
                                               &req));
      HCOLL_REQUIRE_OK(waitAndFree(req));
      std::vector<Tensor>& result = inPlace ? mine : outs;
      for (size_t m = 0; m < members().size(); ++m) checkMember(dtype, all, m, result[m], 1.0);
      // Bitwise what the tree of common/adasum.h gives (the loopback backend runs exactly that).
      const std::vector<uint8_t> tree = treeResult(dtype, all);
      size_t at = 0;
      for (size_t m = 0; m < members().size(); ++m) {
        const size_t bytes = static_cast<size_t>(result[m].elements()) * dtypeSize(dtype);
        HINFO("member " << m);
        HREQUIRE(std::memcmp(result[m].data(), tree.data() + at, bytes) == 0);
        at += bytes;
      }
      if (!inPlace) {  // the input is left as it was
        for (size_t m = 0; m < members().size(); ++m) {
          HREQUIRE(std::memcmp(mine[m].data(),
                               const_cast<Tensor&>(all[static_cast<size_t>(r)][m]).data(),
                               static_cast<size_t>(mine[m].elements()) * dtypeSize(dtype)) == 0);
        }
      }
    }
  }
}

HTEST_CASE("adasum: a single tensor, large enough for the backends' message pieces", "[adasum]") {
  const int r = worldRank();
  const int n = worldSize();
  const int64_t count = 40001;  // odd: uneven halves at every level
  for (hcoll_dtype_t dtype : {HCOLL_FLOAT16, HCOLL_FLOAT32}) {
    std::vector<std::vector<Tensor>> all(static_cast<size_t>(n));
    for (int k = 0; k < n; ++k) {
      Tensor t(dtype, {count});
      for (int64_t i = 0; i < count; ++i) setValue(t, i, noise(k, 1, i) + 0.3);
      all[static_cast<size_t>(k)].push_back(std::move(t));
    }
    Tensor in = all[static_cast<size_t>(r)][0];
    Tensor out(dtype, {count});
    auto id = in.desc(), od = out.desc();
    hcoll_request_t req;
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(),
                                     (std::string("adasum.big.") + dtypeName(dtype)).c_str(), &id,
                                     &od, HCOLL_ADASUM, 1, 1, &req));
    HCOLL_REQUIRE_OK(waitAndFree(req));
    checkMember(dtype, all, 0, out, 1.0);
    const std::vector<uint8_t> tree = treeResult(dtype, all);
    HREQUIRE(std::memcmp(out.data(), tree.data(), tree.size()) == 0);
  }
}

HTEST_CASE("adasum: prescale and postscale apply around the reduction", "[adasum]") {
  const int r = worldRank();
  const int n = worldSize();
  const hcoll_dtype_t dtype = HCOLL_FLOAT64;
  const auto all = inputsOfAllRanks(dtype, n);
  Tensor t = all[static_cast<size_t>(r)][1];
  auto d = t.desc();
  hcoll_request_t req;
  // adasum(s a, s b) = s adasum(a, b): the result is scaled by pre * post = 3 * 0.5.
  HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "adasum.scaled", &d, &d, HCOLL_ADASUM, 3.0, 0.5, &req));
  HCOLL_REQUIRE_OK(waitAndFree(req));
  checkMember(dtype, all, 1, t, 1.5);
}

HTEST_CASE("adasum: a joined rank's zeros are the identity", "[adasum]") {
  const int r = worldRank();
  const int n = worldSize();
  if (n < 2) return;
  const int first = n - 1;  // joins at once; the others reduce without it
  hcoll_request_t join = HCOLL_REQUEST_NULL;
  const hcoll_dtype_t dtype = HCOLL_FLOAT32;
  auto all = inputsOfAllRanks(dtype, n);
  if (r == first) {
    HCOLL_REQUIRE_OK(hcoll_join(world(), &join));
  } else {
    Tensor t = all[static_cast<size_t>(r)][1];
    auto d = t.desc();
    hcoll_request_t req;
    HCOLL_REQUIRE_OK(hcoll_allreduce(world(), "adasum.join", &d, &d, HCOLL_ADASUM, 1, 1, &req));
    HCOLL_REQUIRE_OK(waitAndFree(req));
    for (int64_t i = 0; i < all[static_cast<size_t>(first)][1].elements(); ++i) {
      setValue(all[static_cast<size_t>(first)][1], i, 0);
    }
    checkMember(dtype, all, 1, t, 1.0);
    HCOLL_REQUIRE_OK(hcoll_join(world(), &join));
  }
  HCOLL_REQUIRE_OK(waitAndFree(join));
}

HTEST_CASE("adasum: argument checks", "[adasum]") {
  Tensor ints(HCOLL_INT32, {4}), flags(HCOLL_BOOL, {4}), floats(HCOLL_FLOAT32, {4, 2});
  hcoll_request_t req = HCOLL_REQUEST_NULL;
  for (Tensor* t : {&ints, &flags}) {
    auto d = t->desc();
    HREQUIRE(hcoll_allreduce(world(), "adasum.bad", &d, &d, HCOLL_ADASUM, 1, 1, &req) ==
             HCOLL_ERR_INVALID_ARGUMENT);
    const std::string msg = hcoll_last_error();
    HINFO(msg);
    HREQUIRE(msg.find("floating dtype") != std::string::npos);
  }
  auto f = floats.desc();
  HREQUIRE(hcoll_reducescatter(world(), "adasum.rs", &f, HCOLL_ADASUM, 1, 1, &req) ==
           HCOLL_ERR_INVALID_ARGUMENT);
  HREQUIRE(std::string(hcoll_last_error()).find("allreduce operator only") != std::string::npos);
  // A grouped call with one integer member enqueues nothing (the others are still usable).
  auto i = ints.desc();
  hcoll_tensor_t group[] = {f, i};
  HREQUIRE(hcoll_grouped_allreduce(world(), "adasum.badgroup", 2, group, group, HCOLL_ADASUM, 1, 1,
                                   &req) == HCOLL_ERR_INVALID_ARGUMENT);
  HREQUIRE(std::string(hcoll_last_error()).find("ins[1]") != std::string::npos);
  // CUDA tensors: UNSUPPORTED. Without a device backend that is the tensor check's answer;
  // with one, host memory passed as device memory would be refused first, so not tried there.
  if (!hcoll_nccl_built()) {
    hcoll_tensor_t onDevice = f;
    onDevice.device = 0;
    HREQUIRE(hcoll_allreduce(world(), "adasum.cuda", &onDevice, &onDevice, HCOLL_ADASUM, 1, 1,
                             &req) == HCOLL_ERR_UNSUPPORTED);
  }
  // An op past ADASUM is still refused.
  HREQUIRE(hcoll_allreduce(world(), "adasum.op6", &f, &f, static_cast<hcoll_reduce_op_t>(6), 1, 1,
                           &req) == HCOLL_ERR_INVALID_ARGUMENT);
}
