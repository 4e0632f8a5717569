# `mpirun -n 2 meshsim sweep` with a point that fails (an unknown preset, point 1,
# rank 1's share): the job fails with rank 0's one line, every time (the other
# rank ends with 0 so that mpirun never stops rank 0 before it has said why).
#
#   cmake -DMESHSIM=<binary> -DMPIEXEC=<mpirun> -DSOURCE_DIR=<root> -DWORK_DIR=<scratch> -P tests/cli/sweep_mpi.cmake
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
require(sweep_mpi.cmake MESHSIM MPIEXEC SOURCE_DIR WORK_DIR)
fresh_dir("${WORK_DIR}")
file(COPY_FILE "${SOURCE_DIR}/tests/sweep/tpu_two_ops.json" "${WORK_DIR}/w.json")
foreach(attempt 1 2 3)
  execute_process(COMMAND "${MPIEXEC}" --allow-run-as-root --oversubscribe -n 2 "${MESHSIM}" sweep w.json
                          --preset tpu-v5e,tpu-v9 WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE rc
                          OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  string(REGEX MATCHALL "meshsim: error: [^\n]*\n" lines "${err}")
  if(rc STREQUAL "0" OR NOT lines STREQUAL
     "meshsim: error: w.json:/hardware/preset: unknown preset 'tpu-v9' (known: tpu-v4, tpu-v5e, tpu-v5p, tpu-v6e, a100-dgx, h100-dgx, h200-dgx, b200-dgx, gb200-nvl72) (sweep point 1: preset=tpu-v9)\n")
    report("attempt ${attempt}: expected a failure and rank 0's one line; got ${rc}, [${out}], [${err}]")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
finish(sweep_mpi.cmake)
