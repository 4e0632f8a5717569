# One bad-input case: runs `meshsim run tests/bad_input/NAME.json` from the project
# root and requires exit code 1, nothing on stdout, and stderr equal byte for byte
# to tests/bad_input/NAME.err (one line, "meshsim: error: FILE:/json/pointer: message");
# `meshsim validate` on it must print the same line.
#
#   cmake -DMESHSIM=<binary> -DCASE=<abs path of NAME.json> -DSOURCE_DIR=<project root>
#         -P tests/cli/bad_input.cmake
cmake_minimum_required(VERSION 3.25)

foreach(var MESHSIM CASE SOURCE_DIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "bad_input.cmake: -D${var}=... is required")
  endif()
endforeach()

get_filename_component(name "${CASE}" NAME_WE)
get_filename_component(case_dir "${CASE}" DIRECTORY)
set(relative "tests/bad_input/${name}.json")
set(expected_file "${case_dir}/${name}.err")
if(NOT EXISTS "${SOURCE_DIR}/${relative}")
  message(FATAL_ERROR "bad_input.cmake: ${SOURCE_DIR}/${relative} does not exist (CASE=${CASE})")
endif()
if(NOT EXISTS "${expected_file}")
  message(FATAL_ERROR "bad_input.cmake: missing ${expected_file}, the expected stderr line of ${relative}")
endif()
file(READ "${expected_file}" expected)

# A hang is a failure too: no bad input may take long to refuse.
execute_process(
  COMMAND "${MESHSIM}" run "${relative}"
  WORKING_DIRECTORY "${SOURCE_DIR}"
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err
  TIMEOUT 60)

set(problems "")
if(NOT "${rc}" STREQUAL "1")
  string(APPEND problems "  exit code: expected 1, got '${rc}'\n")
endif()
if(NOT "${out}" STREQUAL "")
  string(APPEND problems "  stdout: expected nothing, got:\n${out}\n")
endif()
if(NOT "${err}" STREQUAL "${expected}")
  string(APPEND problems "  stderr differs\n  expected: [${expected}]\n  got:      [${err}]\n")
endif()
# `meshsim validate` gives the same line, except for a time overflow, which only
# the simulation finds (then validate accepts the file).
execute_process(
  COMMAND "${MESHSIM}" validate "${relative}"
  WORKING_DIRECTORY "${SOURCE_DIR}"
  RESULT_VARIABLE vrc
  OUTPUT_VARIABLE vout
  ERROR_VARIABLE verr
  TIMEOUT 60)
if("${expected}" MATCHES "simulated time would exceed")
  if(NOT "${vrc}" STREQUAL "0")
    string(APPEND problems "  validate: a time overflow is found only by simulating; expected exit 0, got '${vrc}' [${verr}]\n")
  endif()
elseif(NOT "${vrc}" STREQUAL "1" OR NOT "${vout}" STREQUAL "" OR NOT "${verr}" STREQUAL "${expected}")
  string(APPEND problems "  `meshsim validate ${relative}` differs from run: exit '${vrc}', stdout [${vout}]\n  stderr:   [${verr}]\n")
endif()
if(NOT "${problems}" STREQUAL "")
  message(FATAL_ERROR "bad_input ${name}: `meshsim run ${relative}` (in ${SOURCE_DIR})\n${problems}")
endif()
