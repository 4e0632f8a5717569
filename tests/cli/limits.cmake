# Limits on the size of a run (meshsim run --max-transfers, --max-memory): a run
# estimated just above a bound is refused before anything is built, with the
# estimate in the one error line; exactly at the bound it runs.
#
#   cmake -DMESHSIM=<binary> -DSOURCE_DIR=<project root> -P tests/cli/limits.cmake
#
# examples/contention_v5e_8x8.json (64 chips, 3 ops) is estimated at 1536 hop
# transfers (its largest op 512) and 157824 bytes: 2112 tasks x 42 bytes + 5760
# edges x 12 bytes (driver::estimate_run), with --no-reduce. Its ops all run over
# X, so by default only one of its 8 groups (the chips of one y) is built and
# run (driver/groups.hpp), and the limits count that: 192 transfers (64 per op).
cmake_minimum_required(VERSION 3.25)
foreach(var MESHSIM SOURCE_DIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "limits.cmake: -D${var}=... is required")
  endif()
endforeach()

set(workload examples/contention_v5e_8x8.json)
set(failures "")

function(expect_error expected)
  execute_process(COMMAND "${MESHSIM}" run ${workload} ${ARGN} WORKING_DIRECTORY "${SOURCE_DIR}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  string(REPLACE ";" " " shown "meshsim run ${workload} ${ARGN}")
  if(NOT "${rc}" STREQUAL "1" OR NOT "${out}" STREQUAL "" OR NOT "${err}" STREQUAL "${expected}\n")
    set(failures "${failures}`${shown}`: expected exit 1, no stdout and\n  [${expected}]\n  got exit ${rc}, stdout [${out}], stderr [${err}]\n"
        PARENT_SCOPE)
  endif()
endfunction()

function(expect_success)
  execute_process(COMMAND "${MESHSIM}" run ${workload} ${ARGN} WORKING_DIRECTORY "${SOURCE_DIR}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  string(REPLACE ";" " " shown "meshsim run ${workload} ${ARGN}")
  # (the total counts every group's transfers, simulated or not)
  if(NOT "${rc}" STREQUAL "0" OR NOT "${err}" STREQUAL "" OR NOT "${out}" MATCHES "\ntotal [^\n]*1536 transfers")
    set(failures "${failures}`${shown}`: expected a run with 1536 transfers, got exit ${rc}, stderr [${err}], stdout [${out}]\n"
        PARENT_SCOPE)
  endif()
endfunction()

set(tail "this op alone needs about 512: coarsen the workload (a smaller mesh, fewer axes per collective, fewer ops) or raise the limit")
# Where an option keeps the run whole and the exact reductions would fit, the
# line says so.
set(reduced "without it, the exact reductions would simulate about 192 transfers")
# One transfer over the bound: refused. At the bound: runs.
expect_error("meshsim: error: ${workload}:/ops/0: the run would need about 1536 hop transfers and 154 KiB of memory, more than the limit of 1535 transfers (--max-transfers); --no-reduce simulates every task (${reduced}); ${tail}"
             --no-reduce --max-transfers 1535)
expect_success(--no-reduce --max-transfers 1536)
foreach(option --critical-path "--trace;trace_not_written.json")
  list(GET option 0 name)
  expect_error("meshsim: error: ${workload}:/ops/0: the run would need about 1536 hop transfers and 154 KiB of memory, more than the limit of 1535 transfers (--max-transfers); ${name} simulates every task (${reduced}); ${tail}"
               ${option} --max-transfers 1535)
endforeach()
expect_error("meshsim: error: ${workload}:/ops/0: the run would need about 1536 hop transfers and 154 KiB of memory, more than the limit of 1535 transfers (--max-transfers); SimGrid (--engine) runs every task (${reduced}); ${tail}"
             --engine simgrid --max-transfers 1535)
# One byte over the memory bound: refused. At the bound: runs. Units are accepted.
expect_error("meshsim: error: ${workload}:/ops/0: the run would need about 1536 hop transfers and 154 KiB of memory, more than the limit of 154 KiB (--max-memory); --no-reduce simulates every task (${reduced}); ${tail}"
             --no-reduce --max-memory 157823)
expect_success(--no-reduce --max-memory 157824)
# Where the reduced run would not fit either, nothing about the option.
expect_error("meshsim: error: ${workload}:/ops/0: the run would need about 1536 hop transfers and 154 KiB of memory, more than the limit of 2 KiB (--max-memory); ${tail}"
             --no-reduce --max-memory 2KiB)
expect_success(--no-reduce --max-memory 1GiB --max-transfers 67108864)
# By default the limits count the one group that is built: 192 transfers (64
# for the largest op) and 19.3 KiB.
set(tail "this op alone needs about 64: coarsen the workload (a smaller mesh, fewer axes per collective, fewer ops) or raise the limit")
expect_error("meshsim: error: ${workload}:/ops/0: the run would need about 192 hop transfers (simulating one of its 8 identical independent groups) and 19.3 KiB of memory, more than the limit of 191 transfers (--max-transfers); ${tail}"
             --max-transfers 191)
expect_success(--max-transfers 192)
# Out-of-range and malformed bounds are usage errors.
expect_error("meshsim: error: --max-transfers: Value 0 not in range 1 to 134217728 (see meshsim --help)" --max-transfers 0)
expect_error("meshsim: error: --max-transfers: Value 134217729 not in range 1 to 134217728 (see meshsim --help)"
             --max-transfers 134217729)
expect_error("meshsim: error: --max-memory: Value 0 not in range 1 to 18446744073709551615 (see meshsim --help)"
             --max-memory 0)

# `meshsim validate` checks and builds what run does: one of 12,500 identical
# in-node groups (115 M transfers in all, over the largest limit), counting the
# whole program's tasks; it used to refuse this workload, which run simulates.
set(groups bench/cases/allreduce_in_node_h100_100k.json)
execute_process(COMMAND "${MESHSIM}" validate ${groups} WORKING_DIRECTORY "${SOURCE_DIR}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT "${rc}" STREQUAL "0" OR NOT "${err}" STREQUAL "" OR
   NOT "${out}" STREQUAL "${groups}: valid: 1 ops, 100000 chips, 115400000 tasks\n")
  string(APPEND failures "`meshsim validate ${groups}`: expected valid with 115400000 tasks, got exit ${rc}, stdout [${out}], stderr [${err}]\n")
endif()

if(NOT "${failures}" STREQUAL "")
  message(FATAL_ERROR "limits.cmake: ${MESHSIM}\n${failures}")
endif()
