# The SimGrid cross-check from the command line (docs/CROSSCHECK.md):
#
#   cmake -DMESHSIM=<binary> -DEXAMPLE=<workload> -DWORK_DIR=<folder> -P tests/cli/crosscheck.cmake
#
# - `--engine all` prints both engines per op and writes a meshsim-compare JSON
#   document; two runs give byte-identical table and JSON;
# - `--engine simgrid --json` is a meshsim-run document marked "engine": "simgrid".
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(failures "")
foreach(i 1 2)
  execute_process(COMMAND "${MESHSIM}" run "${EXAMPLE}" --engine all --json "${WORK_DIR}/compare${i}.json"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE table${i} ERROR_VARIABLE err TIMEOUT 300)
  if(NOT rc EQUAL 0)
    string(APPEND failures "--engine all: exit code ${rc}: ${err}\n")
  endif()
endforeach()
file(READ "${WORK_DIR}/compare1.json" json1)
file(READ "${WORK_DIR}/compare2.json" json2)
if(NOT "${table1}" STREQUAL "${table2}" OR NOT "${json1}" STREQUAL "${json2}")
  string(APPEND failures "--engine all: two runs differ\n")
endif()
foreach(want "native (us)" "simgrid (us)" "diff %")
  string(FIND "${table1}" "${want}" at)
  if(at EQUAL -1)
    string(APPEND failures "--engine all: the table has no '${want}' column:\n${table1}\n")
  endif()
endforeach()
string(JSON format GET "${json1}" format)
string(JSON ops LENGTH "${json1}" ops)
string(JSON native_ops LENGTH "${json1}" native ops)
string(JSON simgrid_engine GET "${json1}" simgrid engine)
if(NOT format STREQUAL "meshsim-compare" OR NOT ops EQUAL native_ops OR NOT simgrid_engine STREQUAL "simgrid")
  string(APPEND failures "--engine all --json: unexpected document (${format}, ${ops} ops, ${simgrid_engine})\n")
endif()
execute_process(COMMAND "${MESHSIM}" run "${EXAMPLE}" --engine simgrid --json - RESULT_VARIABLE rc OUTPUT_VARIABLE run
                ERROR_VARIABLE err TIMEOUT 300)
string(JSON engine ERROR_VARIABLE json_error GET "${run}" engine)
if(NOT rc EQUAL 0 OR NOT engine STREQUAL "simgrid")
  string(APPEND failures "--engine simgrid --json -: exit ${rc}, engine '${engine}' ${json_error} ${err}\n")
endif()
if(NOT "${failures}" STREQUAL "")
  message(FATAL_ERROR "crosscheck.cmake: ${EXAMPLE}\n${failures}")
endif()
