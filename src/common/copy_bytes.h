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

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define HCOLL_COPY_BYTES_X86 1
#endif
#if defined(HCOLL_COPY_BYTES_X86) && defined(__SSE2__)  // (every x86-64)
#include <emmintrin.h>
#define HCOLL_COPY_BYTES_SSE2 1
#endif

namespace hcoll {

// Whether streamBytes (below) really bypasses the cache here, or is copyBytes.
#ifdef HCOLL_COPY_BYTES_SSE2
inline constexpr bool kStreamBytesNonTemporal = true;
#else
inline constexpr bool kStreamBytesNonTemporal = false;
#endif

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
  if (n <= 16) {
    // A small operation's few words (the control block's payloads, a folded result: up to
    // seven copies of an 8-byte call) without a call into the library: loads of the first and
    // last bytes, overlapping in the middle, then the stores.
    auto* d = static_cast<unsigned char*>(dst);
    const auto* s = static_cast<const unsigned char*>(src);
    if (n >= 8) {
      uint64_t head, tail;
      std::memcpy(&head, s, 8);
      std::memcpy(&tail, s + n - 8, 8);
      std::memcpy(d, &head, 8);
      std::memcpy(d + n - 8, &tail, 8);
    } else if (n >= 4) {
      uint32_t head, tail;
      std::memcpy(&head, s, 4);
      std::memcpy(&tail, s + n - 4, 4);
      std::memcpy(d, &head, 4);
      std::memcpy(d + n - 4, &tail, 4);
    } else if (n != 0) {
      const unsigned char first = s[0], middle = s[n / 2], last = s[n - 1];
      d[0] = first;
      d[n / 2] = middle;
      d[n - 1] = last;
    }
    return;
  }
#ifdef HCOLL_COPY_BYTES_X86
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
  std::memcpy(dst, src, n);
}

// Copies `n` bytes into memory that another core reads next (a shared-memory lane's chunk), with
// non-temporal stores: the bytes go to memory instead of staying dirty in this core's cache. On
// the test VM a reader pulling lines that are dirty in the writer's cache was slow whenever the
// two vCPUs sat apart (a cache line's one-way trip 0.22-0.27 us instead of 0.03-0.07, a state
// that changes from run to run): a 4 x 128 KiB ring moved 1 MiB in 170-245 us with ordinary
// stores and 60-100 us with these; with the vCPUs close, 82-112 us and 70-118 us. Ends with a
// store fence, so a release store that follows (the ring's `published`) is seen after the bytes.
// Ranges must not overlap.
inline void streamBytes(void* dst, const void* src, size_t n) {
#ifdef HCOLL_COPY_BYTES_SSE2
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  // Up to the first 16-byte boundary of the destination: ordinary stores (movntdq needs it).
  const size_t toBoundary = (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15;
  const size_t head = std::min(n, toBoundary);
  if (head != 0) std::memcpy(d, s, head);
  size_t i = head;
  for (; i + 64 <= n; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  if (i < n) std::memcpy(d + i, s + i, n - i);
  _mm_sfence();
#else
  copyBytes(dst, src, n);
#endif
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

#undef HCOLL_COPY_BYTES_X86
#undef HCOLL_COPY_BYTES_SSE2
