# The progress line: on a terminal (run under `script`, which gives meshsim a
# pseudo-terminal) a sweep long enough to report shows "meshsim: point i/n, ...
# events/s, ... left" on stderr and erases it at the end; with --quiet nothing.
# (In a pipe nothing is shown: the sweep checks require an empty stderr.)
#
#   cmake -DMESHSIM=<binary> -DSCRIPT=<script(1)> -P tests/cli/progress.cmake
cmake_minimum_required(VERSION 3.25)

# Long enough (seconds, not the first 200 ms) for a line to be due on any machine.
set(sweep "${MESHSIM} sweep --op all_reduce --preset tpu-v5e --mesh 64x64 --bytes 1M:4M:4 --csv /dev/null")
execute_process(COMMAND "${SCRIPT}" -qfec "${sweep} > /dev/null" /dev/null
                RESULT_VARIABLE rc OUTPUT_VARIABLE tty ERROR_VARIABLE err TIMEOUT 300)
if(NOT "${rc}" STREQUAL "0")
  message(FATAL_ERROR "`${sweep}` under script: exit ${rc}: ${tty} ${err}")
endif()
string(ASCII 13 27 erase)
set(erase "${erase}[K")
if(NOT "${tty}" MATCHES "meshsim: point [1-2]/2, simulated [0-9.]+ us, [0-9.e+]+ events/s, [0-9]+% done, ~[0-9.?]+ s? ?left")
  message(FATAL_ERROR "no progress line on the terminal; it showed:\n[${tty}]")
endif()
string(LENGTH "${tty}" n)
string(LENGTH "${erase}" e)
math(EXPR at "${n} - ${e}")
string(SUBSTRING "${tty}" ${at} ${e} tail)
if(NOT "${tail}" STREQUAL "${erase}")
  message(FATAL_ERROR "the progress line is not erased at the end; the terminal ends with [${tail}]")
endif()

execute_process(COMMAND "${SCRIPT}" -qfec "${sweep} --quiet" /dev/null
                RESULT_VARIABLE rc OUTPUT_VARIABLE tty ERROR_VARIABLE err TIMEOUT 300)
if(NOT "${rc}" STREQUAL "0" OR NOT "${tty}" STREQUAL "")
  message(FATAL_ERROR "with --quiet the terminal should stay empty; exit ${rc}, it showed [${tty}]")
endif()
