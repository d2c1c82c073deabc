// copyBytes, moveBytes and streamBytes (common/copy_bytes.h): byte-exact whichever path a copy
// takes (memcpy, the backward loop of an aliased destination, memmove for overlapping ranges,
// non-temporal stores after an unaligned head and before a tail).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "common/copy_bytes.h"

using hcoll::copyBytes;
using hcoll::moveBytes;
using hcoll::streamBytes;

namespace {

// A pattern whose every byte differs from its neighbours' (a shifted or partial copy shows).
void fill(std::vector<unsigned char>& v, unsigned seed) {
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<unsigned char>((i * 131 + seed) % 251);
}

}  // namespace

TEST_CASE("copyBytes copies every byte at any offset and size, and nothing more", "[copy]") {
  // Offsets around the aliased window (1-63 bytes ahead modulo 4 KiB) and sizes around both
  // thresholds and the 64-byte blocks (a tail of 1-63 bytes), and every size of the inline
  // small copy (0-16 bytes: single bytes, two overlapping 4- or 8-byte words).
  constexpr size_t kPage = 4096;
  const size_t sizes[] = {0,  1,  2,  3,  4,    5,    6,    7,    8,    9,    10,
                          11, 12, 13, 14, 15,   16,   17,   63,   64,   65,   2047,
                          2048, 2049, 4096, 4097, 65536 + 17, (size_t{2} << 20) - 1,
                          size_t{2} << 20};
  const size_t aheads[] = {0, 1, 16, 31, 32, 63, 64, 2048, kPage - 16, kPage - 1};
  std::vector<unsigned char> src((size_t{2} << 20) + 2 * kPage), dst(src.size() + 2 * kPage);
  fill(src, 7);
  const auto pageOf = [&](std::vector<unsigned char>& v) {
    const auto at = reinterpret_cast<uintptr_t>(v.data());
    return v.data() + ((kPage - at % kPage) % kPage);  // the first page boundary inside
  };
  unsigned char* srcAt = pageOf(src) + 8;  // 8 bytes past a page, as any buffer may be
  for (size_t n : sizes) {
    for (size_t ahead : aheads) {
      unsigned char* dstAt = pageOf(dst) + 8 + ahead;
      std::fill(dst.begin(), dst.end(), 0xEE);
      copyBytes(dstAt, srcAt, n);
      INFO("n " << n << ", destination " << ahead << " bytes ahead modulo 4 KiB");
      REQUIRE(std::memcmp(dstAt, srcAt, n) == 0);
      // Untouched around it.
      REQUIRE(dstAt[-1] == 0xEE);
      REQUIRE(dstAt[n] == 0xEE);
    }
  }
  copyBytes(nullptr, nullptr, 0);  // the null buffers of empty tensors
}

TEST_CASE("moveBytes keeps memmove's result for overlapping ranges", "[copy]") {
  for (size_t n : {size_t{100}, size_t{5000}, size_t{300000}}) {
    for (ptrdiff_t shift : {ptrdiff_t{-4097}, ptrdiff_t{-16}, ptrdiff_t{-1}, ptrdiff_t{1},
                            ptrdiff_t{16}, ptrdiff_t{40}, ptrdiff_t{4097}}) {
      std::vector<unsigned char> a(n + 10000), b;
      fill(a, 3);
      b = a;
      const size_t from = 5000;
      const size_t to = static_cast<size_t>(static_cast<ptrdiff_t>(from) + shift);
      moveBytes(a.data() + to, a.data() + from, n);
      std::memmove(b.data() + to, b.data() + from, n);
      INFO("n " << n << ", shift " << shift);
      REQUIRE(a == b);
    }
  }
  std::vector<unsigned char> same(64);
  fill(same, 1);
  const auto before = same;
  moveBytes(same.data(), same.data(), same.size());
  REQUIRE(same == before);
}

TEST_CASE("streamBytes copies every byte at any alignment and size, and nothing more", "[copy]") {
  // Destinations at every offset within 16 bytes (the head before the streaming stores) and a
  // few sources; sizes around the 16-byte head and the 64-byte blocks, and a ring chunk's.
  const size_t sizes[] = {0, 1, 15, 16, 17, 63, 64, 65, 79, 80, 127, 128, 1000, 4096 + 7,
                          (size_t{128} << 10) + 3};
  std::vector<unsigned char> src((size_t{128} << 10) + 256), dst(src.size() + 256);
  fill(src, 11);
  const auto aligned = [](std::vector<unsigned char>& v) {
    const auto at = reinterpret_cast<uintptr_t>(v.data());
    return v.data() + ((64 - at % 64) % 64);
  };
  for (size_t n : sizes) {
    for (size_t dstOffset = 0; dstOffset < 16; ++dstOffset) {
      for (size_t srcOffset : {size_t{0}, size_t{3}, size_t{8}}) {
        unsigned char* to = aligned(dst) + 16 + dstOffset;
        const unsigned char* from = aligned(src) + srcOffset;
        std::fill(dst.begin(), dst.end(), 0xEE);
        streamBytes(to, from, n);
        INFO("n " << n << ", destination offset " << dstOffset << ", source offset " << srcOffset);
        REQUIRE(std::memcmp(to, from, n) == 0);
        REQUIRE(to[-1] == 0xEE);
        REQUIRE(to[n] == 0xEE);
      }
    }
  }
  streamBytes(nullptr, nullptr, 0);
#if defined(__x86_64__)
  CHECK(hcoll::kStreamBytesNonTemporal);  // not silently copyBytes where SSE2 is a given
#endif
}
