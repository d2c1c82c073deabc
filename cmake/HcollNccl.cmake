# Looks for CUDA and NCCL under CUDA_HOME or /usr/local/cuda. HCOLL_WITH_NCCL=AUTO builds the NCCL
# backend when both are found, ON requires them, OFF skips the search.
# NCCL_ROOT (a CMake or environment variable) names NCCL's own root instead, holding include/nccl.h
# and lib/libnccl.so[.2]: e.g. the pip package nvidia-nccl-cu13's <site-packages>/nvidia/nccl, which
# ships only the versioned libnccl.so.2. When it is set, NCCL is looked for there and nowhere else.
# Versioned library names are accepted for the same reason (CUDA_HOME may be pip's nvidia/cu13).
set(HCOLL_NCCL_ENABLED 0)

if(NOT HCOLL_WITH_NCCL STREQUAL "OFF")
  set(_hcoll_cuda_roots "$ENV{CUDA_HOME}" /usr/local/cuda)
  find_path(HCOLL_CUDA_INCLUDE_DIR cuda_runtime_api.h HINTS ${_hcoll_cuda_roots} PATH_SUFFIXES include)
  find_library(HCOLL_CUDART_LIBRARY NAMES cudart libcudart.so.13 libcudart.so.12
               HINTS ${_hcoll_cuda_roots} PATH_SUFFIXES lib64 lib)
  find_library(HCOLL_NVRTC_LIBRARY NAMES nvrtc libnvrtc.so.13 libnvrtc.so.12
               HINTS ${_hcoll_cuda_roots} PATH_SUFFIXES lib64 lib)
  if(NOT DEFINED NCCL_ROOT AND DEFINED ENV{NCCL_ROOT})
    set(NCCL_ROOT "$ENV{NCCL_ROOT}")
  endif()
  if(NCCL_ROOT)
    find_path(HCOLL_NCCL_INCLUDE_DIR nccl.h PATHS ${NCCL_ROOT} PATH_SUFFIXES include NO_DEFAULT_PATH)
    find_library(HCOLL_NCCL_LIBRARY NAMES nccl libnccl.so.2 PATHS ${NCCL_ROOT}
                 PATH_SUFFIXES lib lib64 NO_DEFAULT_PATH)
    if(NOT HCOLL_NCCL_INCLUDE_DIR OR NOT HCOLL_NCCL_LIBRARY)
      message(FATAL_ERROR "NCCL_ROOT=${NCCL_ROOT} lacks include/nccl.h or lib/libnccl.so[.2]")
    endif()
  else()
    find_path(HCOLL_NCCL_INCLUDE_DIR nccl.h HINTS ${_hcoll_cuda_roots} PATH_SUFFIXES include)
    find_library(HCOLL_NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_hcoll_cuda_roots}
                 PATH_SUFFIXES lib64 lib)
  endif()
  if(HCOLL_CUDA_INCLUDE_DIR AND HCOLL_NCCL_INCLUDE_DIR AND HCOLL_CUDART_LIBRARY AND HCOLL_NCCL_LIBRARY
     AND HCOLL_NVRTC_LIBRARY)
    set(HCOLL_NCCL_ENABLED 1)
    message(STATUS "hcoll: NCCL backend ON (${HCOLL_NCCL_LIBRARY}, ${HCOLL_CUDART_LIBRARY})")
  elseif(HCOLL_WITH_NCCL STREQUAL "ON")
    message(FATAL_ERROR "HCOLL_WITH_NCCL=ON but CUDA/NCCL (or the backend sources) were not found")
  else()
    message(STATUS "hcoll: NCCL backend OFF (not found)")
  endif()
endif()
