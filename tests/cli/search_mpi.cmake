# `mpirun -n 2 meshsim search` shares the simulations between the ranks and
# ranks the same plans, with the same steps, as one process (its counts may
# differ: plans are handed out two at a time, so one more may be simulated
# before a better one prunes it); only rank 0 writes.
#
#   cmake -DMESHSIM=<binary> -DMPIEXEC=<mpirun> -DSOURCE_DIR=<root> -DWORK_DIR=<scratch> -P tests/cli/search_mpi.cmake
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
require(search_mpi.cmake MESHSIM MPIEXEC SOURCE_DIR WORK_DIR)
fresh_dir("${WORK_DIR}")
execute_process(COMMAND "${MESHSIM}" search "${SOURCE_DIR}/tests/search/small_v5e.json" --top 4 --json one.json
                WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
if(NOT rc EQUAL 0)
  report("search, one process: exit ${rc}: ${err}")
endif()
execute_process(COMMAND "${MPIEXEC}" --allow-run-as-root --oversubscribe -n 2 "${MESHSIM}" search
                        "${SOURCE_DIR}/tests/search/small_v5e.json" --top 4 --json two.json
                WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out2 ERROR_VARIABLE err TIMEOUT 300)
if(NOT rc EQUAL 0)
  report("search under mpirun -n 2: exit ${rc}: ${err}")
else()
  file(READ "${WORK_DIR}/one.json" one)
  file(READ "${WORK_DIR}/two.json" two)
  string(JSON plans_one GET "${one}" plans)
  string(JSON plans_two GET "${two}" plans)
  string(JSON simulated GET "${two}" counts simulated)
  if(NOT plans_one STREQUAL plans_two)
    report("mpirun -n 2 ranked other plans than one process")
  endif()
  # One table, from rank 0.
  string(REGEX MATCHALL "# meshsim search" tables "${out2}")
  list(LENGTH tables n)
  if(NOT n EQUAL 1 OR simulated LESS 2)
    report("mpirun -n 2: expected one table and the plans simulated; got ${n} tables, ${simulated} simulated")
  endif()
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
finish(search_mpi.cmake)
