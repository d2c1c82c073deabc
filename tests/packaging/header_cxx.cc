// The public header compiles as C++ (-Wall -Wextra -pedantic -Werror) with C linkage, so C++
// codes include it directly.
#include <hcoll/hcoll.h>
#include <type_traits>

static_assert(std::is_same<decltype(&hcoll_initialize),
                           hcoll_status_t (*)(const hcoll_init_params_t*)>::value,
              "hcoll_initialize's signature is part of the ABI");
static_assert(sizeof(hcoll_status_t) == sizeof(int), "enums are int-sized");
static_assert(std::is_standard_layout<hcoll_tensor_t>::value, "tensor descriptors are C structs");

extern "C" int hcoll_header_cxx_check() {  // references a declaration with C linkage
  hcoll_request_t r = HCOLL_REQUEST_NULL;
  return hcoll_test(r) == HCOLL_ERR_INVALID_HANDLE ? 0 : 1;
}

int main() {
  return 0;
}
