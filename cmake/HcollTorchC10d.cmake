# The torch.distributed backend (bindings/torch_c10d): a Python extension built against the torch
# that HCOLL_PYTHON imports. HCOLL_WITH_TORCH=AUTO builds it when that Python imports torch and
# torch's CMake package (TorchConfig.cmake, c10d headers) and pybind11 are found; ON requires
# them; OFF skips the search. Sets HCOLL_TORCH_C10D_ENABLED and, when on, HCOLL_TORCH_C10D_DIR:
# the build-tree folder holding the module (tests point HCOLL_C10D_MODULE_DIR at it).
set(HCOLL_TORCH_C10D_ENABLED 0)
set(HCOLL_PYTHON /usr/bin/python3 CACHE FILEPATH
    "Python for the binding tests and the torch extension (Debian's: numpy, torch, mpi4py)")

if(NOT HCOLL_WITH_TORCH STREQUAL "OFF")
  set(_why "")
  execute_process(COMMAND ${HCOLL_PYTHON} -c "import torch, os; print(torch.__version__)"
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _torch_version ERROR_QUIET
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _rc EQUAL 0)
    set(_why "${HCOLL_PYTHON} cannot import torch")
  else()
    find_package(Torch QUIET)
    find_path(HCOLL_C10D_INCLUDE_DIR torch/csrc/distributed/c10d/ProcessGroup.hpp
              HINTS ${TORCH_INCLUDE_DIRS})
    set(Python3_EXECUTABLE ${HCOLL_PYTHON})
    find_package(Python3 QUIET COMPONENTS Interpreter Development.Module)
    find_package(pybind11 CONFIG QUIET)
    if(TORCH_INSTALL_PREFIX)
      find_library(HCOLL_TORCH_PYTHON_LIBRARY torch_python
                   HINTS ${TORCH_INSTALL_PREFIX}/lib ${TORCH_INSTALL_PREFIX}/lib64)
    endif()
    if(NOT Torch_FOUND)
      set(_why "torch's CMake package (TorchConfig.cmake; Debian: libtorch-dev) was not found")
    elseif(NOT HCOLL_C10D_INCLUDE_DIR)
      set(_why "torch's c10d headers were not found")
    elseif(NOT Python3_Development.Module_FOUND)
      set(_why "the Python headers of ${HCOLL_PYTHON} were not found")
    elseif(NOT pybind11_FOUND)
      set(_why "pybind11 (Debian: pybind11-dev) was not found")
    elseif(NOT HCOLL_TORCH_PYTHON_LIBRARY)
      set(_why "libtorch_python was not found")
    endif()
  endif()
  if(_why STREQUAL "")
    set(HCOLL_TORCH_C10D_ENABLED 1)
    message(STATUS "hcoll: torch.distributed backend ON (torch ${_torch_version})")
  elseif(HCOLL_WITH_TORCH STREQUAL "ON")
    message(FATAL_ERROR "HCOLL_WITH_TORCH=ON but ${_why}")
  else()
    message(STATUS "hcoll: torch.distributed backend OFF (${_why})")
  endif()
endif()
