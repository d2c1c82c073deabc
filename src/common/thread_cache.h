#pragma once
// A few objects kept per thread for reuse (a small operation's per-call objects: built on one
// thread, dropped a moment later, often on the same one). Reaching the cache is one TLS lookup:
// its slots are a trivially constructed thread_local, where one with a constructor or destructor
// would add a guard call at every access (in a shared library each access already costs a
// __tls_get_addr call). A cleanup object, armed the first time the thread keeps something, frees
// what is kept when the thread ends; what is handed back after that is refused (the caller frees
// it), so nothing is kept in storage that is going away.

#include <cstddef>

namespace hcoll {

// `Tag` tells caches of the same T apart; Dispose frees a kept object at thread exit.
template <typename T, size_t N, typename Tag, void (*Dispose)(T*)>
class ThreadCache {
 public:
  // A kept object, or null.
  static T* take() {
    Slots& s = slots();
    return s.count == 0 ? nullptr : s.items[--s.count];
  }
  // Whether keep() would keep one now.
  static bool hasRoom() {
    const Slots& s = slots();
    return !s.gone && s.count < N;
  }
  // Keeps `item` (true), or refuses it (false: full, or the thread is ending; the caller frees).
  static bool keep(T* item) {
    Slots& s = slots();
    if (s.gone || s.count == N) return false;
    if (!s.armed) {
      s.armed = true;
      cleanup().armed = true;  // constructs it: its destructor runs at thread exit
    }
    s.items[s.count++] = item;
    return true;
  }

 private:
  struct Slots {
    T* items[N];
    size_t count;
    bool armed;
    bool gone;
  };
  struct Cleanup {
    bool armed = false;
    ~Cleanup() {
      Slots& s = slots();
      s.gone = true;
      while (s.count > 0) Dispose(s.items[--s.count]);
    }
  };
  static Slots& slots() {
    static thread_local Slots s;  // zero-initialized, no guard
    return s;
  }
  static Cleanup& cleanup() {
    static thread_local Cleanup c;
    return c;
  }
};

}  // namespace hcoll
