# The hardware commands on a machine with or without a GPU:
# - `replay --dry-run` prints the plan (no GPU needed);
# - `replay` and `calibrate` either work or fail with exactly one line
#   "meshsim: error: replay: ..." (no GPU, no driver, a build without CUDA);
# - `compare` and `run --calibration` on the synthetic fixtures in tests/calibration/;
# - usage errors of the new options give exactly the expected line.
#
#   cmake -DMESHSIM=<binary> -DSOURCE_DIR=<project root> -DWORK_DIR=<scratch> -P tests/cli/hardware.cmake
cmake_minimum_required(VERSION 3.25)
foreach(var MESHSIM SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "hardware.cmake: -D${var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(failures "")
function(report what)
  set(failures "${failures}${what}\n" PARENT_SCOPE)
endfunction()
macro(run_meshsim)
  execute_process(COMMAND "${MESHSIM}" ${ARGN} WORKING_DIRECTORY "${SOURCE_DIR}" RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
  string(REPLACE ";" " " shown "meshsim ${ARGN}")
endmacro()
# expect_output(<text that stdout must contain> <args>...)
macro(expect_output want)
  run_meshsim(${ARGN})
  if(NOT "${rc}" STREQUAL "0")
    report("`${shown}`: expected exit code 0, got '${rc}' (stderr: ${err})")
  else()
    string(FIND "${out}" "${want}" at)
    if(at EQUAL -1)
      report("`${shown}`: stdout lacks [${want}]; it printed:\n${out}")
    endif()
  endif()
endmacro()
# expect_error(<exact stderr line> <args>...)
macro(expect_error want)
  run_meshsim(${ARGN})
  if(NOT "${rc}" STREQUAL "1" OR NOT "${out}" STREQUAL "" OR NOT "${err}" STREQUAL "${want}\n")
    report("`${shown}`: expected exit 1, no stdout, stderr [${want}]; got ${rc}, [${out}], [${err}]")
  endif()
endmacro()

# The plan, without a GPU.
expect_output("comm 0: 2 ranks [0,2] (mesh axes Y)\n" replay examples/mlp_2x2_v5e.json --dry-run)
expect_output("  op 2 mlp.down.all_reduce: replays 0 of 4 ranks; skips all 2 groups" replay examples/mlp_2x2_v5e.json
              --dry-run --gpus 2)
expect_output("rank 255:\n  op 0 mm.matmul: gemm M=4096 N=4096 K=1024 bf16\n" replay examples/matmul_case3_v5e.json
              --dry-run)
expect_error("meshsim: error: replay: --dry-run measures nothing; --out and --trace need a replay"
             replay examples/mlp_2x2_v5e.json --dry-run --out ${WORK_DIR}/m.json)
expect_error("meshsim: error: replay: --gpus only applies with --dry-run (a replay uses the visible GPUs)"
             replay examples/mlp_2x2_v5e.json --gpus 2)
expect_error("meshsim: error: nope.json: cannot open file" replay nope.json --dry-run)
expect_error("meshsim: error: replay: --out 'examples/mlp_2x2_v5e.json' is the workload file; it would be overwritten"
             replay examples/mlp_2x2_v5e.json --out examples/mlp_2x2_v5e.json)
expect_error("meshsim: error: replay: --trace '${WORK_DIR}/m.json' is also the --out output; give them different files"
             replay examples/mlp_2x2_v5e.json --out ${WORK_DIR}/m.json --trace ${WORK_DIR}/m.json)
expect_error("meshsim: error: replay: --trace: expected a file name ending in .json, got 't.pftrace'"
             replay examples/mlp_2x2_v5e.json --trace t.pftrace)
expect_error("meshsim: error: calibrate: --measurements '${WORK_DIR}/c.json' is also the --out output; give them different files"
             calibrate --out ${WORK_DIR}/c.json --measurements ${WORK_DIR}/c.json)

# Replay and calibrate: work on a GPU, else one plain line.
foreach(args "replay;examples/mlp_2x2_v5e.json;--repetitions;1" "calibrate;--out;${WORK_DIR}/cal.json;--quick")
  run_meshsim(${args})
  if(NOT "${rc}" STREQUAL "0")
    list(GET args 0 command)
    if(NOT "${rc}" STREQUAL "1" OR NOT "${out}" STREQUAL "" OR NOT "${err}" MATCHES "^meshsim: error: ${command}: [^\n]+\n$")
      report("`${shown}`: without a GPU expected exit 1 and one line 'meshsim: error: ${command}: ...'; got ${rc}, [${out}], [${err}]")
    endif()
  endif()
endforeach()

# Compare and run --calibration on synthetic fixtures.
set(cal tests/calibration/synthetic_calibration.json)
expect_output("median absolute error, held out (1 rows): before 41.4%, after 11.4%\n"
              compare tests/calibration/synthetic_suite.json --calibration ${cal} --hardware h200-dgx)
expect_output("op 0 mlp.up.matmul (matmul, 2/4 ranks)        replay       12.000        7.033     -41.4%        9.300     -22.5%\n"
              compare tests/calibration/synthetic_replay.json --calibration ${cal})
expect_error("meshsim: error: no GPU preset for 'synthetic test fixture (not measured)' to compare with; give --hardware (h100-dgx, h200-dgx, b200-dgx, gb200-nvl72)"
             compare tests/calibration/synthetic_suite.json)
expect_error("meshsim: error: tests/calibration/synthetic_calibration.json:: missing required field 'kind'"
             compare ${cal})
expect_output("mlp.up.matmul        matmul         -                    -         0.000         9.300         9.300"
              run examples/mlp_2x2_v5e.json --calibration ${cal})
expect_output("hardware  tpu-v5e: ICI 40 GB/s one-way per link (W = 80 GB/s bidirectional), 1.200 us per hop"
              run examples/mlp_2x2_v5e.json --calibration ${cal})
expect_error("meshsim: error: nope.json: cannot open file" run examples/mlp_2x2_v5e.json --calibration nope.json)

file(REMOVE_RECURSE "${WORK_DIR}")
if(NOT "${failures}" STREQUAL "")
  message(FATAL_ERROR "hardware.cmake: ${MESHSIM}\n${failures}")
endif()
