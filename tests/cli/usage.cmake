# Help and usage errors of the command line.
#
#   cmake -DMESHSIM=<binary> -P tests/cli/usage.cmake
#
# - `meshsim --help` and `meshsim run --help` exit 0 and mention every flag;
# - usage errors exit 1 with exactly one stderr line "meshsim: error: ..." and no stdout;
# - a missing workload file gives "meshsim: error: nonexistent.json: cannot open file".
cmake_minimum_required(VERSION 3.25)

if(NOT DEFINED MESHSIM OR "${MESHSIM}" STREQUAL "")
  message(FATAL_ERROR "usage.cmake: -DMESHSIM=... is required")
endif()

# An empty folder to run in, so that no workload file can be found by accident.
set(work_dir "${CMAKE_CURRENT_BINARY_DIR}/usage_cmake_work")
file(REMOVE_RECURSE "${work_dir}")
file(MAKE_DIRECTORY "${work_dir}")

set(failures "")

# run_meshsim(<args>...): sets rc, out, err in the caller.
macro(run_meshsim)
  execute_process(
    COMMAND "${MESHSIM}" ${ARGN}
    WORKING_DIRECTORY "${work_dir}"
    RESULT_VARIABLE rc
    OUTPUT_VARIABLE out
    ERROR_VARIABLE err
    TIMEOUT 60)
endmacro()

function(report what)
  set(failures "${failures}${what}\n" PARENT_SCOPE)
endfunction()

# Help: exit 0, text on stdout naming every flag.
foreach(args "--help" "run;--help")
  string(REPLACE ";" " " shown "meshsim ${args}")
  run_meshsim(${args})
  if(NOT "${rc}" STREQUAL "0")
    report("`${shown}`: expected exit code 0, got '${rc}' (stderr: ${err})")
  endif()
  set(missing "")
  foreach(flag --json --links --quiet)
    string(FIND "${out}" "${flag}" at)
    if(at EQUAL -1)
      list(APPEND missing "${flag}")
    endif()
  endforeach()
  if(missing)
    string(REPLACE ";" ", " missing "${missing}")
    report("`${shown}`: the help does not mention ${missing}; it printed:\n${out}")
  endif()
endforeach()

# Usage errors: exit 1, nothing on stdout, one stderr line "meshsim: error: ...".
foreach(args "run" "run;x.json;--bogus")
  string(REPLACE ";" " " shown "meshsim ${args}")
  run_meshsim(${args})
  if(NOT "${rc}" STREQUAL "1")
    report("`${shown}`: expected exit code 1, got '${rc}'")
  endif()
  if(NOT "${out}" STREQUAL "")
    report("`${shown}`: expected nothing on stdout, got:\n${out}")
  endif()
  if(NOT "${err}" MATCHES "^meshsim: error: [^\n]*\n$")
    report("`${shown}`: expected one stderr line starting 'meshsim: error: ', got:\n[${err}]")
  endif()
endforeach()

# A workload file that does not exist.
run_meshsim(run nonexistent.json)
set(expected "meshsim: error: nonexistent.json: cannot open file\n")
if(NOT "${rc}" STREQUAL "1")
  report("`meshsim run nonexistent.json`: expected exit code 1, got '${rc}'")
endif()
if(NOT "${out}" STREQUAL "")
  report("`meshsim run nonexistent.json`: expected nothing on stdout, got:\n${out}")
endif()
if(NOT "${err}" STREQUAL "${expected}")
  report("`meshsim run nonexistent.json`: stderr differs\n  expected: [${expected}]\n  got:      [${err}]")
endif()

file(REMOVE_RECURSE "${work_dir}")
if(NOT "${failures}" STREQUAL "")
  message(FATAL_ERROR "usage.cmake: ${MESHSIM}\n${failures}")
endif()
