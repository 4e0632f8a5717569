# meshsim calibrate --from, compare and sweep on measurements made elsewhere
# (docs/CALIBRATION.md), end to end from the project root:
#  - the bundled nccl-tests log is fitted, the calibration file it writes is read
#    back by run, compare shows each point before and after, sweep draws the
#    measured, uncalibrated and calibrated curves (when gnuplot is there);
#  - each bad input gives exit 1, nothing on stdout and one line on stderr.
#
#   cmake -DMESHSIM=<binary> -DSOURCE_DIR=<project root> -DWORK_DIR=<scratch> -P tests/cli/calibrate_from.cmake
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
require(calibrate_from.cmake MESHSIM SOURCE_DIR WORK_DIR)
fresh_dir("${WORK_DIR}")
set(log examples/measurements/nccl_tests_h100_8gpu.log)

function(run_ok what expect)
  execute_process(COMMAND "${MESHSIM}" ${ARGN} WORKING_DIRECTORY "${SOURCE_DIR}" RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
  if(NOT rc EQUAL 0)
    report("${what}: exit ${rc}: ${err}")
  elseif(NOT out MATCHES "${expect}")
    report("${what}: stdout does not match '${expect}':\n${out}")
  endif()
endfunction()

# One clear line: exit 1, stdout empty, stderr exactly `expected`.
function(run_error what expected)
  execute_process(COMMAND "${MESHSIM}" ${ARGN} WORKING_DIRECTORY "${SOURCE_DIR}" RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  if(NOT rc EQUAL 1 OR NOT out STREQUAL "" OR NOT err STREQUAL "meshsim: error: ${expected}\n")
    report("${what}: expected exit 1 and [meshsim: error: ${expected}], got exit ${rc}, stdout [${out}], stderr [${err}]")
  endif()
endfunction()

run_ok("calibrate --from the bundled nccl-tests log" "fixed cost of all_reduce: .*worst points.*wrote"
       calibrate --from ${log} --hardware h100-dgx --out ${WORK_DIR}/cal.json)
file(READ "${WORK_DIR}/cal.json" cal)
if(NOT cal MATCHES "\"fabric\"" OR NOT cal MATCHES "\"level\": \"nvlink\"")
  report("cal.json has no nvlink fabric level:\n${cal}")
endif()
run_ok("run with the fitted calibration" "terms     nvlink links at [0-9.]+ % of peak, nvlink reduce_scatter fixed cost [0-9.]+ us, nvlink all_reduce fixed cost"
       run examples/gpu_h100_4nodes.json --calibration ${WORK_DIR}/cal.json)
run_ok("compare the log before and after" "median \\|error\\| over 42 points: [0-9.]+ % before, [0-9.]+ % after"
       compare ${log} --hardware h100-dgx --calibration ${WORK_DIR}/cal.json)

run_ok("sweep with the calibration: both curves" "h100-dgx calibrated"
       sweep --op all_reduce --preset h100-dgx --mesh 8 --bytes 1K:1M:32 --calibration ${WORK_DIR}/cal.json)
find_program(GNUPLOT gnuplot)
if(GNUPLOT)
  run_ok("sweep --plot with the log as measured points" ""
         sweep --op all_reduce --preset h100-dgx --mesh 8 --bytes 1K:1G:4 --calibration ${WORK_DIR}/cal.json
         --plot ${WORK_DIR}/ar --measured ${log} -q)
  file(READ "${WORK_DIR}/ar.dat" dat)
  string(REGEX MATCH "# measured\n# bytes time_us busbw_GBps\n([0-9. ]+\n)+" measured "${dat}")
  string(REGEX MATCHALL "\n[0-9]" rows "${measured}")
  list(LENGTH rows n)
  if(NOT n EQUAL 21)  # the log's all_reduce rows, 1 KiB to 1 GiB (not its all_gather ones)
    report("sweep --measured ${log}: expected the 21 all_reduce rows in ar.dat, found ${n}:\n${measured}")
  endif()
endif()

run_error("a log without --hardware"
          "${log}:18: an nccl-tests log does not say which system it ran on: give --hardware PRESET"
          calibrate --from ${log} --out ${WORK_DIR}/x.json)
run_error("a log on a TPU preset"
          "${log}:18: nccl-tests runs on GPUs: 'tpu-v5e' is not a GPU preset (known: a100-dgx, h100-dgx, h200-dgx, b200-dgx, gb200-nvl72)"
          calibrate --from ${log} --hardware tpu-v5e --out ${WORK_DIR}/x.json)
run_error("a log of 8 ranks as two nodes"
          "${log}:18: the log has 8 ranks on 2 nodes; meshsim models whole nodes of 8 GPUs (h100-dgx)"
          calibrate --from ${log} --hardware h100-dgx --nodes 2 --out ${WORK_DIR}/x.json)
run_error("--from with --quick"
          "calibrate: --from fits measurements made elsewhere; --measurements, --dtypes and --quick are for measuring the visible GPUs"
          calibrate --from ${log} --quick --out ${WORK_DIR}/x.json)
run_error("--hardware without --from"
          "calibrate: --hardware, --nodes, --collective, --algorithm and --protocol describe --from's nccl-tests logs"
          calibrate --hardware h100-dgx --out ${WORK_DIR}/x.json)
run_error("--collective without --from"
          "calibrate: --hardware, --nodes, --collective, --algorithm and --protocol describe --from's nccl-tests logs"
          calibrate --collective all_reduce --out ${WORK_DIR}/x.json)
run_error("a log whose header names another collective than --collective"
          "${log}:18: the log says its test is all_reduce; --collective says all_gather"
          calibrate --from ${log} --hardware h100-dgx --collective all_gather --out ${WORK_DIR}/x.json)
file(GLOB bad "${SOURCE_DIR}/tests/bad_measurements/*.err")
foreach(expected_file ${bad})
  get_filename_component(stem "${expected_file}" NAME_WE)
  file(GLOB input "${SOURCE_DIR}/tests/bad_measurements/${stem}.*")
  list(FILTER input EXCLUDE REGEX "\\.err$")
  file(RELATIVE_PATH relative "${SOURCE_DIR}" "${input}")
  file(READ "${expected_file}" expected)
  string(REGEX REPLACE "^meshsim: error: " "" expected "${expected}")
  string(REGEX REPLACE "\n$" "" expected "${expected}")
  run_error("bad measurements ${stem}" "${expected}" calibrate --from ${relative} --out ${WORK_DIR}/x.json)
endforeach()
finish(calibrate_from.cmake)
