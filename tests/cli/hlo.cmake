# meshsim run on an XLA HLO dump: the fixture simulates with the import's
# summary first; wrong or missing flags are one error line each.
#
#   cmake -DMESHSIM=<binary> -DSOURCE_DIR=<project root> -DWORK_DIR=<scratch> -P tests/cli/hlo.cmake
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
require(hlo.cmake MESHSIM SOURCE_DIR WORK_DIR)
fresh_dir("${WORK_DIR}")

set(tp tests/hlo/tp_block_reduce_scatter.hlo)
execute_process(COMMAND "${MESHSIM}" run ${tp} --hardware tpu-v5e --topology 2x4 --json ${WORK_DIR}/tp.json
                WORKING_DIRECTORY "${SOURCE_DIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
if(NOT rc EQUAL 0)
  report("run ${tp}: exit ${rc}: ${err}")
elseif(NOT out MATCHES "^# ${tp}: lowered 1 matmuls, 0 kernels, 3 collectives, 1 sends; skipped 2 instructions: 2 parameter\n"
       OR NOT out MATCHES "\nreduce-scatter.2 +reduce_scatter +Y ")
  report("run ${tp}: unexpected output:\n${out}")
endif()
expect_error("meshsim: error: ${tp}: an HLO dump needs --hardware PRESET and --topology SHAPE" run ${tp})
expect_error("meshsim: error: --hardware: only for an HLO dump or a Chakra trace; a workload names its hardware and topology itself"
             run examples/allgather_v5e.json --hardware tpu-v5e)
expect_error("meshsim: error: --devices: only for an HLO dump or a Chakra trace; a workload names its hardware and topology itself"
             run examples/allgather_v5e.json --devices 0,1)
expect_error("meshsim: error: --devices: expected each of the 8 chips once (the chip of device 0, 1, ...), got 2 ids"
             run ${tp} --hardware tpu-v5e --topology 2x4 --devices 1,0)
expect_error("meshsim: error: --topology: expected a slice shape such as 4x4 or 4x4x4, got '2y4'"
             run ${tp} --hardware tpu-v5e --topology 2y4)
expect_error("meshsim: error: ${tp}:1: the module runs on 8 devices (1 replicas x 8 partitions); the 4x4 topology has 16 chips"
             run ${tp} --hardware tpu-v5e --topology 4x4)
expect_error("meshsim: error: --verify: an HLO dump has no data to execute"
             run ${tp} --hardware tpu-v5e --topology 2x4 --verify)
expect_error("meshsim: error: tests/hlo/stablehlo.mlir:1: MLIR (StableHLO or MHLO), not HLO text: meshsim reads the compiled module's HLO (jax.jit(f).lower(...).compile().as_text(), or XLA_FLAGS=--xla_dump_to=DIR)"
             run tests/hlo/stablehlo.mlir --hardware tpu-v5e --topology 2x4)
expect_error("meshsim: error: --trip-count: only for an HLO dump"
             run examples/allgather_v5e.json --trip-count 4)
file(REMOVE_RECURSE "${WORK_DIR}")
finish(hlo.cmake)
