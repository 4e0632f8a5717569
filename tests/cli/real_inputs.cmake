# Every public third-party input of ../shared/real (nccl-tests logs, XLA HLO
# modules, Chakra traces; none of them is committed here) runs with an answer,
# or is refused in one line for the reason given here. Skipped when the folder
# is absent (a clean clone on another machine).
#
#   cmake -DMESHSIM=<binary> -DSOURCE_DIR=<project root> [-DREAL_DIR=<folder>] -P tests/cli/real_inputs.cmake
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
require(real_inputs.cmake MESHSIM SOURCE_DIR)
if(NOT DEFINED REAL_DIR OR "${REAL_DIR}" STREQUAL "")
  get_filename_component(REAL_DIR "${SOURCE_DIR}/../shared/real" ABSOLUTE)
endif()
if(NOT EXISTS "${REAL_DIR}/README.md")
  message("real inputs: skipped (no ${REAL_DIR})")
  return()
endif()

# ok(<what> <args>...): exit 0, and a result on stdout.
function(ok what)
  execute_process(COMMAND "${MESHSIM}" ${ARGN} WORKING_DIRECTORY "${REAL_DIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err TIMEOUT 300)
  if(NOT rc EQUAL 0 OR out STREQUAL "")
    report("${what}: expected a result, got exit ${rc}: ${err}")
  endif()
endfunction()
# refused(<what> <reason> <args>...): exit 1, nothing on stdout, one line naming the reason.
function(refused what reason)
  execute_process(COMMAND "${MESHSIM}" ${ARGN} WORKING_DIRECTORY "${REAL_DIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err TIMEOUT 300)
  string(FIND "${err}" "${reason}" at)
  string(REGEX MATCHALL "\n" lines "${err}")
  list(LENGTH lines n)
  if(NOT rc EQUAL 1 OR NOT out STREQUAL "" OR at EQUAL -1 OR NOT n EQUAL 1 OR NOT err MATCHES "^meshsim: error: ")
    report("${what}: expected one error line with '${reason}', got exit ${rc}:\n${err}${out}")
  endif()
endfunction()

# nccl-tests logs: compared with the presets.
set(N nccl-tests)
foreach(log aws_p5_h100x16_2nodes_nccl2.20.3_tuner_all_reduce_RAW_debug.log
            aws_p5_h100x16_2nodes_nccl2.20.3_tuner_all_reduce_clean.log
            aws_p5_h100x16_2nodes_nccl2.22.3_all_reduce_RAW_debug.log aws_p5_h100x16_2nodes_nccl2.22.3_all_reduce_clean.log
            xxrjun_h100x16_2nodes_nccl2.28.7_alltoall_sendrecv.log xxrjun_h100x8_1node_nccl2.29.2_5tests.log
            together_h100x8_1node_nccl2.26.2_all_gather_ring.out together_h100x8_1node_nccl2.26.2_all_reduce_nvls.out
            together_h100x8_1node_nccl2.26.2_all_reduce_ring.out together_h100x8_1node_nccl2.26.2_reduce_scatter_ring.out)
  ok(${log} compare ${N}/${log} --hardware h100-dgx)
endforeach()
foreach(log oci_a100x16_2nodes_roce_all_reduce_excerpt.log oci_a100x8_1node_all_reduce_excerpt.log)
  ok(${log} compare ${N}/${log} --hardware a100-dgx)
endforeach()
refused("4 of a node's 8 GPUs" "meshsim models whole nodes of 8 GPUs"
        compare ${N}/xxrjun_h100x4_of_8_1node_nccl2.29.2_5tests.log --hardware h100-dgx)
refused("two jobs' output interleaved" "rank 0 again after rank 7"
        compare ${N}/together_h100x8_TWO_interleaved_1node_jobs_nccl2.26.2_all_reduce_ring.out --hardware h100-dgx)
refused("a table of peak bus bandwidths, not measured points" "unknown column 'collective'"
        compare ${N}/together_b200_peak_busbw_md1_reference_TRANSCRIBED.csv --hardware b200-dgx)
refused("Ironwood's derived times (no TPU7x preset, not meshsim's columns)" "unknown column 'input_elements'"
        compare tpu/ironwood_tpu7x_all_gather_DERIVED_times.csv)

# HLO modules.
set(H hlo/xla_tests)
foreach(case "e2e_memcpy_p2p_while_cpermute 4" "e2e_pjit_alltoall 4" "e2e_while_allgather 4" "pp_sendrecv_while 4"
             "lhs_tpu_allgather_cpermute_inplace 2x4" "lhs_while_cpermute 2x4" "p2p_rewriter_while_trip_sendrecv 2x4"
             "pipeliner_sendrecv_trip25 2x4" "pipeliner_while_rs_ag_ar 2x4" "parser_iota_allgather 5x6"
             "parser_iota_allreduce 4x5" "parser_iota_alltoall 4x8" "sol_async_reducescatter_iota128 8x16")
  separate_arguments(parts UNIX_COMMAND "${case}")
  list(GET parts 0 name)
  list(GET parts 1 topo)
  ok(${name} run ${H}/${name}.hlo --hardware tpu-v5e --topology ${topo} --trip-count 4 --quiet --json -)
endforeach()
refused("several modules in one file" "a second HloModule in the file"
        run ${H}/import_async_multi_module.hlo --hardware tpu-v5e --topology 2x4)
foreach(name lhs_async_allreduce lhs_async_alltoall_wrapped)
  refused("${name}: a real convolution" "a convolution with a window larger than 1 is not a matmul"
          run ${H}/${name}.hlo --hardware tpu-v5e --topology 2x4)
endforeach()
set(T hlo/torch_xla_graphhelper)
ok(gpt2_tp8 run ${T}/gpt2_tp8.hlo --hardware tpu-v5e --topology 2x4 --quiet --json -)
ok(llama2_dp1_tp4_pp2 run ${T}/llama2_dp1_tp4_pp2.hlo --hardware tpu-v5e --topology 8 --quiet --json -)
ok(llama2_dp1_tp8_pp4 run ${T}/llama2_dp1_tp8_pp4.hlo --hardware tpu-v5e --topology 4x8 --quiet --json -)
set(J hlo/jaxdecomp_a100)
ok(a100x8_1_8 run ${J}/a100x8_1024_1_8_NCCL_float32_FFT.compiled.hlo --hardware a100-dgx --topology 1 --quiet --json -)
refused("pairs of GPUs (issue 50's sub-node groups)" "are not the GPUs of whole nodes"
        run ${J}/a100x8_1024_2_4_NCCL_float32_FFT.compiled.hlo --hardware a100-dgx --topology 1)
refused("quads of GPUs (issue 50's sub-node groups)" "are not the GPUs of whole nodes"
        run ${J}/a100x16_1024_4_4_NCCL_float32_FFT.compiled.hlo --hardware a100-dgx --topology 2)
refused("StableHLO, not HLO text" "MLIR (StableHLO or MHLO), not HLO text"
        run ${J}/a100x8_1024_1_8_NCCL_float32_FFT.lowered_stablehlo.mlir --hardware a100-dgx --topology 1)

# Chakra traces.
set(C chakra)
set(P ${C}/pytorch_2rank_allreduce_4GiB)
ok(pytorch_2rank run ${P}/chakra_trace.0.et --hardware tpu-v5e --topology 2 --comm-groups ${P}/comm_group.3groups.json
   --quiet --json -)
refused("two GPUs of a node (issue 50)" "missing: the topology has 8 chips"
        run ${P}/chakra_trace.0.et --hardware h100-dgx --topology 1 --comm-groups ${P}/comm_group.3groups.json)
refused("a comm-group file without the trace's groups" "its process group '2' is not in the comm-group file"
        run ${P}/chakra_trace.0.et --hardware tpu-v5e --topology 2 --comm-groups ${P}/comm_group.1group_missing_pg1_pg2.json)
refused("rank 0 of a run whose other ranks are absent" "missing: the topology has 8 chips"
        run ${C}/mlcommons_feeder_rank0/chakra.0.et --hardware h100-dgx --topology 1)
foreach(kind all_reduce all_gather reduce_scatter all_to_all)
  ok(${kind} run ${C}/astrasim_microbench_8npus_1MB/${kind}/${kind}.0.et --hardware h100-dgx --topology 1 --quiet
     --json -)
endforeach()
ok(16npus run ${C}/astrasim_microbench_16npus_1MB/all_reduce/all_reduce.0.et --hardware h100-dgx --topology 2 --quiet
   --json -)
ok(msccl_ring run ${C}/astrasim_custom_ring_allreduce_8npus_1MB/custom_allreduce.0.et --hardware h100-dgx --topology 1
   --quiet --json -)
ok(mlp_32 run ${C}/astrasim_tutorial_MLP_ModelParallel_32npus/MLP_ModelParallel.0.et --hardware h100-dgx --topology 4
   --quiet --json -)
ok(t1d run ${C}/torus_T1D_allreduce/trace.0.et --hardware tpu-v5e --topology 8 --comm-groups
   ${C}/torus_T1D_allreduce/comm_group.json --quiet --json -)
ok(t2d run ${C}/torus_T2D_allreduce/trace.0.et --hardware tpu-v5e --topology 4x4 --comm-groups
   ${C}/torus_T2D_allreduce/comm_group.json --quiet --json -)
ok(t3d run ${C}/torus_T3D_allreduce/trace.0.et --hardware tpu-v4 --topology 2x2x2 --comm-groups
   ${C}/torus_T3D_allreduce/comm_group.json --quiet --json -)

finish(real_inputs.cmake)
