# Golden test: `meshsim run EXAMPLE --verify --json` (training steps: without
# --verify) must reproduce the saved
# table (with the verification report) and JSON byte for byte, `meshsim explain
# EXAMPLE` its saved explanation, and two runs must agree (determinism).
# Regenerate after an intended change with scripts/update-golden, then review the diff.
get_filename_component(stem ${EXAMPLE} NAME_WE)
file(MAKE_DIRECTORY ${WORK_DIR})
# Training steps (examples/training_*.json) are far too big for --verify's double-precision layers (it
# refuses them; tests/verify/ has small ones): no --verify.
set(verify --verify)
if(stem MATCHES "^training_")
  set(verify)
endif()
foreach(run 1 2)
  execute_process(COMMAND ${MESHSIM} run ${EXAMPLE} ${verify} --json ${WORK_DIR}/${stem}.${run}.json
                  OUTPUT_FILE ${WORK_DIR}/${stem}.${run}.txt ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "meshsim run ${EXAMPLE} --verify failed (${rc}): ${err}")
  endif()
  execute_process(COMMAND ${MESHSIM} explain ${EXAMPLE} OUTPUT_FILE ${WORK_DIR}/${stem}.${run}.explain.txt
                  ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "meshsim explain ${EXAMPLE} failed (${rc}): ${err}")
  endif()
endforeach()
foreach(ext txt json explain.txt)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK_DIR}/${stem}.1.${ext} ${WORK_DIR}/${stem}.2.${ext}
                  RESULT_VARIABLE same)
  if(NOT same EQUAL 0)
    message(FATAL_ERROR "two runs of ${EXAMPLE} differ (${ext}): not deterministic")
  endif()
  if(NOT EXISTS ${GOLDEN_DIR}/${stem}.${ext})
    message(FATAL_ERROR "no golden file ${GOLDEN_DIR}/${stem}.${ext}; run scripts/update-golden")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${GOLDEN_DIR}/${stem}.${ext} ${WORK_DIR}/${stem}.1.${ext}
                  RESULT_VARIABLE same)
  if(NOT same EQUAL 0)
    file(READ ${GOLDEN_DIR}/${stem}.${ext} want)
    file(READ ${WORK_DIR}/${stem}.1.${ext} got)
    message(FATAL_ERROR "${EXAMPLE}: output differs from ${GOLDEN_DIR}/${stem}.${ext}\n--- expected\n${want}\n--- got\n${got}")
  endif()
endforeach()
