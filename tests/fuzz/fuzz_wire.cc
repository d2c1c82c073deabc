// libFuzzer harness for the negotiation wire format. The first input byte picks the message type
// (request or response list); the rest is decoded. A successful decode must re-encode to bytes
// that decode again to an equal message, and encoding is canonical (the same bytes again).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "runtime/wire.h"

namespace {

using hcoll::runtime::RequestList;
using hcoll::runtime::Response;
using hcoll::runtime::ResponseList;
namespace wire = hcoll::runtime::wire;

bool sameResponse(const Response& a, const Response& b) {
  return a.error == b.error && a.errorMessage == b.errorMessage && a.spec == b.spec &&
         a.dim0PerRank == b.dim0PerRank && a.splitMatrix == b.splitMatrix &&
         a.lastJoinedRank == b.lastJoinedRank;
}

template <class List>
void roundTrip(const uint8_t* data, size_t size) {
  List first;
  if (!wire::decode(data, size, &first).isOk()) return;
  std::vector<uint8_t> bytes = wire::encode(first);
  List second;
  if (!wire::decode(bytes.data(), bytes.size(), &second).isOk()) std::abort();
  if (wire::encode(second) != bytes) std::abort();
  // A decoded message is exactly its encoding: no byte of the input was ignored.
  if (bytes.size() != size || !std::equal(bytes.begin(), bytes.end(), data)) std::abort();
  if constexpr (std::is_same_v<List, ResponseList>) {
    if (first.responses.size() != second.responses.size()) std::abort();
  } else {
    if (first.flags != second.flags || first.ops.size() != second.ops.size()) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] & 1) {
    roundTrip<ResponseList>(data + 1, size - 1);
  } else {
    roundTrip<RequestList>(data + 1, size - 1);
  }
  return 0;
}
