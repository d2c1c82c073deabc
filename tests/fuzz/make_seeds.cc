// Writes the fuzzer's seed corpus: valid request and response lists covering every op kind, with
// the harness's leading type byte (0 = request list, 1 = response list). Run:
//   build-fuzz/hcoll-fuzz-seeds tests/fuzz/corpus
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/wire.h"

using namespace hcoll;
using namespace hcoll::runtime;

namespace {

void write(const std::string& dir, const std::string& name, uint8_t type,
           const std::vector<uint8_t>& bytes) {
  std::string path = dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return;
  std::fputc(type, f);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

OpSpec spec(const std::string& name, OpKind kind, int members) {
  OpSpec s;
  s.name = name;
  s.kind = kind;
  s.op = ReduceOp::kMax;
  s.prescale = 0.5;
  s.root = 1;
  for (int m = 0; m < members; ++m) {
    s.members.push_back(MemberSpec{static_cast<DataType>(m % kNumDataTypes), {3, m + 1}});
  }
  if (kind == OpKind::kAlltoall) s.splits = {1, 2};
  if (kind == OpKind::kCommCreate) s.ranks = {1, 0};
  // Some row-kind seeds carry caller-provided outputs (*_into), one dim0 per member.
  if ((kind == OpKind::kAllgather || kind == OpKind::kReducescatter) && members % 2 == 1) {
    s.outputRows.assign(static_cast<size_t>(members), 3);
  }
  s.color = 3;
  s.key = -1;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : ".";
  RequestList empty;
  write(dir, "request-empty", 0, wire::encode(empty));
  ResponseList none;
  write(dir, "response-empty", 1, wire::encode(none));
  RequestList all;
  ResponseList answers;
  for (int k = 0; k < kNumOpKinds; ++k) {
    OpSpec s = spec("op." + std::to_string(k), static_cast<OpKind>(k), 1 + k % 3);
    RequestList one;
    one.ops.push_back(s);
    write(dir, "request-kind-" + std::to_string(k), 0, wire::encode(one));
    all.ops.push_back(s);
    Response r;
    r.spec = s;
    if (k == 2) r.dim0PerRank = {3, 0, 3};
    if (k == 4) r.splitMatrix = {1, 2, 2, 1};
    if (k == 5) {
      r.error = Code::kMismatch;
      r.errorMessage = "mismatched shape: rank 0 has [3], rank 1 has [4]";
    }
    r.lastJoinedRank = k == 8 ? 1 : -1;
    answers.responses.push_back(r);
  }
  write(dir, "request-all", 0, wire::encode(all));
  write(dir, "response-all", 1, wire::encode(answers));
  return 0;
}
