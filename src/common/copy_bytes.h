#pragma once
// The copy the data plane's moves of host bytes go through (shared-memory lanes and control
// block, a rank's own block, packing into and out of fusion buffers, a reduction's first input,
// the folded results): memcpy, except where memcpy is pathologically slow.
//
// On the test VM (AMD EPYC, glibc 2.36) memcpy of 4 KiB-256 KiB runs 13-28x slower (~2 GB/s
// instead of ~37) whenever the destination starts 1-31 bytes past the source modulo 4 KiB (4K
// aliasing in glibc's `rep movsb` path); 2 KiB and 512 KiB and up were unaffected. hcoll meets
// that case in ordinary use: a large malloc'd buffer starts 16 bytes past a page and hcoll's own
// buffers (shared memory, output pool, fusion) at a page, so copying from them into a caller's
// vector is exactly it. Copying backward in 64-byte blocks sidesteps it (going down, no load
// shares its low 12 address bits with a store just made): 256 KiB took 7.1-8.4 us that way at a
// bad offset, memcpy 7.0 us at a good one and 89-160 us at the bad one.

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hcoll {

namespace copy_detail {

// A destination less than this far past the source modulo 4 KiB (not 0) is copied backward: 64,
// not 32, as memcpy at 40-56 bytes ahead measured 1.5x slower too.
constexpr uintptr_t kAliasedAhead = 64;
// Sizes copied backward when aliased: from glibc's smallest `rep movsb` threshold (2 KiB without
// AVX) to 2 MiB. Where glibc stops using `rep movsb` depends on the CPU (the test VM: from 512
// KiB); at 4 MiB the backward loop measured 13 % slower than memcpy there.
constexpr size_t kBackwardFrom = size_t{2} << 10;
constexpr size_t kBackwardBelow = size_t{2} << 20;

// n bytes from the end down, 64 at a time (four 16-byte vectors: SSE2, any x86-64).
inline void copyBackward(unsigned char* dst, const unsigned char* src, size_t n) {
  typedef long long Vec __attribute__((vector_size(16), aligned(1), may_alias));
  size_t i = n;
  while (i >= 64) {
    i -= 64;
    const Vec* s = reinterpret_cast<const Vec*>(src + i);
    const Vec a = s[0], b = s[1], c = s[2], d = s[3];
    Vec* o = reinterpret_cast<Vec*>(dst + i);
    o[0] = a;
    o[1] = b;
    o[2] = c;
    o[3] = d;
  }
  if (i != 0) std::memcpy(dst, src, i);
}

}  // namespace copy_detail

// Copies `n` bytes from `src` to `dst`, ranges that do not overlap (memcpy's contract; either
// pointer may be null when n is 0).
inline void copyBytes(void* dst, const void* src, size_t n) {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  if (n >= copy_detail::kBackwardFrom && n < copy_detail::kBackwardBelow) {
    const uintptr_t ahead =
        (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & 4095;
    if (ahead != 0 && ahead < copy_detail::kAliasedAhead) {
      copy_detail::copyBackward(static_cast<unsigned char*>(dst),
                                static_cast<const unsigned char*>(src), n);
      return;
    }
  }
#endif
  if (n != 0) std::memcpy(dst, src, n);
}

// The same for ranges that may overlap (memmove's contract).
inline void moveBytes(void* dst, const void* src, size_t n) {
  const auto d = reinterpret_cast<uintptr_t>(dst);
  const auto s = reinterpret_cast<uintptr_t>(src);
  if (n == 0 || d == s) return;
  if (d - s < n || s - d < n) {  // overlapping (unsigned: one of the two wraps when they do not)
    std::memmove(dst, src, n);
    return;
  }
  copyBytes(dst, src, n);
}

}  // namespace hcoll
