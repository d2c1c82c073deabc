#include "runtime/message.h"

#include "common/op_traits.h"

namespace hcoll::runtime {

bool OpSpec::operator==(const OpSpec& o) const {
  return name == o.name && sameCallAs(o);
}

bool OpSpec::sameCallAs(const OpSpec& o) const {
  return kind == o.kind && op == o.op && prescale == o.prescale && postscale == o.postscale &&
         root == o.root && device == o.device && members == o.members && splits == o.splits &&
         ranks == o.ranks && color == o.color && key == o.key && outputRows == o.outputRows &&
         autoNamed == o.autoNamed && ageMicros == o.ageMicros;
}

bool Response::cacheable() const {
  return error == Code::kSuccess && traitsOf(spec.kind).cacheable;
}

std::string Response::malformation(int size) const {
  if (error != Code::kSuccess) return "";  // only the name is used to fail the operation
  const auto n = static_cast<size_t>(size);
  const bool needsRows = traitsOf(spec.kind).needsRows;
  for (const MemberSpec& m : spec.members) {
    if (needsRows && m.shape.empty()) return "a member is 0-d";
  }
  if (spec.kind == OpKind::kAllgather && dim0PerRank.size() != spec.members.size() * n) {
    return "dim0PerRank has " + std::to_string(dim0PerRank.size()) + " entries, expected " +
           std::to_string(spec.members.size() * n);
  }
  if (spec.kind == OpKind::kAlltoall) {
    if (spec.members.size() != 1) return "an alltoall with other than 1 member";
    if (splitMatrix.size() != n * n) {
      return "splitMatrix has " + std::to_string(splitMatrix.size()) + " entries, expected " +
             std::to_string(n * n);
    }
  }
  if (spec.kind == OpKind::kBroadcast && (spec.root < 0 || spec.root >= size)) {
    return "root " + std::to_string(spec.root) + " out of range";
  }
  return "";
}

bool Response::matchesLocal(const OpSpec& local, int rank, int size) const {
  const OpSpec& s = spec;
  // Automatic names differ on every call: such a response is replayed by the next automatically
  // named call of the same shape, under that call's name (ResponseCache::keyOf).
  if (local.autoNamed != s.autoNamed || (!s.autoNamed && local.name != s.name)) return false;
  if (local.kind != s.kind || local.op != s.op ||
      local.prescale != s.prescale || local.postscale != s.postscale || local.root != s.root ||
      (local.device == kHostDevice) != (s.device == kHostDevice) ||
      local.members.size() != s.members.size()) {
    return false;
  }
  for (size_t m = 0; m < s.members.size(); ++m) {
    const MemberSpec& a = local.members[m];
    const MemberSpec& b = s.members[m];
    if (a.dtype != b.dtype || a.shape.size() != b.shape.size()) return false;
    const bool dim0Varies = traitsOf(s.kind).dim0Varies;
    for (size_t d = dim0Varies ? 1 : 0; d < a.shape.size(); ++d) {
      if (a.shape[d] != b.shape[d]) return false;
    }
    if (s.kind == OpKind::kAllgather && !a.shape.empty() &&
        dim0PerRank[m * size + rank] != a.shape[0]) {
      return false;
    }
  }
  if (s.kind == OpKind::kAlltoall) {
    for (int j = 0; j < size; ++j) {
      if (local.splits[j] != splitMatrix[static_cast<size_t>(rank) * size + j]) return false;
    }
  }
  // A caller's output that does not fit this response is never replayed from the cache: the
  // operation goes to the coordinator, which fails it with MISMATCH on every rank.
  if (!local.outputRows.empty()) {
    if (local.outputRows.size() != s.members.size()) return false;
    for (size_t m = 0; m < s.members.size(); ++m) {
      const int64_t want = resultRows(m, rank, size);
      const int64_t have = local.outputRows[m];
      if (s.kind == OpKind::kAlltoall ? have < want : have != want) return false;
    }
  }
  return true;
}

int64_t Response::resultRows(size_t m, int rank, int size) const {
  const auto n = static_cast<size_t>(size);
  const auto me = static_cast<size_t>(rank);
  int64_t rows = 0;
  switch (spec.kind) {
    case OpKind::kAllgather:
      for (size_t r = 0; r < n; ++r) rows += dim0PerRank[m * n + r];
      return rows;
    case OpKind::kAlltoall:
      for (size_t r = 0; r < n; ++r) rows += splitMatrix[r * n + me];
      return rows;
    case OpKind::kReducescatter:
      return scatterRows(spec.members[m].shape[0], size, rank);
    default:
      return 0;
  }
}

}  // namespace hcoll::runtime
