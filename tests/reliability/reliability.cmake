# Reliability: stalls, timeouts, shutdown with dead peers, hostile input, idle CPU, soak.
# Included from tests/CMakeLists.txt (uses hcoll_add_mpi_test and hcoll_test_main from there).

set(stall_env
  HCOLL_STALL_CHECK_TIME_SECONDS=1
  HCOLL_STALL_SHUTDOWN_TIME_SECONDS=3)

# Catch2 multi-rank tests with the shared runner.
add_executable(hcoll-test-stall reliability/test_stall.cc)
target_link_libraries(hcoll-test-stall PRIVATE hcoll_test_main)
foreach(scenario coordinator idle)
  hcoll_add_mpi_test(stall.${scenario}.np2 hcoll-test-stall 2 TIMEOUT 60 LABELS reliability
                     ARGS "[${scenario}]")
  set_tests_properties(stall.${scenario}.np2 PROPERTIES
    ENVIRONMENT "${stall_env};HCOLL_FLIGHT_RECORDER=${CMAKE_CURRENT_BINARY_DIR}/fr-${scenario}")
endforeach()

# The idle missing rank is named among several waiting ones (3 ranks).
hcoll_add_mpi_test(stall.idle_named.np3 hcoll-test-stall 3 TIMEOUT 60 LABELS reliability
                   ARGS "[idle_named]")
set_tests_properties(stall.idle_named.np3 PROPERTIES ENVIRONMENT "${stall_env}")

# Programs with their own main (they initialize and shut down themselves).
foreach(name hostile_input shutdown sigkill idle_cpu soak)
  string(REPLACE "_" "-" dashed ${name})
  add_executable(hcoll-test-${dashed} reliability/test_${name}.cc support/test_util.cc)
  if(name STREQUAL "hostile_input")
    target_sources(hcoll-test-${dashed} PRIVATE reliability/hostile_enums.c)
  endif()
  target_include_directories(hcoll-test-${dashed} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(hcoll-test-${dashed} PRIVATE hcoll::hcoll Catch2::Catch2 Threads::Threads
                        ${HTEST_CUDA_LIBS})
endforeach()

hcoll_add_mpi_test(hostile_input.np2 hcoll-test-hostile-input 2 TIMEOUT 60 LABELS reliability)
foreach(scenario in-flight peer-gone destroy)
  hcoll_add_mpi_test(shutdown.${scenario}.np2 hcoll-test-shutdown 2 TIMEOUT 60
                     LABELS reliability ARGS ${scenario})
  set_tests_properties(shutdown.${scenario}.np2 PROPERTIES ENVIRONMENT "${stall_env}")
endforeach()
# Rank 1 tells rank 0 it has shut down through a file (the test links no MPI of its own).
hcoll_add_mpi_test(shutdown.peer-gone-pending.np2 hcoll-test-shutdown 2 TIMEOUT 90
                   LABELS reliability
                   ARGS peer-gone-pending ${CMAKE_CURRENT_BINARY_DIR}/shutdown-peer-gone.marker)
set_tests_properties(shutdown.peer-gone-pending.np2 PROPERTIES ENVIRONMENT "${stall_env}")
hcoll_add_mpi_test(idle_cpu.np2 hcoll-test-idle-cpu 2 TIMEOUT 60 LABELS reliability)
hcoll_add_mpi_test(soak.np2 hcoll-test-soak 2 TIMEOUT 90 LABELS reliability ARGS 2000)
hcoll_add_mpi_test(soak.np3 hcoll-test-soak 3 TIMEOUT 90 LABELS reliability ARGS 300)

# A rank killed with SIGKILL: the wrapper asserts the job ends within 30 s.
add_test(NAME sigkill.np2
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/reliability/run_sigkill.sh ${MPIEXEC_EXECUTABLE}
          $<TARGET_FILE:hcoll-test-sigkill> 30)
set_tests_properties(sigkill.np2 PROPERTIES TIMEOUT 60 LABELS "mpi;reliability" PROCESSORS 2
  ENVIRONMENT "${stall_env}")
# The same with rank 1 killed in the middle of a large allreduce's data phase.
add_test(NAME sigkill.data-phase.np2
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/reliability/run_sigkill.sh ${MPIEXEC_EXECUTABLE}
          $<TARGET_FILE:hcoll-test-sigkill> 30 data-phase)
set_tests_properties(sigkill.data-phase.np2 PROPERTIES TIMEOUT 60 LABELS "mpi;reliability"
  PROCESSORS 2 ENVIRONMENT "${stall_env}")
# And in the middle of a large broadcast's data phase, through the shared-memory lanes.
add_test(NAME sigkill.lane-phase.np2
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/reliability/run_sigkill.sh ${MPIEXEC_EXECUTABLE}
          $<TARGET_FILE:hcoll-test-sigkill> 30 lane-phase)
set_tests_properties(sigkill.lane-phase.np2 PROPERTIES TIMEOUT 60 LABELS "mpi;reliability"
  PROCESSORS 2 ENVIRONMENT "${stall_env}")
# And in a loop of small operations through the shared-memory control block.
add_test(NAME sigkill.small-phase.np2
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/reliability/run_sigkill.sh ${MPIEXEC_EXECUTABLE}
          $<TARGET_FILE:hcoll-test-sigkill> 30 small-phase)
set_tests_properties(sigkill.small-phase.np2 PROPERTIES TIMEOUT 60 LABELS "mpi;reliability"
  PROCESSORS 2 ENVIRONMENT "${stall_env}")
# And in the middle of an Adasum allreduce (its own point-to-point stages).
add_test(NAME sigkill.adasum-phase.np2
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/reliability/run_sigkill.sh ${MPIEXEC_EXECUTABLE}
          $<TARGET_FILE:hcoll-test-sigkill> 30 adasum-phase)
set_tests_properties(sigkill.adasum-phase.np2 PROPERTIES TIMEOUT 60 LABELS "mpi;reliability"
  PROCESSORS 2 ENVIRONMENT "${stall_env}")

# Unit tests of the flight recorder (internals: the static core).
add_executable(hcoll-reliability-unit reliability/test_flight_recorder.cc)
target_link_libraries(hcoll-reliability-unit PRIVATE hcoll_internal Catch2::Catch2)
add_test(NAME reliability_unit COMMAND hcoll-reliability-unit)
set_tests_properties(reliability_unit PROPERTIES TIMEOUT 60 LABELS "unit;reliability")

# Members that leave, abort or are configured differently (test_leave.cc): every job must end
# within its bound, with the expected status and no FAIL line (run_bounded.sh). Default
# settings: what a user gets.
add_executable(hcoll-test-leave reliability/test_leave.cc)
target_link_libraries(hcoll-test-leave PRIVATE hcoll::hcoll Threads::Threads)
set(run_bounded ${CMAKE_CURRENT_SOURCE_DIR}/reliability/run_bounded.sh)
function(hcoll_add_leave_test scenario np bound expect)
  add_test(NAME leave.${scenario}.np${np}
    COMMAND ${run_bounded} ${bound} ${expect}
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:hcoll-test-leave> ${MPIEXEC_POSTFLAGS} ${scenario} ${ARGN})
  set_tests_properties(leave.${scenario}.np${np} PROPERTIES
    TIMEOUT 60 LABELS "mpi;reliability" PROCESSORS ${np})
endfunction()
hcoll_add_leave_test(return-from-main 2 5 any:3 ${CMAKE_CURRENT_BINARY_DIR}/leave-return.marker)
hcoll_add_leave_test(shutdown-while-waiting 2 10 any:4)
hcoll_add_leave_test(destroy-split 2 10 any:8)
hcoll_add_leave_test(unnamed-ahead-shutdown 2 10 any:4)
hcoll_add_leave_test(idle-peer 2 10 any:2)
hcoll_add_leave_test(np3-leave 3 15 any:8)
hcoll_add_leave_test(abort 2 5 nonzero)
hcoll_add_leave_test(set-timeout 2 15 any:8 ${CMAKE_CURRENT_BINARY_DIR}/leave-timeout.done)
hcoll_add_leave_test(stuck-transfer 2 30 any:4 ${CMAKE_CURRENT_BINARY_DIR}/leave-stuck.pid)
hcoll_add_leave_test(killed-transfer 2 30 any:2 ${CMAKE_CURRENT_BINARY_DIR}/leave-killed.pid)

# Bounded exit: rank 1 never reaches its MPI_Finalize after a clean close (stopped, then
# SIGKILLed), with MPICH's launcher clean-up off: rank 0's exit ends within the watchdog's bound
# (3 s here: the stall shutdown time) with status 0 (run_exit_bound.sh).
if(HCOLL_MPI STREQUAL "mpich")
  add_test(NAME leave.peer-dies-after-close.np2
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/reliability/run_exit_bound.sh ${MPIEXEC_EXECUTABLE}
            $<TARGET_FILE:hcoll-test-leave> 3 ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(leave.peer-dies-after-close.np2 PROPERTIES TIMEOUT 60
    LABELS "mpi;reliability" PROCESSORS 2 ENVIRONMENT "${stall_env}")
  # The other side of that bound: ranks that did not close together (one still working) are not
  # ended by it; the job ends normally once the late rank is done.
  add_test(NAME leave.peer-works-after-close.np2
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:hcoll-test-leave> ${MPIEXEC_POSTFLAGS} peer-works-after-close)
  set_tests_properties(leave.peer-works-after-close.np2 PROPERTIES TIMEOUT 60
    LABELS "mpi;reliability" PROCESSORS 2 ENVIRONMENT "${stall_env}"
    PASS_REGULAR_EXPRESSION "rank 1: PASS: finished its work after rank 0's close"
    FAIL_REGULAR_EXPRESSION "FAIL|MPI_Finalize did not return within")
endif()

# Each setting that changes what ranks send or how they match, different on rank 1: initialize
# fails with INVALID_ARGUMENT naming it on every rank (MPMD launch: one environment per rank).
foreach(setting "HCOLL_FUSION_THRESHOLD;1048576;0" "HCOLL_CACHE_CAPACITY;1;1024"
                "HCOLL_STALL_SHUTDOWN_TIME_SECONDS;600;0.5")
  list(GET setting 0 var)
  list(GET setting 1 value0)
  list(GET setting 2 value1)
  add_test(NAME settings.${var}.np2
    COMMAND ${run_bounded} 15 zero
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 1 -env ${var} ${value0}
            $<TARGET_FILE:hcoll-test-leave> settings-differ ${var} :
            ${MPIEXEC_NUMPROC_FLAG} 1 -env ${var} ${value1}
            $<TARGET_FILE:hcoll-test-leave> settings-differ ${var})
  set_tests_properties(settings.${var}.np2 PROPERTIES
    TIMEOUT 60 LABELS "mpi;reliability" PROCESSORS 2)
endforeach()
