# Trace test: `meshsim run EXAMPLE --trace` at every level of detail gives a trace
# that trace_check accepts and that agrees with the run (per-link bytes, total
# time); where a golden trace exists, the hop-level trace equals it byte for byte
# and two runs agree.
get_filename_component(stem ${EXAMPLE} NAME_WE)
file(MAKE_DIRECTORY ${WORK_DIR})
# A training step has millions of hop transfers, the 4x4x8 all-to-all examples
# over half a million and the multislice one 374 thousand: their traces are
# checked at the level of ops, for two chips (what a user looking at them would
# keep; the multislice one took 200 s at every level under the sanitizers).
set(details ops steps hops)
set(keep)
if(stem MATCHES "^training_" OR stem MATCHES "^alltoall_(twisted_)?v4_4x4x8$" OR stem MATCHES "^multislice_")
  set(details ops)
  set(keep --trace-chips 0,1)
endif()
foreach(detail ${details})
  set(trace ${WORK_DIR}/${stem}.${detail}.json)
  execute_process(COMMAND ${MESHSIM} run ${EXAMPLE} -q --links 100000 --json ${WORK_DIR}/${stem}.run.json
                          --trace ${trace} --trace-detail ${detail} ${keep}
                  ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "meshsim run ${EXAMPLE} --trace failed (${rc}): ${err}")
  endif()
  set(args ${trace})
  if(detail STREQUAL "hops")
    list(APPEND args ${WORK_DIR}/${stem}.run.json)
  endif()
  # The same run as Perfetto protobuf, decoded by protoc: the same events.
  set(pb ${WORK_DIR}/${stem}.${detail}.pftrace)
  execute_process(COMMAND ${MESHSIM} run ${EXAMPLE} -q --trace ${pb} --trace-detail ${detail} ${keep} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "meshsim run ${EXAMPLE} --trace ${pb} failed (${rc})")
  endif()
  execute_process(COMMAND ${PROTOC} --decode=perfetto.protos.Trace -I ${PROTO_DIR} ${PROTO_DIR}/perfetto_trace.proto
                  INPUT_FILE ${pb} OUTPUT_FILE ${pb}.txt ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "protoc cannot decode ${pb}: ${err}")
  endif()
  list(APPEND args --proto ${pb}.txt)
  execute_process(COMMAND ${CHECK} ${args} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "trace of ${EXAMPLE} (${detail}) is not valid:\n${err}")
  endif()
endforeach()
if(EXISTS ${GOLDEN_DIR}/${stem}.json)
  execute_process(COMMAND ${MESHSIM} run ${EXAMPLE} -q --trace ${WORK_DIR}/${stem}.again.json RESULT_VARIABLE rc)
  foreach(candidate ${WORK_DIR}/${stem}.hops.json ${WORK_DIR}/${stem}.again.json)
    execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${GOLDEN_DIR}/${stem}.json ${candidate} RESULT_VARIABLE same)
    if(NOT same EQUAL 0)
      message(FATAL_ERROR "${candidate} differs from the golden trace ${GOLDEN_DIR}/${stem}.json (scripts/update-golden)")
    endif()
  endforeach()
endif()
