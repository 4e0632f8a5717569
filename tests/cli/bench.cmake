# meshsim_bench from the command line: its help, its usage errors, and the
# figures --scale prints for one small case and one refused case.
#
#   cmake -DBENCH=<meshsim_bench> -DSOURCE_DIR=<project root> -P tests/cli/bench.cmake
#
# - `--help` exits 0 and names every mode;
# - an unknown option exits 1 with "meshsim_bench: error: unknown option" on stderr;
# - `--scale --repeat 1` on the X all-reduce of a 16x16x16 v4 (reduced to one
#   ring: 512 transfers simulated) prints the machine, the columns' header and a
#   row whose ns/sim is a whole number; on a missing file, a row that says
#   "refused" with no ns/sim ("-").
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
require(bench.cmake BENCH SOURCE_DIR)

macro(run_bench)
  execute_process(
    COMMAND "${BENCH}" ${ARGN}
    WORKING_DIRECTORY "${SOURCE_DIR}"
    RESULT_VARIABLE rc
    OUTPUT_VARIABLE out
    ERROR_VARIABLE err
    TIMEOUT 120)
endmacro()

# expect_match(<text> <regex> <what>): reports <what> unless <text> matches.
macro(expect_match text regex what)
  if(NOT "${text}" MATCHES "${regex}")
    report("${what}")
  endif()
endmacro()

run_bench(--help)
expect_match("${rc}" "^0$" "--help: exit ${rc}")
foreach(mode "usage: meshsim_bench" "--engines" "--parse" "--scale" "--hlo" "--plans" "--traces")
  string(FIND "${out}" "${mode}" at)
  if(at EQUAL -1)
    report("--help does not mention '${mode}'")
  endif()
endforeach()

run_bench(--bogus)
expect_match("${rc}" "^1$" "--bogus: exit ${rc}, not 1")
expect_match("${err}" "^meshsim_bench: error: unknown option '--bogus'\n" "--bogus: stderr '${err}'")

run_bench(--scale --repeat 1 bench/cases/allreduce_x_v4_16x16x16.json nonexistent.json)
expect_match("${rc}" "^0$" "--scale: exit ${rc}: ${err}")
expect_match("${out}" "^machine: [^\n]+, [0-9]+ cores" "--scale: no machine line first:\n${out}")
expect_match("${out}" "\ncase [(]end to end, a process per run[)] +wall s +min s +user s +sys s +ns/sim +peak MB +result\n"
             "--scale: no header:\n${out}")
# wall, min, user, sys, ns/sim (a whole number), peak, then the result.
set(num "[0-9]+\\.[0-9]+")
expect_match("${out}"
             "\nallreduce_x_v4_16x16x16.json +${num} +${num} +${num} +${num} +[0-9]+ +${num}  [0-9.]+ us simulated; 131072 transfers, 512 simulated\n"
             "--scale: no row for the X all-reduce:\n${out}")
expect_match("${out}"
             "\nnonexistent.json +${num} +${num} +${num} +${num} +- +${num}  refused: nonexistent.json: cannot open file\n"
             "--scale: no refused row for a missing file:\n${out}")

finish("bench.cmake: ${BENCH}")
