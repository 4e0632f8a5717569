# meshsim search end to end: the table, the JSON, and the winner's workload, which
# `meshsim run` reproduces to the picosecond; a bad spec is one error line.
#
#   cmake -DMESHSIM=<binary> -DSOURCE_DIR=<project root> -DWORK_DIR=<scratch> -P tests/cli/search.cmake
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
require(search.cmake MESHSIM SOURCE_DIR WORK_DIR)
fresh_dir("${WORK_DIR}")

execute_process(COMMAND "${MESHSIM}" search tests/search/small_v5e.json --top 3 --json ${WORK_DIR}/s.json
                        --workload ${WORK_DIR}/best.json
                WORKING_DIRECTORY "${SOURCE_DIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
if(NOT rc EQUAL 0)
  report("search: exit ${rc}: ${err}")
elseif(NOT out MATCHES "plans +[0-9]+ enumerated: [0-9]+ invalid, [0-9]+ pruned by memory .* [0-9]+ simulated\n"
       OR NOT out MATCHES "\n +1 +[0-9.]+ ")
  report("search: unexpected table:\n${out}")
else()
  file(READ "${WORK_DIR}/s.json" json)
  string(JSON best_step GET "${json}" plans 0 step_ps)
  execute_process(COMMAND "${MESHSIM}" run ${WORK_DIR}/best.json --json - WORKING_DIRECTORY "${SOURCE_DIR}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE run_json ERROR_VARIABLE err TIMEOUT 300)
  if(NOT rc EQUAL 0)
    report("run of the winner's workload: exit ${rc}: ${err}")
  else()
    string(JSON run_step GET "${run_json}" training step_ps)
    if(NOT run_step STREQUAL best_step)
      report("the winner's workload runs in ${run_step} ps; the search said ${best_step} ps")
    endif()
  endif()
endif()

# The Pareto plot: PNG and SVG drawn, the data beside them; the explanation in the table.
execute_process(COMMAND "${MESHSIM}" search tests/search/small_v5e.json --top 3 --plot ${WORK_DIR}/pareto
                WORKING_DIRECTORY "${SOURCE_DIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
if(NOT rc EQUAL 0)
  report("search --plot: exit ${rc}: ${err}")
elseif(NOT EXISTS "${WORK_DIR}/pareto.png" OR NOT EXISTS "${WORK_DIR}/pareto.svg" OR NOT EXISTS "${WORK_DIR}/pareto.dat")
  report("search --plot: no pareto.png, pareto.svg or pareto.dat")
else()
  file(READ "${WORK_DIR}/pareto.svg" svg)
  if(NOT svg MATCHES "Pareto front" OR NOT out MATCHES "\nwhy rank 1 beats rank [0-9]+: "
     OR NOT out MATCHES "\nrules of thumb \\(the scaling book")
    report("search --plot: the SVG has no Pareto front, or the table no explanation:\n${out}")
  endif()
endif()

file(WRITE "${WORK_DIR}/bad.json" "{\"hardware\": \"tpu-v5e\", \"topology\": {\"shape\": [4, 4]}, \"mesh\": {\"X\": 16},
  \"training\": {\"model\": \"llama3-8b\", \"global_batch\": 16}}\n")
execute_process(COMMAND "${MESHSIM}" search ${WORK_DIR}/bad.json WORKING_DIRECTORY "${SOURCE_DIR}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT rc EQUAL 1 OR NOT out STREQUAL ""
   OR NOT err STREQUAL "meshsim: error: ${WORK_DIR}/bad.json:/mesh: the search chooses the mesh: remove \"mesh\"\n")
  report("search of a spec with a mesh: expected one error line, got exit ${rc}, [${out}], [${err}]")
endif()
finish(search.cmake)
