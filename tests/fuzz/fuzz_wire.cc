// libFuzzer harness for the negotiation wire format and what consumes it. The first input byte
// picks the message type (request or response list) and how request lists are announced; the
// rest is decoded. A successful decode must re-encode to bytes that decode again to an equal
// message, and encoding is canonical (the same bytes again). A decoded request list then goes
// through the coordinator of a small communicator, as rank 0 would run it: whatever the specs
// say, the coordinator must neither crash nor read out of bounds, and every response it makes
// must be well formed and itself survive the wire.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "runtime/coordinator.h"
#include "runtime/wire.h"

namespace {

using hcoll::Code;
using hcoll::runtime::Coordinator;
using hcoll::runtime::OpSpec;
using hcoll::runtime::RequestList;
using hcoll::runtime::Response;
using hcoll::runtime::ResponseList;
namespace wire = hcoll::runtime::wire;

constexpr int kCommSize = 3;

bool sameResponse(const Response& a, const Response& b) {
  return a.error == b.error && a.errorMessage == b.errorMessage && a.spec == b.spec &&
         a.dim0PerRank == b.dim0PerRank && a.splitMatrix == b.splitMatrix &&
         a.lastJoinedRank == b.lastJoinedRank;
}

template <class List>
bool roundTrip(const uint8_t* data, size_t size, List* decoded) {
  List& first = *decoded;
  if (!wire::decode(data, size, &first).isOk()) return false;
  std::vector<uint8_t> bytes = wire::encode(first);
  List second;
  if (!wire::decode(bytes.data(), bytes.size(), &second).isOk()) std::abort();
  if (wire::encode(second) != bytes) std::abort();
  // A decoded message is exactly its encoding: no byte of the input was ignored.
  if (bytes.size() != size || !std::equal(bytes.begin(), bytes.end(), data)) std::abort();
  if constexpr (std::is_same_v<List, ResponseList>) {
    if (first.responses.size() != second.responses.size()) std::abort();
    for (size_t i = 0; i < first.responses.size(); ++i) {
      if (!sameResponse(first.responses[i], second.responses[i])) std::abort();
    }
  } else {
    if (first.ops.size() != second.ops.size()) std::abort();
    for (size_t i = 0; i < first.ops.size(); ++i) {
      if (!(first.ops[i] == second.ops[i])) std::abort();
    }
  }
  return true;
}

// Every response the coordinator hands out is broadcast to the other ranks and executed there.
void checkResponses(const std::vector<Response>& responses) {
  for (const Response& r : responses) {
    if (r.error == Code::kSuccess && !r.malformation(kCommSize).empty()) std::abort();
    if (r.error != Code::kSuccess && r.errorMessage.empty()) std::abort();
  }
  ResponseList list;
  list.responses = responses;
  std::vector<uint8_t> bytes = wire::encode(list);
  ResponseList back;
  if (!wire::decode(bytes.data(), bytes.size(), &back).isOk()) std::abort();
  for (size_t i = 0; i < responses.size(); ++i) {
    if (!sameResponse(responses[i], back.responses[i])) std::abort();
  }
}

// Announces the decoded list from every rank of a kCommSize communicator. With `rotate`, rank r
// announces op i's name with the contents of op (i + r) (kinds, shapes, splits differ across
// ranks); with `partial`, the last rank announces nothing, so work stays pending and stalls.
void coordinate(const RequestList& list, bool rotate, bool partial) {
  Coordinator c(kCommSize);
  const auto now = Coordinator::Clock::now();
  const size_t n = list.ops.size();
  for (int r = 0; r < kCommSize - (partial ? 1 : 0); ++r) {
    RequestList mine;
    mine.ops = list.ops;
    if (rotate && n > 0) {
      for (size_t i = 0; i < n; ++i) {
        OpSpec s = list.ops[(i + static_cast<size_t>(r)) % n];
        s.name = list.ops[i].name;
        mine.ops[i] = std::move(s);
      }
    }
    c.add(r, std::move(mine), now);
  }
  checkResponses(c.takeReady());
  std::vector<Response> failed;
  for (const auto& s : c.stalled(0, now + std::chrono::seconds(1))) {
    failed.push_back(c.fail(s.name, Code::kTimeout, "fuzz timeout"));
  }
  checkResponses(failed);
  if (!c.empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] & 1) {
    ResponseList responses;
    if (roundTrip(data + 1, size - 1, &responses)) {
      // The other ranks' check of what rank 0 sends must handle anything that decodes.
      for (const Response& r : responses.responses) (void)r.malformation(kCommSize);
    }
  } else {
    RequestList requests;
    if (roundTrip(data + 1, size - 1, &requests)) {
      coordinate(requests, (data[0] & 2) != 0, (data[0] & 4) != 0);
    }
  }
  return 0;
}
