# The hardware commands on a machine with or without a GPU:
# - `replay --dry-run` prints the plan (no GPU needed);
# - `replay` and `calibrate` either work or fail with exactly one line
#   "meshsim: error: replay: ..." (no GPU, no driver, a build without CUDA);
# - `compare` and `run --calibration` on the synthetic fixtures in tests/calibration/;
# - usage errors of the new options give exactly the expected line;
# - with FAKE_GPU (tests/fake_gpu: synthetic times behind the backend boundary):
#   replay, calibrate and compare end to end, on 1 and 4 GPUs, and an op that
#   does not fit in device memory.
#
#   cmake -DMESHSIM=<binary> -DSOURCE_DIR=<project root> -DWORK_DIR=<scratch> [-DFAKE_GPU=<module>]
#         -P tests/cli/hardware.cmake
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
require(hardware.cmake MESHSIM SOURCE_DIR WORK_DIR)
fresh_dir("${WORK_DIR}")
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

# Real suites of one H200 (scripts/gpu-check, 2026-12-04): calibrate --from refits their
# GEMMs and copies as calibrate fitted them there (no collective: no fabric), and the
# held-out GEMMs, which the fit never sees, stay within 10 %.
set(h200 examples/measurements/suite_h200_1gpu.json)
expect_output("fitted bf16 GEMMs: rms residual 7.01 %, max 17.04 % over 145 points\n"
              calibrate --from ${h200} --out ${WORK_DIR}/h200.json)
expect_output("median absolute error, held out (20 rows): before 35.8%, after 8.3%\n"
              compare ${h200} --calibration ${WORK_DIR}/h200.json)
set(h200 examples/measurements/suite_h200_1gpu_fp16_int8_fp8.json)
expect_output("fitted fp8 GEMMs: rms residual 12.22 %, max 45.46 % over 145 points\n"
              calibrate --from ${h200} --out ${WORK_DIR}/h200low.json)
expect_output("median absolute error, held out (30 rows): before 47.6%, after 7.5%\n"
              compare ${h200} --calibration ${WORK_DIR}/h200low.json)
expect_error("meshsim: error: calibrate: the files hold nothing to fit: no collective, GEMM or HBM copy"
             calibrate --from tests/calibration/empty_suite.json --out ${WORK_DIR}/empty.json)

# Compare and run --calibration on synthetic fixtures.
set(cal tests/calibration/synthetic_calibration.json)
expect_output("median absolute error, held out (1 rows): before 41.4%, after 11.4%\n"
              compare tests/calibration/synthetic_suite.json --calibration ${cal} --hardware h200-dgx)
expect_output("op 0 mlp.up.matmul (matmul, 2/4 ranks)        replay       12.000        7.033     -41.4%        9.300     -22.5%\n"
              compare tests/calibration/synthetic_replay.json --calibration ${cal})
expect_error("meshsim: error: no GPU preset for 'synthetic test fixture (not measured)' to compare with; give --hardware (a100-dgx, h100-dgx, h200-dgx, b200-dgx, gb200-nvl72)"
             compare tests/calibration/synthetic_suite.json)
expect_error("meshsim: error: tests/calibration/synthetic_calibration.json:: missing required field 'kind'"
             compare ${cal})
expect_output("mlp.up.matmul        matmul         -                    -         0.000         9.300         9.300"
              run examples/mlp_2x2_v5e.json --calibration ${cal})
expect_output("hardware  tpu-v5e: ICI 40 GB/s one-way per link (W = 80 GB/s bidirectional), 1.200 us per hop"
              run examples/mlp_2x2_v5e.json --calibration ${cal})
expect_error("meshsim: error: nope.json: cannot open file" run examples/mlp_2x2_v5e.json --calibration nope.json)

if(DEFINED FAKE_GPU AND NOT "${FAKE_GPU}" STREQUAL "")
  set(ENV{MESHSIM_CUDA_BACKEND} "${FAKE_GPU}")
  set(ENV{MESHSIM_FAKE_GPUS} 1)
  # One GPU: the GEMMs and copies of the suite, the collectives said skipped.
  expect_output("skipped: collective sweeps: 1 GPU visible, they need at least 2\nwrote ${WORK_DIR}/cal1.json\n"
                calibrate --quick --dtypes bf16 --out ${WORK_DIR}/cal1.json --measurements ${WORK_DIR}/suite1.json)
  expect_output("(CUDA fake, NCCL fake, cold L2)" compare ${WORK_DIR}/suite1.json --calibration ${WORK_DIR}/cal1.json)
  string(REGEX MATCH "held out \\(10 rows\\): before [0-9.]+%, after ([0-9.]+)%" held "${out}")
  if(NOT held OR CMAKE_MATCH_1 GREATER_EQUAL 10)
    report("fake GPU: held-out GEMMs not within 10 % after calibration: [${held}]")
  endif()
  # fp8 GEMMs (cuBLASLt on a real GPU) fit and make a valid calibration.
  expect_output("measured fp8 GEMMs: 27 grid shapes, 10 held out\n" calibrate --quick --dtypes fp8 --out ${WORK_DIR}/cal8.json)
  expect_output("hardware  tpu-v5e" run examples/mlp_2x2_v5e.json --calibration ${WORK_DIR}/cal8.json)
  # The full grid: 125 powers of two and 20 squares that fill their last wave partly,
  # without which the fit cannot tell the wave term from the smooth one.
  expect_output("measured fp8 GEMMs: 145 grid shapes, 10 held out\n" calibrate --dtypes fp8 --out ${WORK_DIR}/cal8f.json
                --measurements ${WORK_DIR}/suite8f.json)
  expect_output("gemm fp8 M=1664 N=1664 K=2048                    fit "
                compare ${WORK_DIR}/suite8f.json --calibration ${WORK_DIR}/cal8f.json --hardware h100-dgx)
  # A replay on one GPU: rank 0's GEMMs; every collective group needs more GPUs.
  expect_output("  op 0 mlp.up.matmul (matmul): " replay examples/mlp_2x2_v5e.json --warm-l2 --repetitions 3
                --out ${WORK_DIR}/m1.json --trace ${WORK_DIR}/m1.trace.json)
  expect_output("skipped: op 2 mlp.down.all_reduce: all 2 groups" replay examples/mlp_2x2_v5e.json)
  expect_output("(CUDA fake, NCCL fake, warm L2)" compare ${WORK_DIR}/m1.json --calibration ${WORK_DIR}/cal1.json)
  # Four GPUs: every rank and every group of the MLP block, and the collective sweeps.
  set(ENV{MESHSIM_FAKE_GPUS} 4)
  expect_output("  op 2 mlp.down.all_reduce (all_reduce): " replay examples/mlp_2x2_v5e.json --out ${WORK_DIR}/m4.json)
  if(NOT out MATCHES "\\(all_reduce\\): [0-9.]+ \\[[0-9., ]+\\] on 4 of 4 ranks \\(NCCL: RING LL128\\)\n" OR out MATCHES "skipped")
    report("fake GPU x4: expected every op of the MLP replayed, got:\n${out}")
  endif()
  expect_output("measured collectives: " calibrate --quick --dtypes bf16 --out ${WORK_DIR}/cal4.json
                --measurements ${WORK_DIR}/suite4.json)
  # What NCCL (here the fake, which logs as NCCL does) chose, point by point and per op.
  expect_output("\nall_reduce 4 GPUs 1024 B RING/LL " compare ${WORK_DIR}/suite4.json)
  expect_output("\nall_reduce 4 GPUs 1073741824 B RING/SIMPLE " compare ${WORK_DIR}/suite4.json)
  expect_output("\nall_to_all 4 GPUs 1024 B  " compare ${WORK_DIR}/suite4.json)  # send/recv: no algorithm
  expect_output("(all_reduce, 4/4 ranks) RING/LL128 " compare ${WORK_DIR}/m4.json)
  set(ENV{NCCL_PROTO} LL128)
  set(ENV{NCCL_ALGO} Tree)
  expect_output("measured collectives: " calibrate --quick --dtypes bf16 --out ${WORK_DIR}/cal4p.json
                --measurements ${WORK_DIR}/suite4p.json)
  expect_output("\nall_reduce 4 GPUs 1024 B TREE/LL128 " compare ${WORK_DIR}/suite4p.json)
  unset(ENV{NCCL_PROTO})
  unset(ENV{NCCL_ALGO})
  # The user's own NCCL_DEBUG: left alone, so nothing is reported.
  set(ENV{NCCL_DEBUG} WARN)
  expect_output("measured collectives: " calibrate --quick --dtypes bf16 --out ${WORK_DIR}/cal4w.json
                --measurements ${WORK_DIR}/suite4w.json)
  unset(ENV{NCCL_DEBUG})
  file(READ ${WORK_DIR}/suite4w.json suite4w)
  if(suite4w MATCHES "nccl_algorithm")
    report("NCCL_DEBUG=WARN given by the user: expected no NCCL choices recorded")
  endif()
  file(READ ${WORK_DIR}/cal4.json cal4)
  string(JSON links GET "${cal4}" links)
  string(JSON bw GET "${links}" 0 bandwidth_bytes_per_s)
  if(bw LESS 1.3e11 OR bw GREATER 1.7e11)
    report("fake GPU x4: fitted NVLink bandwidth ${bw} B/s, expected about the fake's 150e9")
  endif()
  # calibrate --from on meshsim's own files: a suite of a whole node (8 fake H200s)
  # gives the fabric terms and its GEMM fit; a suite of 4 GPUs, or a replay, is refused.
  set(ENV{MESHSIM_FAKE_GPUS} 8)
  expect_output("measured collectives: " calibrate --quick --dtypes bf16 --out ${WORK_DIR}/cal8g.json
                --measurements ${WORK_DIR}/suite8.json)
  set(ENV{MESHSIM_FAKE_GPUS} 4)
  expect_output("nvlink on h200-dgx: hop latency " calibrate --from ${WORK_DIR}/suite8.json --out ${WORK_DIR}/from8.json)
  file(READ ${WORK_DIR}/from8.json from8)
  if(NOT from8 MATCHES "\"fabric\"" OR NOT from8 MATCHES "\"dtype\": \"bf16\"")
    report("calibrate --from a suite: expected the fabric levels and the bf16 GEMM fit in from8.json:\n${from8}")
  endif()
  expect_error("meshsim: error: ${WORK_DIR}/suite4.json:/collectives/0: 4 ranks; meshsim models whole nodes of 8 GPUs (h200-dgx): measure with all of them"
               calibrate --from ${WORK_DIR}/suite4.json --out ${WORK_DIR}/from4.json)
  expect_error("meshsim: error: ${WORK_DIR}/m4.json: a replay's measurements are op times of a workload: compare them with meshsim compare; calibrate --from reads suites (calibrate --measurements)"
               calibrate --from ${WORK_DIR}/m4.json --out ${WORK_DIR}/from4.json)
  # An op larger than the device's memory is skipped with the reason; the rest runs.
  set(ENV{MESHSIM_FAKE_MEMORY_MB} 16)
  expect_output("skipped: op 0 mm.matmul: everything: cannot allocate" replay examples/matmul_case3_v5e.json)
  unset(ENV{MESHSIM_FAKE_MEMORY_MB})
  # Suite points the GPU refuses are skipped and named; the rest is fitted.
  set(ENV{MESHSIM_FAKE_GPUS} 1)
  set(ENV{MESHSIM_FAKE_FAIL_GEMM_ON} 0)
  expect_output("skipped: bf16 GEMM M=256 N=256 K=256: fake GPU 0: GEMM failure (MESHSIM_FAKE_FAIL_GEMM_ON)\n"
                calibrate --quick --dtypes bf16 --out ${WORK_DIR}/cal_refused.json)
  if(NOT out MATCHES "measured bf16 GEMMs: 0 grid shapes, 0 held out\nmeasured HBM copies: 10 sizes")
    report("calibrate with every GEMM refused: expected the copies measured and no GEMM; got:\n${out}")
  endif()
  unset(ENV{MESHSIM_FAKE_FAIL_GEMM_ON})
  # A failure that ends the GPU session (a broken NCCL) in the collective sweeps:
  # what was measured before it is written and fitted, and calibrate fails in one line.
  set(ENV{MESHSIM_FAKE_GPUS} 2)
  set(ENV{MESHSIM_FAKE_FATAL_ON_COLLECTIVE} 3)
  run_meshsim(calibrate --quick --dtypes bf16 --out ${WORK_DIR}/cal_fatal.json --measurements ${WORK_DIR}/suite_fatal.json)
  unset(ENV{MESHSIM_FAKE_FATAL_ON_COLLECTIVE})
  if(NOT rc STREQUAL "1"
     OR NOT err STREQUAL "meshsim: error: calibrate: a GPU failure ended the suite early (see 'skipped:' above); the 49 points measured before it are fitted into ${WORK_DIR}/cal_fatal.json\n"
     OR NOT out MATCHES "\nskipped: all_gather of 16384 bytes over 2 GPUs and everything after it: fake NCCL: unhandled system error \\(MESHSIM_FAKE_FATAL_ON_COLLECTIVE\\)\n"
     OR NOT EXISTS ${WORK_DIR}/suite_fatal.json)
    report("calibrate stopped by a fatal failure: got ${rc}, [${out}], [${err}]")
  else()
    expect_output("gemm bf16 M=3072 N=3072 K=3072" compare ${WORK_DIR}/suite_fatal.json --calibration ${WORK_DIR}/cal_fatal.json)
  endif()
  # A GPU workload on 8 GPUs: compare names what NCCL ran and what meshsim runs.
  set(ENV{MESHSIM_FAKE_GPUS} 8)
  expect_output("  op 2 out_proj.all_reduce (all_reduce): " replay examples/gpu_h200_llama70b_tp8_gemms.json
                --out ${WORK_DIR}/m8.json)
  expect_output("op 2 out_proj.all_reduce (all_reduce, 8/8 ranks) RING/SIMPLE meshsim nvls/simple "
                compare ${WORK_DIR}/m8.json)
  # A gate that gives up (a launch waited for the GPU behind it): from that op on
  # the times include the host's launch time, and every output says so.
  set(ENV{MESHSIM_FAKE_GPUS} 4)
  set(ENV{MESHSIM_FAKE_GATE_GIVES_UP_ON} 2)
  run_meshsim(replay examples/mlp_2x2_v5e.json --out ${WORK_DIR}/ungated.json)
  if(NOT rc STREQUAL "0"
     OR NOT out MATCHES "\n  op 0 mlp.up.matmul \\(matmul\\): [0-9.]+ \\[[0-9.]+, [0-9.]+\\] on 4 of 4 ranks\n"
     OR NOT out MATCHES "\n  op 1 mlp.down.matmul \\(matmul\\): [^\n]* on 4 of 4 ranks \\(ungated: the host's launch time included\\)\n"
     OR NOT out MATCHES "\n  op 2 mlp.down.all_reduce [^\n]*\\(NCCL: RING LL128\\) \\(ungated: the host's launch time included\\)\n")
    report("replay with a gate giving up at op 1: got ${rc}, [${out}], [${err}]")
  else()
    file(READ ${WORK_DIR}/ungated.json ungated_json)
    string(REGEX MATCHALL "\"ungated\": true" marks "${ungated_json}")
    list(LENGTH marks n_marks)
    if(NOT n_marks EQUAL 2)
      report("replay with a gate giving up at op 1: expected 2 ops marked ungated in the file, got ${n_marks}")
    endif()
    expect_output("ungated: 2 rows were timed after a gate gave up: their times include the host's launch time\n"
                  compare ${WORK_DIR}/ungated.json)
  endif()
  set(ENV{MESHSIM_FAKE_GPUS} 2)
  set(ENV{MESHSIM_FAKE_GATE_GIVES_UP_ON} 50)
  expect_output("measured 42 points without the gate (it gave up): their times include the host's launch time\n"
                calibrate --quick --dtypes bf16 --out ${WORK_DIR}/cal_ungated.json)
  set(ENV{MESHSIM_FAKE_GPUS} 1)  # no collective sweeps (37 GEMMs, 10 copies): the count still comes
  set(ENV{MESHSIM_FAKE_GATE_GIVES_UP_ON} 25)
  expect_output("measured 23 points without the gate (it gave up): their times include the host's launch time\n"
                calibrate --quick --dtypes bf16 --out ${WORK_DIR}/cal_ungated1.json)
  unset(ENV{MESHSIM_FAKE_GATE_GIVES_UP_ON})
  set(ENV{MESHSIM_NCCL_INIT_TIMEOUT_S} 0)
  expect_error("meshsim: error: replay: MESHSIM_NCCL_INIT_TIMEOUT_S: expected whole seconds from 1 to 86400, got '0'"
               replay examples/mlp_2x2_v5e.json)
  unset(ENV{MESHSIM_NCCL_INIT_TIMEOUT_S})
  # A fake GPU that is not there: the probe's one line.
  set(ENV{MESHSIM_FAKE_GPUS} 0)
  expect_error("meshsim: error: replay: no GPU is visible" replay examples/mlp_2x2_v5e.json)
  unset(ENV{MESHSIM_FAKE_GPUS})
  unset(ENV{MESHSIM_CUDA_BACKEND})
endif()

file(REMOVE_RECURSE "${WORK_DIR}")
finish("hardware.cmake: ${MESHSIM}")
