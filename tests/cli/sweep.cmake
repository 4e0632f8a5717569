# Usage errors of `meshsim sweep` and `meshsim validate`: exit 1, nothing on
# stdout, exactly the expected stderr line.
#
#   cmake -DMESHSIM=<binary> -DSOURCE_DIR=<project root> -DWORK_DIR=<scratch folder> -P tests/cli/sweep.cmake
cmake_minimum_required(VERSION 3.25)

foreach(var MESHSIM SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "sweep.cmake: -D${var}=... is required")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
file(COPY_FILE "${SOURCE_DIR}/examples/allgather_ring4_v5e.json" "${WORK_DIR}/arrays.json")
file(COPY_FILE "${SOURCE_DIR}/tests/verify/training_small.json" "${WORK_DIR}/training.json")
file(COPY_FILE "${SOURCE_DIR}/tests/sweep/tpu_two_ops.json" "${WORK_DIR}/w.json")
file(WRITE "${WORK_DIR}/bad.csv" "bytes,time_us\n1024,abc\n")
set(failures "")

function(expect_error expected)
  execute_process(COMMAND "${MESHSIM}" ${ARGN} WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err TIMEOUT 60)
  string(REPLACE ";" " " shown "meshsim ${ARGN}")
  if(NOT "${rc}" STREQUAL "1" OR NOT "${out}" STREQUAL "" OR NOT "${err}" STREQUAL "${expected}\n")
    set(failures "${failures}`${shown}`: expected exit 1, no stdout and\n  [${expected}]\n  got exit '${rc}', stdout [${out}], stderr\n  [${err}]\n" PARENT_SCOPE)
  endif()
endfunction()

set(op --op all_gather --preset tpu-v5e --mesh 16)
set(bytes_usage "expected FROM[:TO[:FACTOR]] with sizes such as 1024, 64K, 1M, 1G (K = 1024) from 1 to 2^62, FROM <= TO and an integer FACTOR >= 2")
expect_error("meshsim: error: sweep: give a WORKLOAD file or a collective with --op" sweep)
expect_error("meshsim: error: --op: expected all_gather, all_reduce, reduce_scatter or all_to_all, got 'foo'" sweep --op foo)
expect_error("meshsim: error: --op: needs --preset (the hardware), e.g. --preset tpu-v5e" sweep --op all_gather)
expect_error("meshsim: error: --op: needs --bytes, e.g. --bytes 1K:1G" sweep ${op})
foreach(bad 1K:1x 2K:1K 1K:2K:1 0 1K:2K:3:4 1Q -5 8G:4:2)
  expect_error("meshsim: error: --bytes: ${bytes_usage}, got '${bad}'" sweep ${op} --bytes ${bad})
endforeach()
foreach(bad 16x0 2x2x2x2 x4 4096x4097 a)
  expect_error("meshsim: error: --mesh: expected mesh axis sizes such as 16 or 8x16 (each 1 to 4096, at most 3 axes), got '${bad}'"
               sweep --op all_gather --preset tpu-v5e --mesh ${bad} --bytes 1K)
endforeach()
expect_error("meshsim: error: sweep:/ops/0/axes/0: unknown mesh axis 'Q' (mesh axes: X) (sweep point 0: preset=tpu-v5e mesh=16 bytes=1024)"
             sweep ${op} --axes Q --bytes 1K)
expect_error("meshsim: error: --bytes: arrays.json has no op with a \"bytes\" key to set (ops with \"array\" take their size from the array)"
             sweep arrays.json --bytes 1K)
expect_error("meshsim: error: --mesh: '16' gives 1 size but the mesh of w.json has 2 axes" sweep w.json --mesh 16)
# A point the parser refuses: the same line as `meshsim run` on it, with the point named.
expect_error("meshsim: error: w.json:/ops/0/algorithm: unknown torus schedule 'ring' (known: balanced, equal) (sweep point 0: algorithm=ring)"
             sweep w.json --algorithm ring)
expect_error("meshsim: error: w.json:/hardware/preset: unknown preset 'tpu-v9' (known: tpu-v4, tpu-v5e, tpu-v5p, tpu-v6e, a100-dgx, h100-dgx, h200-dgx, b200-dgx, gb200-nvl72) (sweep point 1: preset=tpu-v9)"
             sweep w.json --preset tpu-v5e,tpu-v9)
expect_error("meshsim: error: --algorithm: expected ring, tree, nvls, nvls_tree, hierarchical, direct, auto (GPU) or balanced, equal (TPU torus schedules), got 'fastest'"
             sweep w.json --algorithm fastest)
expect_error("meshsim: error: --measured: needs --plot PREFIX" sweep w.json --measured bad.csv)
expect_error("meshsim: error: --plot: needs a sweep over bytes (--bytes FROM:TO) of at least one collective or send"
             sweep w.json -q --plot p)
# A training step (it crashed the sweep once: no "ops" to read).
expect_error("meshsim: error: training.json: sweep varies ops' bytes, meshes, presets and GPU algorithms; a training step has no ops to vary (run meshsim run on each variant of it)"
             sweep training.json --preset tpu-v5e)
expect_error("meshsim: error: --op and --axes describe a collective instead of a WORKLOAD file; give one or the other"
             sweep w.json --op all_gather)
expect_error("meshsim: error: --csv: './w.json' is the workload file; it would be overwritten" sweep w.json --csv ./w.json)
expect_error("meshsim: error: --json: 'o' is also the --csv output; give them different files" sweep w.json --csv o --json o)
expect_error("meshsim: error: --json: only one of --csv and --json can go to stdout ('-')" sweep w.json --csv - --json -)
expect_error("meshsim: error: nonexistent.csv: cannot open file" sweep w.json --bytes 1K:4K --plot p --measured nonexistent.csv)
expect_error("meshsim: error: bad.csv:2: expected 'bytes,time_us' (an integer > 0 and a time in microseconds > 0), got '1024,abc'"
             sweep w.json --bytes 1K:4K --plot p --measured bad.csv)
# At most 10000 points: 11 sizes x 1001 presets (with the one in ${op}) is refused before anything runs.
string(REPEAT "tpu-v5e," 999 presets)
expect_error("meshsim: error: sweep: 11011 points; meshsim sweeps at most 10000 at once"
             sweep ${op} --bytes 1:1024 --preset ${presets}tpu-v5e)

# validate: a missing file, and a valid file says so on stdout.
expect_error("meshsim: error: nonexistent.json: cannot open file" validate nonexistent.json)
execute_process(COMMAND "${MESHSIM}" validate w.json WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err TIMEOUT 60)
if(NOT "${rc}" STREQUAL "0" OR NOT "${out}" STREQUAL "w.json: valid: 2 ops, 16 chips, 400 tasks\n" OR NOT "${err}" STREQUAL "")
  string(APPEND failures "`meshsim validate w.json`: expected exit 0 and 'w.json: valid: ...', got exit ${rc}, [${out}] [${err}]\n")
endif()
# Without gnuplot on PATH, --plot says what to install (and the CSV is still written).
execute_process(COMMAND ${CMAKE_COMMAND} -E env PATH=/nonexistent "${MESHSIM}" sweep w.json -q --bytes 1K:4K --plot p
                WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT "${rc}" STREQUAL "1" OR NOT "${err}" STREQUAL "meshsim: error: --plot: gnuplot is not installed (Debian package gnuplot-nox; scripts/install-deps installs it)\n")
  string(APPEND failures "--plot without gnuplot: got exit ${rc}, stderr [${err}]\n")
endif()

if(NOT "${failures}" STREQUAL "")
  message(FATAL_ERROR "sweep usage errors:\n${failures}")
endif()
