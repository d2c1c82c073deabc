# The Python package as the install component `python`: everything `import hcoll` needs, laid
# out relative to a site-packages folder, so that
#     cmake --install <build> --component python --prefix <site-packages or a staging folder>
# gives an importable package with the library inside it. setup.py (pip) installs this component
# into a staging folder and puts whatever it holds into the wheel: a part added to the package
# elsewhere (the torch c10d extension: hcoll/torch/...) needs only its own
#     install(... DESTINATION hcoll/<subfolder> COMPONENT python EXCLUDE_FROM_ALL)
# rule, and setup.py stays unchanged. EXCLUDE_FROM_ALL keeps the component out of a plain
# `cmake --install` (a C/C++ consumer's prefix gets no hcoll/ Python folder).

set(HCOLL_PYTHON_PACKAGE_LIBDIR hcoll/_native)  # bindings/python/hcoll/_lib.py looks here first

# The MPI libhcoll links, recorded for the import-time check (_lib.py, _mpi_check.py): its family
# as hcoll_mpi_version() names it, its version from mpi.h, and its shared library's SONAME.
function(_hcoll_mpi_build_info)
  set(family "")
  set(version "")
  set(header "")
  foreach(dir IN LISTS MPI_C_HEADER_DIR MPI_C_INCLUDE_DIRS)
    if(EXISTS "${dir}/mpi.h")
      set(header "${dir}/mpi.h")
      break()
    endif()
  endforeach()
  if(header)
    file(STRINGS "${header}" mpich REGEX "^#define MPICH_VERSION \"")
    file(STRINGS "${header}" ompi REGEX "^#define OMPI_(MAJOR|MINOR|RELEASE)_VERSION ")
    if(mpich)
      set(family "MPICH")
      string(REGEX REPLACE ".*\"([^\"]*)\".*" "\\1" version "${mpich}")
    elseif(ompi)
      set(family "Open MPI")
      set(parts "")
      foreach(part MAJOR MINOR RELEASE)
        string(REGEX MATCH "OMPI_${part}_VERSION +([0-9]+)" _ "${ompi}")
        list(APPEND parts "${CMAKE_MATCH_1}")
      endforeach()
      list(JOIN parts "." version)
    endif()
  endif()
  # The MPI library itself (not its helpers: libopen-pal, ...): its SONAME, as the loader maps it.
  set(soname "")
  foreach(lib IN LISTS MPI_C_LIBRARIES)
    get_filename_component(name "${lib}" NAME)
    if(name MATCHES "^lib(mpich|mpi)\\.so")
      get_filename_component(real "${lib}" REALPATH)
      if(CMAKE_OBJDUMP)
        execute_process(COMMAND ${CMAKE_OBJDUMP} -p "${real}" OUTPUT_VARIABLE dump ERROR_QUIET)
        string(REGEX MATCH "SONAME +([^\n ]+)" _ "${dump}")
        set(soname "${CMAKE_MATCH_1}")
      endif()
      if(NOT soname)  # lib<x>.so.<major>.<minor>.<patch> -> lib<x>.so.<major>
        get_filename_component(real_name "${real}" NAME)
        string(REGEX REPLACE "^(lib[^.]+\\.so(\\.[0-9]+)?).*" "\\1" soname "${real_name}")
      endif()
      break()
    endif()
  endforeach()
  set(HCOLL_BUILD_MPI_FAMILY "${family}" PARENT_SCOPE)
  set(HCOLL_BUILD_MPI_VERSION "${version}" PARENT_SCOPE)
  set(HCOLL_BUILD_MPI_LIBRARY "${soname}" PARENT_SCOPE)
endfunction()
_hcoll_mpi_build_info()
if(HCOLL_NCCL_ENABLED)
  set(HCOLL_BUILD_NCCL True)
else()
  set(HCOLL_BUILD_NCCL False)
endif()
message(STATUS "hcoll: Python package records ${HCOLL_BUILD_MPI_FAMILY} ${HCOLL_BUILD_MPI_VERSION} "
               "(${HCOLL_BUILD_MPI_LIBRARY})")
configure_file(${PROJECT_SOURCE_DIR}/bindings/python/_build_info.py.in
               ${PROJECT_BINARY_DIR}/python/hcoll/_build_info.py @ONLY)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/bindings/python/hcoll
  DESTINATION .
  COMPONENT python EXCLUDE_FROM_ALL
  FILES_MATCHING PATTERN "*.py"
  PATTERN "__pycache__" EXCLUDE)
install(FILES ${PROJECT_BINARY_DIR}/python/hcoll/_build_info.py
  DESTINATION hcoll
  COMPONENT python EXCLUDE_FROM_ALL)
# One real file under the SONAME (a wheel is a zip: the usual libhcoll.so -> .so.0 -> .so.0.1.0
# links would become three copies). The library needs no RPATH: _lib.py loads it by its path,
# and what it links (MPI, spdlog, NCCL) is found where the build found it.
install(FILES $<TARGET_FILE:hcoll>
  DESTINATION ${HCOLL_PYTHON_PACKAGE_LIBDIR}
  RENAME libhcoll.so.${PROJECT_VERSION_MAJOR}
  COMPONENT python EXCLUDE_FROM_ALL)
