#include "runtime/wire.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "common/adasum.h"

namespace hcoll::runtime::wire {
namespace {

constexpr int64_t kMaxAgeMicros = 365ll * 24 * 3600 * 1000000;

constexpr uint32_t kRequestMagic = 0x48435251;   // "HCRQ"
constexpr uint32_t kResponseMagic = 0x48435253;  // "HCRS"

class Writer {
 public:
  template <class T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    size_t at = buf_.size();
    buf_.resize(at + sizeof v);
    std::memcpy(buf_.data() + at, &v, sizeof v);
  }
  void putString(const std::string& s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    buf_.insert(buf_.end(), s.begin(), s.end());
  }
  template <class T>
  void putVector(const std::vector<T>& v) {
    put<uint32_t>(static_cast<uint32_t>(v.size()));
    for (const T& x : v) put<T>(x);
  }
  void putShape(const Shape& shape) {
    put<uint32_t>(static_cast<uint32_t>(shape.size()));
    for (const int64_t d : shape) put<int64_t>(d);
  }
  std::vector<uint8_t> take() { return std::move(buf_); }

 private:
  std::vector<uint8_t> buf_;
};

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  template <class T>
  bool get(T* v) {
    if (size_ - pos_ < sizeof *v) return fail();
    std::memcpy(v, data_ + pos_, sizeof *v);
    pos_ += sizeof *v;
    return true;
  }
  bool getString(std::string* s, uint32_t maxLength) {
    uint32_t n;
    if (!get(&n) || n > maxLength || size_ - pos_ < n) return fail();
    s->assign(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return true;
  }
  template <class T>
  bool getVector(std::vector<T>* v) {
    uint32_t n;
    if (!get(&n) || n > kMaxListLength || (size_ - pos_) / sizeof(T) < n) return fail();
    v->resize(n);
    for (uint32_t i = 0; i < n; ++i) get(&(*v)[i]);
    return true;
  }
  bool getShape(Shape* shape) {
    uint32_t n;
    if (!get(&n) || n > kMaxListLength || (size_ - pos_) / sizeof(int64_t) < n) return fail();
    shape->clear();
    for (uint32_t i = 0; i < n; ++i) {
      int64_t d = 0;
      get(&d);  // cannot fail: the size was checked above
      shape->push_back(d);
    }
    return true;
  }
  // A count of items that are each at least `minItemBytes` long: bounds the allocation.
  bool getCount(uint32_t* n, uint32_t max, size_t minItemBytes) {
    if (!get(n) || *n > max || (size_ - pos_) / minItemBytes < *n) return fail();
    return true;
  }
  bool ok() const { return ok_; }
  bool atEnd() const { return pos_ == size_; }

 private:
  bool fail() {
    ok_ = false;
    return false;
  }
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  bool ok_ = true;
};

template <class E>
bool getEnum(Reader& r, E* e, int count) {
  uint8_t v;
  if (!r.get(&v) || v >= count) return false;
  *e = static_cast<E>(v);
  return true;
}

void putSpec(Writer& w, const OpSpec& s) {
  w.putString(s.name);
  w.put<uint8_t>(static_cast<uint8_t>(s.kind));
  w.put<uint8_t>(static_cast<uint8_t>(s.op));
  w.put<double>(s.prescale);
  w.put<double>(s.postscale);
  w.put<int32_t>(s.root);
  w.put<int32_t>(s.device);
  w.put<uint32_t>(static_cast<uint32_t>(s.members.size()));
  for (const MemberSpec& m : s.members) {
    w.put<uint8_t>(static_cast<uint8_t>(m.dtype));
    w.putShape(m.shape);
  }
  w.putVector(s.splits);
  w.putVector(s.ranks);
  w.put<int32_t>(s.color);
  w.put<int32_t>(s.key);
  w.putVector(s.outputRows);
  w.put<uint8_t>(s.autoNamed ? 1 : 0);
  w.put<int64_t>(s.ageMicros);
}

template <class Dims>
bool allNonNegative(const Dims& v) {
  return std::all_of(v.begin(), v.end(), [](int64_t x) { return x >= 0; });
}

// Reads one spec; on failure returns why (a static string), else nullptr. Beyond the bounds of
// the bytes, it rejects what no rank's C API call can produce and the coordinator or executor
// would otherwise have to trust: more than kMaxNdim dims, negative dims or splits, element or
// byte counts that overflow int64, and non-finite scale factors (NaN never compares equal, so
// it would also defeat the ranks' agreement checks).
const char* getSpec(Reader& r, OpSpec* s) {
  if (!r.getString(&s->name, kMaxNameLength)) return "bad name";
  if (!getEnum(r, &s->kind, kNumOpKinds)) return "bad operation kind";
  if (!getEnum(r, &s->op, kNumReduceOps)) return "bad reduce op";
  // Adasum is not element-wise: backends run it for allreduce only (the C API's rule).
  if (s->op == ReduceOp::kAdasum && s->kind != OpKind::kAllreduce) return "Adasum off allreduce";
  if (!r.get(&s->prescale) || !r.get(&s->postscale) || !r.get(&s->root) || !r.get(&s->device)) {
    return "truncated operation";
  }
  if (!std::isfinite(s->prescale) || !std::isfinite(s->postscale)) {
    return "non-finite scale factor";
  }
  uint32_t members;
  if (!r.getCount(&members, kMaxMembers, 1 + sizeof(uint32_t))) return "bad member count";
  s->members.resize(members);
  for (MemberSpec& m : s->members) {
    if (!getEnum(r, &m.dtype, kNumDataTypes)) return "bad dtype";
    if (!r.getShape(&m.shape)) return "truncated shape";
    if (m.shape.size() > static_cast<size_t>(kMaxNdim)) return "too many dimensions";
    if (!allNonNegative(m.shape)) return "negative dimension";
    if (!byteCountsFit(m.shape, m.dtype)) return "shape overflows the element count";
    if (s->op == ReduceOp::kAdasum && !adasum::supports(m.dtype)) return "Adasum of a non-float";
  }
  if (!r.getVector(&s->splits)) return "truncated splits";
  if (!allNonNegative(s->splits)) return "negative split";
  if (!r.getVector(&s->ranks) || !r.get(&s->color) || !r.get(&s->key)) {
    return "truncated operation";
  }
  if (!r.getVector(&s->outputRows)) return "truncated output rows";
  if (!allNonNegative(s->outputRows)) return "negative output rows";
  if (!s->outputRows.empty() && s->outputRows.size() != s->members.size()) {
    return "output rows do not match the members";
  }
  uint8_t autoNamed;
  if (!r.get(&autoNamed) || !r.get(&s->ageMicros)) return "truncated operation";
  if (autoNamed > 1) return "bad automatic-name flag";
  if (s->ageMicros < 0) return "negative age";
  // A join pending longer than a year is not a real age; the bound keeps clock arithmetic with
  // it (the coordinator subtracts it from a time point) far from overflow.
  if (s->ageMicros > kMaxAgeMicros) return "join age out of range";
  s->autoNamed = autoNamed != 0;
  return nullptr;
}

constexpr size_t kMinSpecBytes = 4 + 1 + 1 + 8 + 8 + 4 + 4 + 4 + 4 + 4 + 4 + 4 + 4 + 1 + 8;

Status malformed(const char* what) {
  return internalError(std::string("malformed negotiation message: ") + what);
}

}  // namespace

std::vector<uint8_t> encode(const RequestList& list) {
  Writer w;
  w.put<uint32_t>(kRequestMagic);
  w.put<uint32_t>(static_cast<uint32_t>(list.ops.size()));
  for (const OpSpec& s : list.ops) putSpec(w, s);
  return w.take();
}

std::vector<uint8_t> encode(const ResponseList& list) {
  Writer w;
  w.put<uint32_t>(kResponseMagic);
  w.put<uint32_t>(static_cast<uint32_t>(list.responses.size()));
  for (const Response& resp : list.responses) {
    w.put<int32_t>(static_cast<int32_t>(resp.error));
    w.putString(resp.errorMessage);
    putSpec(w, resp.spec);
    w.putVector(resp.dim0PerRank);
    w.putVector(resp.splitMatrix);
    w.put<int32_t>(resp.lastJoinedRank);
  }
  return w.take();
}

Status decode(const uint8_t* data, size_t size, RequestList* out) {
  Reader r(data, size);
  uint32_t magic, n;
  RequestList list;
  if (!r.get(&magic) || magic != kRequestMagic) return malformed("bad request magic");
  if (!r.getCount(&n, kMaxListLength, kMinSpecBytes)) {
    return malformed("truncated request header");
  }
  list.ops.resize(n);
  for (OpSpec& s : list.ops) {
    if (const char* why = getSpec(r, &s)) return malformed(why);
  }
  if (!r.atEnd()) return malformed("trailing bytes after request");
  *out = std::move(list);
  return Status::ok();
}

Status decode(const uint8_t* data, size_t size, ResponseList* out) {
  Reader r(data, size);
  uint32_t magic, n;
  ResponseList list;
  if (!r.get(&magic) || magic != kResponseMagic) return malformed("bad response magic");
  if (!r.getCount(&n, kMaxListLength, 4 + 4 + kMinSpecBytes + 4 + 4 + 4)) {
    return malformed("truncated response header");
  }
  list.responses.resize(n);
  for (Response& resp : list.responses) {
    int32_t code;
    if (!r.get(&code) || code > 1 || code < -12) return malformed("bad status in response");
    resp.error = static_cast<Code>(code);
    if (!r.getString(&resp.errorMessage, 1u << 20)) return malformed("bad error message");
    if (const char* why = getSpec(r, &resp.spec)) return malformed(why);
    if (!r.getVector(&resp.dim0PerRank) || !r.getVector(&resp.splitMatrix) ||
        !r.get(&resp.lastJoinedRank)) {
      return malformed("bad response entry");
    }
    if (!allNonNegative(resp.dim0PerRank) || !allNonNegative(resp.splitMatrix) ||
        resp.lastJoinedRank < -1) {
      return malformed("negative row count or rank in response");
    }
  }
  if (!r.atEnd()) return malformed("trailing bytes after response");
  *out = std::move(list);
  return Status::ok();
}

}  // namespace hcoll::runtime::wire
