# Looks for CUDA and NCCL under CUDA_HOME or /usr/local/cuda. HCOLL_WITH_NCCL=AUTO builds the NCCL
# backend when both are found, ON requires them, OFF skips the search.
set(HCOLL_NCCL_ENABLED 0)
# The backend's sources; empty until the NCCL backend exists, which keeps AUTO off meanwhile.
set(HCOLL_NCCL_SOURCES "")

if(NOT HCOLL_WITH_NCCL STREQUAL "OFF")
  set(_hcoll_cuda_roots "$ENV{CUDA_HOME}" /usr/local/cuda)
  find_path(HCOLL_CUDA_INCLUDE_DIR cuda_runtime_api.h HINTS ${_hcoll_cuda_roots} PATH_SUFFIXES include)
  find_path(HCOLL_NCCL_INCLUDE_DIR nccl.h HINTS ${_hcoll_cuda_roots} PATH_SUFFIXES include)
  find_library(HCOLL_CUDART_LIBRARY cudart HINTS ${_hcoll_cuda_roots} PATH_SUFFIXES lib64 lib)
  find_library(HCOLL_NCCL_LIBRARY nccl HINTS ${_hcoll_cuda_roots} PATH_SUFFIXES lib64 lib)
  if(HCOLL_CUDA_INCLUDE_DIR AND HCOLL_NCCL_INCLUDE_DIR AND HCOLL_CUDART_LIBRARY AND HCOLL_NCCL_LIBRARY
     AND HCOLL_NCCL_SOURCES)
    set(HCOLL_NCCL_ENABLED 1)
    message(STATUS "hcoll: NCCL backend ON (${HCOLL_NCCL_LIBRARY}, ${HCOLL_CUDART_LIBRARY})")
  elseif(HCOLL_WITH_NCCL STREQUAL "ON")
    message(FATAL_ERROR "HCOLL_WITH_NCCL=ON but CUDA/NCCL (or the backend sources) were not found")
  else()
    message(STATUS "hcoll: NCCL backend OFF (not found)")
  endif()
endif()

function(hcoll_add_nccl_backend target)
  target_sources(${target} PRIVATE ${HCOLL_NCCL_SOURCES})
  target_include_directories(${target} SYSTEM PRIVATE ${HCOLL_CUDA_INCLUDE_DIR} ${HCOLL_NCCL_INCLUDE_DIR})
  target_link_libraries(${target} PRIVATE ${HCOLL_NCCL_LIBRARY} ${HCOLL_CUDART_LIBRARY})
endfunction()
