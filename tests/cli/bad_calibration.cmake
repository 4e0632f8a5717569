# One bad calibration file: `meshsim run EXAMPLE --calibration tests/bad_calibration/NAME.json`
# from the project root must exit 1 with nothing on stdout and stderr equal to
# tests/bad_calibration/NAME.err (one line, "meshsim: error: FILE:/json/pointer: message").
#
#   cmake -DMESHSIM=<binary> -DCASE=<abs path of NAME.json> -DSOURCE_DIR=<project root>
#         -DEXAMPLE=<workload, relative to the root> -P tests/cli/bad_calibration.cmake
cmake_minimum_required(VERSION 3.25)

foreach(var MESHSIM CASE SOURCE_DIR EXAMPLE)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "bad_calibration.cmake: -D${var}=... is required")
  endif()
endforeach()

get_filename_component(name "${CASE}" NAME_WE)
set(relative "tests/bad_calibration/${name}.json")
set(expected_file "${SOURCE_DIR}/tests/bad_calibration/${name}.err")
if(NOT EXISTS "${expected_file}")
  message(FATAL_ERROR "bad_calibration.cmake: missing ${expected_file}, the expected stderr line of ${relative}")
endif()
file(READ "${expected_file}" expected)

execute_process(
  COMMAND "${MESHSIM}" run "${EXAMPLE}" --calibration "${relative}"
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
if(NOT "${problems}" STREQUAL "")
  message(FATAL_ERROR "bad_calibration ${name}: `meshsim run ${EXAMPLE} --calibration ${relative}`\n${problems}")
endif()
