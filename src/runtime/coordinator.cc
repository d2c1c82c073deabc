#include "runtime/coordinator.h"

#include "common/op_traits.h"
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

namespace hcoll::runtime {
namespace {

// The shortest text that reads back as exactly `x`: scale factors that differ only in their last
// bits (1/3 computed in float on one rank, in double on another) must not print alike.
std::string formatDouble(double x) {
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  return buf;
}

std::string describeRanks(const std::vector<int32_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// Compares one field of every announcing rank with the reference rank and, on the first field
// that differs, writes "mismatched <field>: rank A has X, rank B has Y, ...".
class MismatchFinder {
 public:
  MismatchFinder(const std::vector<std::optional<OpSpec>>& specs, int ref)
      : specs_(specs), ref_(ref) {}

  template <class Get>
  bool check(const std::string& field, Get get) {
    if (found_) return false;
    auto refValue = get(*specs_[ref_]);
    std::string detail;
    for (size_t r = 0; r < specs_.size(); ++r) {
      if (!specs_[r] || static_cast<int>(r) == ref_) continue;
      auto v = get(*specs_[r]);
      if (v != refValue) detail += ", rank " + std::to_string(r) + " has " + text(v);
    }
    if (detail.empty()) return false;
    found_ = true;
    message_ = "mismatched " + field + ": rank " + std::to_string(ref_) + " has " +
               text(refValue) + detail;
    return true;
  }
  bool found() const { return found_; }
  const std::string& message() const { return message_; }

 private:
  // A value is quoted in full up to a bound: rank lists or shapes from a broken peer could
  // otherwise make a message longer than the wire format carries.
  static std::string text(const std::string& s) {
    constexpr size_t kMaxValueText = 256;
    return s.size() <= kMaxValueText ? s : s.substr(0, kMaxValueText) + "...";
  }
  static std::string text(double d) { return formatDouble(d); }
  static std::string text(int64_t i) { return std::to_string(i); }
  static std::string text(size_t i) { return std::to_string(i); }
  static std::string text(int32_t i) { return std::to_string(i); }

  const std::vector<std::optional<OpSpec>>& specs_;
  int ref_;
  bool found_ = false;
  std::string message_;
};

bool addFits(int64_t a, int64_t b, int64_t* sum) {
  return !__builtin_add_overflow(a, b, sum);
}

// What one rank's spec must satisfy for its kind and this communicator's size before the
// coordinator indexes into it. The C API guarantees all of it, so a violation means a broken or
// foreign peer; the wire decoder has already bounded dims, counts and scales. Returns "" if fine.
std::string malformation(const OpSpec& s, int size) {
  const bool needsRows = traitsOf(s.kind).needsRows;
  if (needsRows) {
    for (size_t m = 0; m < s.members.size(); ++m) {
      if (s.members[m].shape.empty()) return "member " + std::to_string(m) + " is 0-d";
    }
  }
  if (s.kind == OpKind::kAlltoall) {
    if (s.members.size() != 1) return std::to_string(s.members.size()) + " members instead of 1";
    if (s.splits.size() != static_cast<size_t>(size)) {
      return "splits has " + std::to_string(s.splits.size()) + " entries for " +
             std::to_string(size) + " ranks";
    }
    int64_t sum = 0;
    for (int64_t x : s.splits) {
      if (x < 0 || !addFits(sum, x, &sum)) return "a split is negative or the splits overflow";
    }
    if (sum > s.members[0].shape[0]) {
      return "splits sum to " + std::to_string(sum) + ", more than dim0 " +
             std::to_string(s.members[0].shape[0]);
    }
  }
  if (s.kind == OpKind::kBroadcast && (s.root < 0 || s.root >= size)) {
    return "root " + std::to_string(s.root) + " is outside [0, " + std::to_string(size) + ")";
  }
  if (!s.outputRows.empty() && (!needsRows || s.outputRows.size() != s.members.size())) {
    return "caller outputs that do not match its members";
  }
  return "";
}

// *_into: each rank's own output must hold exactly the rows the result gives it (alltoall: at
// least): checked here, before anything runs, so that a wrong size fails on every rank with
// MISMATCH instead of a write past the caller's buffer. Returns "" if every output fits.
std::string outputSizeMismatch(const Response& resp,
                               const std::vector<std::optional<OpSpec>>& specs, int size) {
  std::string detail;
  for (int r = 0; r < size; ++r) {
    const OpSpec& s = *specs[r];
    for (size_t m = 0; m < s.outputRows.size(); ++m) {
      const int64_t want = resp.resultRows(m, r, size);
      const int64_t have = s.outputRows[m];
      const bool alltoall = s.kind == OpKind::kAlltoall;
      if (alltoall ? have >= want : have == want) continue;
      const std::string of =
          s.members.size() > 1 ? "output of member " + std::to_string(m) : std::string("output");
      detail += (detail.empty() ? "" : "; ") + of + " on rank " + std::to_string(r) + " has dim0 " +
                std::to_string(have) + " but the result has " + std::to_string(want) + " rows" +
                (alltoall ? " (dim0 must be at least that)" : "");
    }
  }
  return detail.empty() ? "" : "mismatched output size: " + detail;
}

// Each rank's part is valid alone, yet the output assembled from all ranks (allgather: the sum
// of dim0; alltoall: the rows each rank receives) must also have a byte count that fits.
std::string outputOverflow(const std::vector<std::optional<OpSpec>>& specs, const OpSpec& ref) {
  const size_t n = specs.size();
  for (size_t m = 0; m < ref.members.size(); ++m) {
    const MemberSpec& member = ref.members[m];
    const int64_t rowBytes =
        rowElements(member.shape) * static_cast<int64_t>(dataTypeSize(member.dtype));
    const int64_t maxRows = rowBytes == 0 ? std::numeric_limits<int64_t>::max()
                                          : std::numeric_limits<int64_t>::max() / rowBytes;
    for (size_t to = 0; to < (ref.kind == OpKind::kAlltoall ? n : 1); ++to) {
      int64_t rows = 0;
      for (size_t r = 0; r < n; ++r) {
        const int64_t part =
            ref.kind == OpKind::kAlltoall ? specs[r]->splits[to] : specs[r]->members[m].shape[0];
        if (!addFits(rows, part, &rows) || rows > maxRows) {
          return "the output of member " + std::to_string(m) + " assembled from all ranks" +
                 (ref.kind == OpKind::kAlltoall ? " for rank " + std::to_string(to) : "") +
                 " overflows its byte count";
        }
      }
    }
  }
  return "";
}

// What no rank could check at submission: the bytes one rank receives from all ranks (its
// allgather output, its alltoall receive total) against the backend's count limit. Over it the
// operation fails on every rank with UNSUPPORTED, rather than on the ranks that receive the most
// while the others enter the collective.
std::string assembledOverLimit(const std::vector<std::optional<OpSpec>>& specs, const OpSpec& ref,
                               size_t limit) {
  if (limit == SIZE_MAX) return "";
  const size_t n = specs.size();
  if (ref.kind == OpKind::kAllgather) {
    uint64_t bytes = 0;
    for (size_t m = 0; m < ref.members.size(); ++m) {
      const uint64_t rowBytes = static_cast<uint64_t>(rowElements(ref.members[m].shape)) *
                                dataTypeSize(ref.members[m].dtype);
      for (size_t r = 0; r < n; ++r)
        bytes += static_cast<uint64_t>(specs[r]->members[m].shape[0]) * rowBytes;
    }
    if (bytes > limit) {
      return "its output is " + std::to_string(bytes) + " bytes on every rank";
    }
  }
  if (ref.kind == OpKind::kAlltoall) {
    const uint64_t rowBytes = static_cast<uint64_t>(rowElements(ref.members[0].shape)) *
                              dataTypeSize(ref.members[0].dtype);
    for (size_t to = 0; to < n; ++to) {
      uint64_t bytes = 0;
      for (size_t r = 0; r < n; ++r)
        bytes += static_cast<uint64_t>(specs[r]->splits[to]) * rowBytes;
      if (bytes > limit) {
        return "rank " + std::to_string(to) + " would receive " + std::to_string(bytes) + " bytes";
      }
    }
  }
  return "";
}

}  // namespace

void Coordinator::add(int rank, RequestList list, Clock::time_point now) {
  for (OpSpec& spec : list.ops) {
    auto [it, inserted] = table_.try_emplace(spec.name);
    Entry& e = it->second;
    if (inserted) {
      e.order = nextOrder_++;
      e.firstSeen = now;
      e.specs.resize(static_cast<size_t>(size_));
    }
    if (spec.kind == OpKind::kJoin) {
      joined_[rank] = true;
      // The wire decoder bounds the age (a year), so this cannot overflow the clock.
      joinedAt_[rank] = now - std::chrono::microseconds(spec.ageMicros);
    }
    if (!e.specs[rank]) ++e.count;
    e.specs[rank] = std::move(spec);
  }
}

std::vector<Response> Coordinator::takeReady() {
  std::vector<std::pair<uint64_t, std::string>> ready;
  for (auto& [name, e] : table_) {
    OpKind kind = OpKind::kAllreduce;
    for (auto& s : e.specs) {
      if (s) {
        kind = s->kind;
        break;
      }
    }
    int joinedMissing = 0;
    for (int r = 0; r < size_; ++r) joinedMissing += joined_[r] && !e.specs[r];
    bool complete = kind == OpKind::kJoin ? e.count == size_ : e.count + joinedMissing == size_;
    if (complete) ready.emplace_back(e.order, name);
  }
  std::sort(ready.begin(), ready.end());
  std::vector<Response> out;
  for (auto& [order, name] : ready) {
    auto it = table_.find(name);
    out.push_back(validate(name, it->second));
    table_.erase(it);
    if (out.back().spec.kind == OpKind::kJoin && out.back().error == Code::kSuccess) {
      std::fill(joined_.begin(), joined_.end(), false);
    }
  }
  return out;
}

Response Coordinator::validate(const std::string& name, const Entry& e) const {
  int ref = 0;
  while (!e.specs[ref]) ++ref;
  const OpSpec& r0 = *e.specs[ref];
  Response resp;
  resp.spec = r0;
  auto fail = [&](const std::string& why, Code code = Code::kMismatch) {
    resp.error = code;
    resp.errorMessage = "operation '" + name + "' (" + opKindName(r0.kind) + "): " + why;
    return resp;
  };
  // A malformed spec is refused before anything below indexes into it (shape[0], splits[j]).
  for (int r = 0; r < size_; ++r) {
    if (!e.specs[r]) continue;
    if (std::string why = malformation(*e.specs[r], size_); !why.empty()) {
      return fail("rank " + std::to_string(r) + " sent a malformed request: " + why,
                  Code::kInternal);
    }
  }

  std::vector<int> joinedRanks;
  for (int r = 0; r < size_; ++r) {
    if (joined_[r] && !e.specs[r]) joinedRanks.push_back(r);
  }
  MismatchFinder f(e.specs, ref);
  f.check("operation kind", [](const OpSpec& s) { return std::string(opKindName(s.kind)); });
  if (!f.found() && !joinedRanks.empty() && r0.kind != OpKind::kAllreduce &&
      r0.kind != OpKind::kBarrier) {
    return fail("cannot run while rank(s) " + rankSequence(joinedRanks) + " have joined");
  }
  f.check("group size", [](const OpSpec& s) { return s.members.size(); });
  f.check("device", [](const OpSpec& s) {
    return std::string(s.device == kHostDevice ? "host" : "cuda");
  });
  if (traitsOf(r0.kind).reduces) {
    f.check("reduce op", [](const OpSpec& s) { return std::string(reduceOpName(s.op)); });
    f.check("prescale factor", [](const OpSpec& s) { return s.prescale; });
    f.check("postscale factor", [](const OpSpec& s) { return s.postscale; });
  }
  if (r0.kind == OpKind::kBroadcast) f.check("root", [](const OpSpec& s) { return s.root; });
  if (!f.found() && (r0.kind == OpKind::kCommCreate || r0.kind == OpKind::kCommSplit)) {
    std::vector<int> refused;
    for (int r = 0; r < size_; ++r) {
      const auto& s = e.specs[r];
      if (s && (s->kind == OpKind::kCommCreate ? s->ranks.empty() : s->color == kRefusedSplitColor)) {
        refused.push_back(r);
      }
    }
    if (!refused.empty()) {
      return fail("rank(s) " + rankSequence(refused) +
                  " called it with invalid arguments (their own error says which)");
    }
  }
  if (r0.kind == OpKind::kCommCreate) {
    f.check("rank list", [](const OpSpec& s) { return describeRanks(s.ranks); });
  }
  const bool dim0Varies = traitsOf(r0.kind).dim0Varies;
  for (size_t m = 0; m < r0.members.size() && !f.found(); ++m) {
    std::string of = r0.members.size() > 1 ? " of member " + std::to_string(m) : "";
    f.check("dtype" + of, [m](const OpSpec& s) { return std::string(dataTypeName(s.members[m].dtype)); });
    if (dim0Varies) {
      f.check("ndim" + of, [m](const OpSpec& s) { return s.members[m].shape.size(); });
      f.check("shape after dim 0" + of, [m](const OpSpec& s) {
        auto& sh = s.members[m].shape;
        return shapeString(std::vector<int64_t>(sh.begin() + (sh.empty() ? 0 : 1), sh.end()));
      });
    } else {
      f.check("shape" + of, [m](const OpSpec& s) { return shapeString(s.members[m].shape); });
    }
  }
  if (f.found()) return fail(f.message());
  if (dim0Varies) {
    // Reached only without joined ranks (checked above), so every rank's spec is present.
    if (std::string why = outputOverflow(e.specs, r0); !why.empty()) {
      return fail(why, Code::kInternal);
    }
    if (std::string why = assembledOverLimit(e.specs, r0, maxVectorCount_); !why.empty()) {
      return fail(why + ", more than the " + std::to_string(maxVectorCount_) +
                      " the backend can move to one rank: " + maxVectorCountReason_,
                  Code::kUnsupported);
    }
  }
  Response made = makeResponse(e);
  if (traitsOf(r0.kind).needsRows) {
    // Also reached only without joined ranks: every spec is present.
    if (std::string why = outputSizeMismatch(made, e.specs, size_); !why.empty()) return fail(why);
  }
  return made;
}

Response Coordinator::makeResponse(const Entry& e) const {
  int ref = 0;
  while (!e.specs[ref]) ++ref;
  Response resp;
  resp.spec = *e.specs[ref];
  const size_t n = static_cast<size_t>(size_);
  if (resp.spec.kind == OpKind::kAllgather) {
    resp.dim0PerRank.resize(resp.spec.members.size() * n);
    for (size_t m = 0; m < resp.spec.members.size(); ++m) {
      for (size_t r = 0; r < n; ++r) resp.dim0PerRank[m * n + r] = e.specs[r]->members[m].shape[0];
    }
  }
  if (resp.spec.kind == OpKind::kAlltoall) {
    resp.splitMatrix.resize(n * n);
    for (size_t r = 0; r < n; ++r) {
      for (size_t j = 0; j < n; ++j) resp.splitMatrix[r * n + j] = e.specs[r]->splits[j];
    }
  }
  if (resp.spec.kind == OpKind::kJoin) resp.lastJoinedRank = lastJoined();
  return resp;
}

// The joined rank with the latest join time; equal times (joins within the clock's resolution)
// go to the higher rank, so every run of the same inputs gives the same answer.
int Coordinator::lastJoined() const {
  int last = -1;
  for (int r = 0; r < size_; ++r) {
    if (joined_[r] && (last < 0 || joinedAt_[r] >= joinedAt_[last])) last = r;
  }
  return last;
}

std::vector<Coordinator::Stalled> Coordinator::stalled(double seconds, Clock::time_point now) const {
  std::vector<Stalled> out;
  for (auto& [name, e] : table_) {
    double waited = std::chrono::duration<double>(now - e.firstSeen).count();
    if (waited < seconds) continue;
    Stalled s{name, OpKind::kAllreduce, {}, {}, waited};
    for (int r = 0; r < size_; ++r) {
      if (e.specs[r]) {
        s.kind = e.specs[r]->kind;
        s.submitted.push_back(r);
      } else if (!joined_[r]) {
        s.missing.push_back(r);
      }
    }
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.name < b.name; });
  return out;
}

Response Coordinator::fail(const std::string& name, Code code, const std::string& message) {
  Response resp;
  auto it = table_.find(name);
  if (it != table_.end()) {
    for (auto& s : it->second.specs) {
      if (s) {
        resp.spec = *s;
        break;
      }
    }
    table_.erase(it);
  }
  resp.spec.name = name;
  resp.error = code;
  resp.errorMessage = message;
  return resp;
}

}  // namespace hcoll::runtime
