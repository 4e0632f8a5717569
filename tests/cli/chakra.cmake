# meshsim chakra and meshsim run on a Chakra trace: a bundled example written as
# a trace and run again gives the example's own total, to the nanosecond; wrong
# or missing flags are one error line each.
#
#   cmake -DMESHSIM=<binary> -DSOURCE_DIR=<project root> -DWORK_DIR=<scratch> -P tests/cli/chakra.cmake
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
require(chakra.cmake MESHSIM SOURCE_DIR WORK_DIR)
fresh_dir("${WORK_DIR}")

# The op table and the total line of a run's output.
function(total_of out var)
  string(FIND "${out}" "\nop " begin)
  string(REGEX MATCH "\ntotal [0-9.]+ us; [0-9]+ transfers, [0-9]+ bytes over links" line "${out}")
  string(FIND "${out}" "${line}" end)
  if(begin EQUAL -1 OR end EQUAL -1 OR "${line}" STREQUAL "")
    set(${var} "" PARENT_SCOPE)
    return()
  endif()
  math(EXPR length "${end} - ${begin}")
  string(SUBSTRING "${out}" ${begin} ${length} table)
  set(${var} "${table}${line}" PARENT_SCOPE)
endfunction()

set(example examples/collectives_v5e_16x16.json)  # (the default wraparound of its shape, as an import has)
set(t ${WORK_DIR}/t)
execute_process(COMMAND "${MESHSIM}" chakra ${example} ${t} --gzip WORKING_DIRECTORY "${SOURCE_DIR}" RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT rc EQUAL 0 OR NOT out MATCHES "^${example}: [0-9]+ ops as [0-9]+ nodes on [0-9]+ ranks \\(${t}.0.et.gz to ")
  report("chakra ${example}: exit ${rc}: ${out}${err}")
endif()
execute_process(COMMAND "${MESHSIM}" run ${example} WORKING_DIRECTORY "${SOURCE_DIR}" RESULT_VARIABLE rc
                OUTPUT_VARIABLE direct ERROR_VARIABLE err TIMEOUT 60)
# The example's system, from its own table's header.
string(REGEX MATCH "topology  ([0-9x]+) " _ "${direct}")
set(shape "${CMAKE_MATCH_1}")
string(REGEX MATCH "hardware  ([a-z0-9-]+):" _ "${direct}")
set(hardware "${CMAKE_MATCH_1}")
execute_process(COMMAND "${MESHSIM}" run ${t}.0.et.gz --hardware ${hardware} --topology ${shape} --comm-groups
                        ${t}.comm_groups.json
                WORKING_DIRECTORY "${SOURCE_DIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE imported ERROR_VARIABLE err TIMEOUT 60)
total_of("${direct}" want)
total_of("${imported}" got)
if(NOT rc EQUAL 0 OR "${want}" STREQUAL "" OR NOT "${want}" STREQUAL "${got}"
   OR NOT imported MATCHES "^# ${t}.\\*.et.gz: [0-9]+ ranks, [0-9]+ nodes: lowered ")
  report("run ${t}.0.et.gz (${hardware} ${shape}): exit ${rc}, expected the example's [${want}], got [${got}]:\n${imported}${err}")
endif()

expect_error("meshsim: error: ${t}.0.et.gz: a Chakra trace needs --hardware PRESET and --topology SHAPE" run ${t}.0.et.gz)
expect_error("meshsim: error: --comm-groups: only for a Chakra trace" run ${example} --comm-groups ${t}.comm_groups.json)
expect_error("meshsim: error: --verify: a Chakra trace has no data to execute"
             run ${t}.0.et.gz --hardware ${hardware} --topology ${shape} --verify)
expect_error("meshsim: error: ${t}.1.et.gz: the trace has more ranks than the topology has chips (1): one rank per chip"
             run ${t}.0.et.gz --hardware ${hardware} --topology 1)
expect_error("meshsim: error: --hardware: 'tpu-v9' is not a preset (TPU: tpu-v4, tpu-v5e, tpu-v5p, tpu-v6e; GPU: a100-dgx, h100-dgx, h200-dgx, b200-dgx, gb200-nvl72)"
             run ${t}.0.et.gz --hardware tpu-v9 --topology 4)
expect_error("meshsim: error: --wraparound: one 0 or 1 per axis of the 2-axis topology, got 1"
             run ${t}.0.et.gz --hardware ${hardware} --topology ${shape} --wraparound 1)
expect_error("meshsim: error: --wraparound: only for a TPU slice (a GPU cluster is a fat tree)"
             run ${t}.0.et.gz --hardware h100-dgx --topology 32 --wraparound 1)
expect_error("meshsim: error: --wraparound: only for an HLO dump or a Chakra trace; a workload names its hardware and topology itself"
             run ${example} --wraparound 1,1)
# The slice as a line on both axes: the same trace, slower rings.
execute_process(COMMAND "${MESHSIM}" run ${t}.0.et.gz --hardware ${hardware} --topology ${shape} --wraparound 0,0
                        --comm-groups ${t}.comm_groups.json
                WORKING_DIRECTORY "${SOURCE_DIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE lines ERROR_VARIABLE err TIMEOUT 60)
if(NOT rc EQUAL 0 OR NOT lines MATCHES "no wraparound on x,y")
  report("run ${t}.0.et.gz --wraparound 0,0: exit ${rc}:\n${lines}${err}")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
finish(chakra.cmake)
