# `meshsim run --verify` on training steps (verify/training_verifier.hpp): a small
# pipelined, tensor- and sequence-parallel step passes with one PASS row per
# checked quantity; a layer too big to execute in double precision is refused
# before simulating, with one error line.
#
#   cmake -DMESHSIM=<binary> -DSOURCE_DIR=<project root> -P tests/cli/verify_training.cmake
cmake_minimum_required(VERSION 3.25)
foreach(var MESHSIM SOURCE_DIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "verify_training.cmake: -D${var}=... is required")
  endif()
endforeach()
set(failures "")

set(small tests/verify/training_small.json)
execute_process(COMMAND "${MESHSIM}" run ${small} --verify WORKING_DIRECTORY "${SOURCE_DIR}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
if(NOT "${rc}" STREQUAL "0" OR NOT "${err}" STREQUAL "")
  string(APPEND failures "`meshsim run ${small} --verify`: expected exit 0 and no stderr, got ${rc} [${err}]\n")
endif()
set(rows "")
foreach(layer L0 L1)
  foreach(quantity "output \\(forward\\)" "input gradient" "grad Wqkv" "grad Wo" "grad Wgate" "grad Wup" "grad Wdown"
                   "grad g_ln1" "grad g_ln2")
    if(NOT "${out}" MATCHES "\n  ${layer} ${quantity} +PASS +max rel error [0-9.]+e-[0-9]+\n")
      string(APPEND failures "`meshsim run ${small} --verify`: no PASS row for ${layer} ${quantity}\n")
    endif()
  endforeach()
endforeach()
foreach(expected "\nverification of the training step's layers on small random data"
                 "\n  not executed: [0-9]+ ops: the embedding, the head and the loss" "\nverification passed\n$")
  if(NOT "${out}" MATCHES "${expected}")
    string(APPEND failures "`meshsim run ${small} --verify`: the output lacks [${expected}]\n")
  endif()
endforeach()
if(NOT "${failures}" STREQUAL "")
  string(APPEND failures "it printed:\n${out}\n")
endif()

set(big tests/verify/training_too_big.json)
set(expected "meshsim: error: ${big}:/training: --verify would hold about 541.1 million values in double precision (every chip's shards of 2 layers and the unsharded reference), more than 16.0 million: shrink d_model, ffn, seq_len, heads, layers, the microbatch or the mesh\n")
execute_process(COMMAND "${MESHSIM}" run ${big} --verify WORKING_DIRECTORY "${SOURCE_DIR}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT "${rc}" STREQUAL "1" OR NOT "${out}" STREQUAL "" OR NOT "${err}" STREQUAL "${expected}")
  string(APPEND failures "`meshsim run ${big} --verify`: expected exit 1, no stdout and\n  [${expected}]\n  got exit ${rc}, stdout [${out}], stderr [${err}]\n")
endif()

if(NOT "${failures}" STREQUAL "")
  message(FATAL_ERROR "verify_training.cmake: ${MESHSIM}\n${failures}")
endif()
