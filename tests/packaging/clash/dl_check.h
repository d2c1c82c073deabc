/* What the dlopen tests (clash.c, plugin_cycle.c) share: a non-fatal CHECK that counts failures,
 * and SYM, a dlsym typed after hcoll.h's declaration of the function. */
#ifndef HCOLL_TESTS_DL_CHECK_H_
#define HCOLL_TESTS_DL_CHECK_H_

#include <dlfcn.h>
#include <stdio.h>

static int failures = 0;
#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

#define SYM(handle, fn) ((__typeof__(&fn))dlsym(handle, #fn))

#endif /* HCOLL_TESTS_DL_CHECK_H_ */
