# Two threads (sim::Executor::run, docs/ARCHITECTURE.md "Two threads"): a run on
# two threads and the same run on one write byte-identical --json documents
# and tables, reduced and with --no-reduce.
#
#   cmake -DMESHSIM=<binary> -DWORKLOADS=<a;b;...> -DWORK_DIR=<scratch> -P tests/cli/threads.cmake
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
require(threads.cmake MESHSIM WORKLOADS WORK_DIR)
fresh_dir("${WORK_DIR}")

foreach(workload ${WORKLOADS})
  get_filename_component(stem "${workload}" NAME_WE)
  foreach(reduce "" "--no-reduce")
    foreach(threads 1 2)
      execute_process(COMMAND "${MESHSIM}" run "${workload}" ${reduce} --threads ${threads} --links 8
                              --json "${WORK_DIR}/${stem}.${threads}.json"
                      RESULT_VARIABLE rc OUTPUT_VARIABLE table_${threads} ERROR_VARIABLE err TIMEOUT 300)
      if(NOT rc EQUAL 0)
        report("${stem} ${reduce} (${threads} threads): exit ${rc}: ${err}")
      endif()
    endforeach()
    file(READ "${WORK_DIR}/${stem}.1.json" one)
    file(READ "${WORK_DIR}/${stem}.2.json" two)
    if(NOT one STREQUAL two)
      report("${stem} ${reduce}: --json differs between one thread and two")
    endif()
    if(NOT table_1 STREQUAL table_2)
      report("${stem} ${reduce}: the tables differ between one thread and two")
    endif()
  endforeach()
endforeach()

file(REMOVE_RECURSE "${WORK_DIR}")
finish("threads.cmake: ${MESHSIM}")
