# `mpirun -n 4 meshsim replay` (one GPU per rank) on the fake GPU gives the same
# measurements file as one process driving 4 GPUs; a failure on one rank alone
# skips the op on all of them, as in one process; a failure that ends the session
# keeps what was measured and fails alike; no GPU anywhere is one line;
# calibrate refuses to run under mpirun.
#
#   cmake -DMESHSIM=<binary> -DMPIEXEC=<mpirun> -DFAKE_GPU=<module> -DSOURCE_DIR=<root> -DWORK_DIR=<scratch>
#         -P tests/cli/replay_mpi.cmake
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
require(replay_mpi.cmake MESHSIM MPIEXEC FAKE_GPU SOURCE_DIR WORK_DIR)
fresh_dir("${WORK_DIR}")
set(ENV{MESHSIM_CUDA_BACKEND} "${FAKE_GPU}")
set(workload examples/mlp_2x2_v5e.json)

# replay(<name> <fake GPUs per process> <ranks: 0 = no mpirun>): out_<name>, err_<name>, rc_<name>
function(replay name gpus ranks)
  set(ENV{MESHSIM_FAKE_GPUS} ${gpus})
  set(command "${MESHSIM}" replay ${workload} --out "${WORK_DIR}/${name}.json")
  if(ranks GREATER 0)
    set(command "${MPIEXEC}" --allow-run-as-root --oversubscribe -n ${ranks} ${command})
  endif()
  execute_process(COMMAND ${command} WORKING_DIRECTORY "${SOURCE_DIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err TIMEOUT 120)
  set(out_${name} "${out}" PARENT_SCOPE)
  set(err_${name} "${err}" PARENT_SCOPE)
  set(rc_${name} "${rc}" PARENT_SCOPE)
endfunction()

# same_measurements(<one process> <mpirun> <what>): the two files are equal.
function(same_measurements one ranks what)
  file(READ "${WORK_DIR}/${one}.json" a)
  file(READ "${WORK_DIR}/${ranks}.json" b)
  if(NOT a STREQUAL b)
    report("${what}: mpirun wrote other measurements than one process:\n${a}\n${b}")
  endif()
endfunction()

replay(one 4 0)
replay(ranks 1 4)
if(NOT rc_one STREQUAL "0" OR NOT rc_ranks STREQUAL "0")
  report("replays failed: one process ${rc_one} [${err_one}], mpirun ${rc_ranks} [${err_ranks}]")
else()
  same_measurements(one ranks "mpirun -n 4 against one process with 4 GPUs")
  if(NOT out_ranks MATCHES "one per MPI rank \\(4 ranks\\)" OR NOT out_ranks MATCHES "all_reduce\\): [0-9.]+ \\[[0-9., ]+\\] on 4 of 4 ranks \\(NCCL: RING LL128\\)\n")
    report("mpirun -n 4: expected every op on 4 of 4 ranks, one per MPI rank:\n${out_ranks}")
  endif()
endif()

set(ENV{MESHSIM_FAKE_FAIL_GEMM_ON} 2)
replay(fail_one 4 0)
replay(fail_ranks 1 4)
unset(ENV{MESHSIM_FAKE_FAIL_GEMM_ON})
set(want "skipped: op 0 mlp.up.matmul: everything: fake GPU 2: GEMM failure (MESHSIM_FAKE_FAIL_GEMM_ON)\n")
foreach(name fail_one fail_ranks)
  string(FIND "${out_${name}}" "${want}" at)
  if(NOT rc_${name} STREQUAL "0" OR at EQUAL -1)
    report("${name}: a GEMM failing on device 2 only: expected exit 0 and [${want}]; got ${rc_${name}}, [${out_${name}}], [${err_${name}}]")
  endif()
endforeach()
same_measurements(fail_one fail_ranks "a GEMM failing on rank 2")

# A failure that ends the session (a broken NCCL, say) at the first collective:
# both stop there, keep the ops measured before it, and fail with one line.
set(ENV{MESHSIM_FAKE_FATAL_ON_COLLECTIVE} 1)
replay(fatal_one 4 0)
replay(fatal_ranks 1 4)
unset(ENV{MESHSIM_FAKE_FATAL_ON_COLLECTIVE})
foreach(name fatal_one fatal_ranks)
  string(REGEX MATCHALL "meshsim: error: [^\n]*\n" lines "${err_${name}}")
  if(rc_${name} STREQUAL "0" OR NOT out_${name} MATCHES "mlp.down.matmul \\(matmul\\): [0-9.]+ "
     OR NOT out_${name} MATCHES "skipped: op 2 mlp.down.all_reduce: everything: a GPU failure ended the replay here: fake NCCL"
     OR NOT lines STREQUAL "meshsim: error: replay: a GPU failure ended the replay early (see 'skipped:' above); the ops measured before it are in ${WORK_DIR}/${name}.json\n")
    report("${name}: a fatal failure at the first collective: expected the matmuls measured, the all-reduce skipped and one error line; got ${rc_${name}}, [${out_${name}}], [${err_${name}}]")
  endif()
endforeach()
same_measurements(fatal_one fatal_ranks "a fatal failure")

# A rank that fails while NCCL sets up a communicator leaves the others waiting
# inside ncclCommInitRank: their watchdog ends them after MESHSIM_NCCL_INIT_TIMEOUT_S
# with one line each, and mpirun ends the job; no hang.
set(ENV{MESHSIM_FAKE_NCCL_INIT_FAILS_ON} 2)
set(ENV{MESHSIM_NCCL_INIT_TIMEOUT_S} 2)
replay(init_hang 1 4)
unset(ENV{MESHSIM_FAKE_NCCL_INIT_FAILS_ON})
unset(ENV{MESHSIM_NCCL_INIT_TIMEOUT_S})
if(rc_init_hang STREQUAL "0" OR NOT err_init_hang MATCHES
   "meshsim: error: replay: rank 0: ncclCommInitRank did not return within 2 s \\(MESHSIM_NCCL_INIT_TIMEOUT_S\\): another rank may have failed while NCCL set up the communicator\n")
  report("a rank failing in ncclCommInitRank: expected the others ended by their watchdog; got ${rc_init_hang}, [${out_init_hang}], [${err_init_hang}]")
endif()
# A limit that is not whole seconds: rank 0 says so in one line, before any GPU work.
set(ENV{MESHSIM_NCCL_INIT_TIMEOUT_S} soon)
replay(bad_limit 1 4)
unset(ENV{MESHSIM_NCCL_INIT_TIMEOUT_S})
string(REGEX MATCHALL "meshsim: error: [^\n]*\n" lines "${err_bad_limit}")
if(rc_bad_limit STREQUAL "0" OR NOT out_bad_limit STREQUAL "" OR NOT lines STREQUAL
   "meshsim: error: replay: rank 0: MESHSIM_NCCL_INIT_TIMEOUT_S: expected whole seconds from 1 to 86400, got 'soon'\n")
  report("MESHSIM_NCCL_INIT_TIMEOUT_S=soon: got ${rc_bad_limit}, [${out_bad_limit}], [${err_bad_limit}]")
endif()

replay(none 0 4)
string(REGEX MATCHALL "meshsim: error: [^\n]*\n" lines "${err_none}")
list(LENGTH lines count)
if(rc_none STREQUAL "0" OR NOT count EQUAL 1 OR NOT lines STREQUAL "meshsim: error: replay: rank 0: no GPU is visible\n"
   OR NOT out_none STREQUAL "")
  report("no GPU on any rank: expected a failure and one line from rank 0; got ${rc_none}, [${out_none}], [${err_none}]")
endif()

# calibrate is one process: under mpirun it refuses, in one line.
execute_process(COMMAND "${MPIEXEC}" --allow-run-as-root --oversubscribe -n 2 "${MESHSIM}" calibrate --out
                        "${WORK_DIR}/cal.json" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
string(REGEX MATCHALL "meshsim: error: [^\n]*\n" lines "${err}")
if(rc STREQUAL "0" OR NOT lines STREQUAL "meshsim: error: calibrate: runs in one process on the GPUs it sees (one node); start it without mpirun\n")
  report("mpirun meshsim calibrate: expected one refusal from rank 0; got ${rc}, [${out}], [${err}]")
endif()

file(REMOVE_RECURSE "${WORK_DIR}")
finish(replay_mpi.cmake)
