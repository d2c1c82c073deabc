# Finds the MPI chosen with HCOLL_MPI through its own wrapper compiler and launcher. Debian's
# mpicc/mpiexec alternatives silently switch when python3-mpi4py pulls in Open MPI, so they are
# never used. HCOLL_MPI_BINDIR is where those two live: /usr/bin, or a relocated MPICH such as the
# GPU bundle's (tests/gpu/make_bundle.sh) on a machine that has no MPI installed. Where neither
# exists, a plain find_package(MPI) decides.
set(HCOLL_MPI_BINDIR /usr/bin CACHE PATH "Folder holding the chosen MPI's mpicc.<mpi> and mpiexec.<mpi>")
if(HCOLL_MPI STREQUAL "mpich")
  set(_hcoll_mpicc ${HCOLL_MPI_BINDIR}/mpicc.mpich)
  set(_hcoll_mpiexec ${HCOLL_MPI_BINDIR}/mpiexec.mpich)
  set(_hcoll_mpiexec_preflags "")
elseif(HCOLL_MPI STREQUAL "openmpi")
  set(_hcoll_mpicc ${HCOLL_MPI_BINDIR}/mpicc.openmpi)
  set(_hcoll_mpiexec ${HCOLL_MPI_BINDIR}/mpiexec.openmpi)
  # Open MPI refuses to run as root (CI does) and to start more ranks than cores without these.
  set(_hcoll_mpiexec_preflags "--allow-run-as-root;--oversubscribe")
else()
  message(FATAL_ERROR "HCOLL_MPI must be mpich or openmpi, not '${HCOLL_MPI}'")
endif()
if(EXISTS ${_hcoll_mpicc})
  set(MPI_C_COMPILER ${_hcoll_mpicc} CACHE FILEPATH "MPI C wrapper" FORCE)
  set(MPIEXEC_EXECUTABLE ${_hcoll_mpiexec} CACHE FILEPATH "MPI launcher" FORCE)
  set(MPIEXEC_PREFLAGS "${_hcoll_mpiexec_preflags}" CACHE STRING "MPI launcher flags" FORCE)
else()
  # Not Debian's layout (another distribution, a module system, a vendor MPI): a plain
  # find_package(MPI) (MPI_HOME, mpicc on PATH, ...). Nothing then guards against the wrong MPI
  # family, so say which one was found below.
  message(STATUS "hcoll: ${_hcoll_mpicc} not found; using find_package(MPI) as the system has it")
  if(HCOLL_MPI STREQUAL "openmpi")
    set(MPIEXEC_PREFLAGS "${_hcoll_mpiexec_preflags}" CACHE STRING "MPI launcher flags")
  endif()
endif()
find_package(MPI REQUIRED COMPONENTS C)
# hcoll uses MPI's C API only. Without these, Open MPI's mpi.h pulls its C++ bindings into every
# C++ translation unit, and libhcoll.so.0 (linked with the C library) has undefined MPI:: symbols.
set_property(TARGET MPI::MPI_C APPEND PROPERTY
  INTERFACE_COMPILE_DEFINITIONS OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
if(NOT MPI_C_LIBRARIES MATCHES "${HCOLL_MPI}" AND NOT MPI_C_LIB_NAMES MATCHES "mpich|mpi")
  message(WARNING "MPI libraries '${MPI_C_LIBRARIES}' do not look like ${HCOLL_MPI}")
endif()
message(STATUS "hcoll: MPI = ${HCOLL_MPI} (${MPI_C_LIBRARIES}), launcher ${MPIEXEC_EXECUTABLE}")
