# Exact reductions (sim/reduce.hpp, docs/MODEL.md "Exact reductions"): a run
# and the same run with --no-reduce write byte-identical --json documents, and
# tables that differ only by the reduced run's "exact reduction" line. The
# workloads that must reduce (REDUCING) print that line, so the comparison is
# never between two unreduced runs.
#
#   cmake -DMESHSIM=<binary> -DWORKLOADS=<a;b;...> -DREDUCING=<a;b;...> -DWORK_DIR=<scratch> -P tests/cli/reduce.cmake
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
require(reduce.cmake MESHSIM WORKLOADS WORK_DIR)
fresh_dir("${WORK_DIR}")

foreach(workload ${WORKLOADS})
  get_filename_component(stem "${workload}" NAME_WE)
  foreach(mode reduced full)
    set(flag "")
    if(mode STREQUAL "full")
      set(flag "--no-reduce")
    endif()
    execute_process(COMMAND "${MESHSIM}" run "${workload}" ${flag} --links 8 --json "${WORK_DIR}/${stem}.${mode}.json"
                    RESULT_VARIABLE rc OUTPUT_VARIABLE table_${mode} ERROR_VARIABLE err TIMEOUT 300)
    if(NOT rc EQUAL 0)
      report("${stem} (${mode}): exit ${rc}: ${err}")
    endif()
  endforeach()
  file(READ "${WORK_DIR}/${stem}.reduced.json" reduced_json)
  file(READ "${WORK_DIR}/${stem}.full.json" full_json)
  if(NOT reduced_json STREQUAL full_json)
    report("${stem}: --json differs between the reduced run and --no-reduce")
  endif()
  string(REGEX REPLACE "exact reduction: [^\n]*\n" "" reduced_table "${table_reduced}")
  if(NOT reduced_table STREQUAL table_full)
    report("${stem}: the tables differ beyond the reduction line")
  endif()
  if(table_full MATCHES "exact reduction")
    report("${stem}: --no-reduce printed a reduction")
  endif()
  if(workload IN_LIST REDUCING AND NOT table_reduced MATCHES "exact reduction: simulated [0-9]+ of the [0-9]+ transfers")
    report("${stem}: expected a reduction, the run simulated everything")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK_DIR}")
finish("reduce.cmake: ${MESHSIM}")
