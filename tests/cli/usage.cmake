# Help and usage errors of the command line.
#
#   cmake -DMESHSIM=<binary> -DEXAMPLE=<small example workload> -P tests/cli/usage.cmake
#
# - `meshsim --help` and `meshsim run --help` exit 0 and mention every flag;
# - usage errors exit 1 with exactly one stderr line "meshsim: error: ..." and no stdout;
# - a missing workload file gives "meshsim: error: nonexistent.json: cannot open file";
# - bad options on a valid workload (EXAMPLE, copied into the folder as w.json)
#   give exactly the expected error line, and write no file.
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

# run_failing(<args>...): runs meshsim, requires exit 1 and nothing on stdout;
# leaves `shown`, `err` for the caller's stderr check.
macro(run_failing)
  run_meshsim(${ARGN})
  string(REPLACE ";" " " shown "meshsim ${ARGN}")
  if(NOT "${rc}" STREQUAL "1")
    report("`${shown}`: expected exit code 1, got '${rc}' (stderr: ${err})")
  endif()
  if(NOT "${out}" STREQUAL "")
    report("`${shown}`: expected nothing on stdout, got:\n${out}")
  endif()
endmacro()

# expect_error(<expected stderr line> <args>...): exit 1, nothing on stdout, exactly that line.
function(expect_error expected)
  run_failing(${ARGN})
  if(NOT "${err}" STREQUAL "${expected}\n")
    report("`${shown}`: stderr differs\n  expected: [${expected}\n]\n  got:      [${err}]")
  endif()
  set(failures "${failures}" PARENT_SCOPE)
endfunction()

# Usage errors: exit 1, nothing on stdout, one stderr line "meshsim: error: ...".
foreach(args "run" "run;x.json;--bogus")
  run_failing(${args})
  if(NOT "${err}" MATCHES "^meshsim: error: [^\n]*\n$")
    report("`${shown}`: expected one stderr line starting 'meshsim: error: ', got:\n[${err}]")
  endif()
endforeach()

# A workload file that does not exist.
expect_error("meshsim: error: nonexistent.json: cannot open file" run nonexistent.json)

if(DEFINED EXAMPLE AND NOT "${EXAMPLE}" STREQUAL "")
  file(COPY_FILE "${EXAMPLE}" "${work_dir}/w.json")
  # --trace-chips: every id must be a chip of the workload (4 chips).
  expect_error("meshsim: error: --trace-chips: chip 9 is out of range: w.json has chips 0..3"
               run w.json -q --trace t.json --trace-chips 0,9)
  # --trace: only .json, .pftrace or .pb; not '-', not empty.
  foreach(bad x.txt - trace)
    expect_error("meshsim: error: --trace: expected a file name ending in .json, .pftrace or .pb, got '${bad}'"
                 run w.json -q --trace ${bad})
  endforeach()
  expect_error("meshsim: error: --trace: 1 required TEXT missing (see meshsim --help)" run w.json -q --trace=)
  # Outputs that would overwrite each other or the workload.
  expect_error("meshsim: error: --trace: 'o.json' is also the --json output; give them different files"
               run w.json -q --json ./o.json --trace o.json)
  expect_error("meshsim: error: --trace: './w.json' is the workload file; it would be overwritten"
               run w.json -q --trace ./w.json)
  expect_error("meshsim: error: --json: 'w.json' is the workload file; it would be overwritten"
               run w.json -q --json w.json)
  # Trace options need --trace.
  foreach(args "--trace-detail;ops" "--trace-chips;1" "--trace-window;1:2" "--trace-max-events;5")
    list(GET args 0 flag)
    expect_error("meshsim: error: ${flag} requires --trace (see meshsim --help)" run w.json -q ${args})
  endforeach()
  # --trace-window: the whole of FROM:TO must parse, and TO must be after FROM in picoseconds.
  foreach(window 1:2junk 1: :2 1x:2 inf:2 2:1 1:1 " 1:2")
    expect_error("meshsim: error: --trace-window: expected FROM:TO in microseconds with 0 <= FROM < TO, got '${window}'"
                 run w.json -q --trace t.json --trace-window ${window})
  endforeach()
  expect_error("meshsim: error: --trace-window: FROM and TO are the same picosecond, got '0:0.0000001'"
               run w.json -q --trace t.json --trace-window 0:0.0000001)
  # The SimGrid engine: the native engine's extras are refused, --simgrid-cfg needs
  # it, and SimGrid killing its process (a bad setting) is one error line.
  expect_error("meshsim: error: --trace: only with --engine native" run w.json -q --engine simgrid --trace t.json)
  expect_error("meshsim: error: --critical-path: only with --engine native" run w.json -q --engine all --critical-path)
  expect_error("meshsim: error: --links: only with --engine native" run w.json -q --engine simgrid --links 3)
  expect_error("meshsim: error: --simgrid-cfg: only with --engine simgrid or all"
               run w.json -q --simgrid-cfg network/model:LV08)
  expect_error("meshsim: error: --engine: bogus not in {native,simgrid,all} (see meshsim --help)"
               run w.json -q --engine bogus)
  expect_error("meshsim: error: SimGrid engine failed (it was killed by signal 6 (Aborted)): Model 'Nope' is invalid! Valid models are: LV08, Constant, SMPI, IB, CM02, ns-3."
               run w.json -q --engine simgrid --simgrid-cfg network/model:Nope)
  expect_error("meshsim: error: SimGrid engine failed (it exited with code 2): Bad config key: no/such-key"
               run w.json -q --engine all --simgrid-cfg no/such-key:1)
  # A folder given as the workload.
  file(MAKE_DIRECTORY "${work_dir}/dir.json")
  expect_error("meshsim: error: dir.json: is a directory, not a workload file" run dir.json)
  file(REMOVE_RECURSE "${work_dir}/dir.json")
  file(GLOB written LIST_DIRECTORIES true "${work_dir}/*")
  list(REMOVE_ITEM written "${work_dir}/w.json")
  if(written)
    report("bad options wrote files: ${written}")
  endif()
  file(READ "${EXAMPLE}" original)
  file(READ "${work_dir}/w.json" now)
  if(NOT "${original}" STREQUAL "${now}")
    report("a bad option overwrote the workload file")
  endif()
endif()

file(REMOVE_RECURSE "${work_dir}")
if(NOT "${failures}" STREQUAL "")
  message(FATAL_ERROR "usage.cmake: ${MESHSIM}\n${failures}")
endif()
