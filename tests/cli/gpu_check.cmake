# scripts/gpu-check's time budget, and scripts/gpu-bundle: a CUDA build packed
# with every library it needs except the C runtime and CUDA's, which runs
# scripts/gpu-check end to end (here on the fake GPU).
#
#   cmake -DMESHSIM=<binary> -DFAKE_GPU=<module> -DSOURCE_DIR=<root> -DWORK_DIR=<scratch>
#         [-DBUILD_DIR=<a build with the CUDA backend module>] -P tests/cli/gpu_check.cmake
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
require(gpu_check.cmake MESHSIM FAKE_GPU SOURCE_DIR WORK_DIR)
fresh_dir("${WORK_DIR}")
set(ENV{MESHSIM_CUDA_BACKEND} "${FAKE_GPU}")
set(ENV{MESHSIM_FAKE_GPUS} 2)

# gpu_check(<name> <meshsim>): runs the script; out_<name>, rc_<name>.
function(gpu_check name bin)
  set(ENV{MESHSIM_BIN} "${bin}")
  execute_process(COMMAND "${SOURCE_DIR}/scripts/gpu-check" "${WORK_DIR}/${name}" WORKING_DIRECTORY "${SOURCE_DIR}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT 300)
  set(out_${name} "${out}" PARENT_SCOPE)
  set(rc_${name} "${rc}" PARENT_SCOPE)
endfunction()

# The budget: not a number is one line; a budget too small for a step skips it.
set(ENV{GPU_CHECK_BUDGET} "8 min")
gpu_check(bad_budget "${MESHSIM}")
if(NOT rc_bad_budget STREQUAL "1" OR NOT out_bad_budget MATCHES
   "gpu-check: FAILED: GPU_CHECK_BUDGET must be a whole number of seconds, not '8 min'\n$")
  report("GPU_CHECK_BUDGET='8 min': expected exit 1 and one FAILED line; got ${rc_bad_budget}, [${out_bad_budget}]")
endif()
set(ENV{GPU_CHECK_BUDGET} 9)
gpu_check(small_budget "${MESHSIM}")
unset(ENV{GPU_CHECK_BUDGET})
if(NOT rc_small_budget STREQUAL "1"
   OR NOT out_small_budget MATCHES "gpu-check: skipped: calibrate: the time budget of 9 s is spent \\(GPU_CHECK_BUDGET\\)\n"
   OR NOT out_small_budget MATCHES "gpu-check: skipped: replay gpu_h100_4nodes: the time budget of 9 s is spent"
   OR out_small_budget MATCHES "FAILED|PASS")
  report("GPU_CHECK_BUDGET=9: expected every step skipped and exit 1; got ${rc_small_budget}, [${out_small_budget}]")
endif()

# A budget that fits: each step's limit is cut to what is left (less the 10 s its
# kill may take), and the run still passes.
set(ENV{GPU_CHECK_BUDGET} 120)
gpu_check(fitting_budget "${MESHSIM}")
unset(ENV{GPU_CHECK_BUDGET})
if(NOT rc_fitting_budget STREQUAL "0" OR NOT out_fitting_budget MATCHES "gpu-check: calibrate \\(time limit (9[0-9]|10[0-9]|110) s\\): "
   OR NOT out_fitting_budget MATCHES "gpu-check: PASS: held-out GEMMs" OR out_fitting_budget MATCHES "FAILED|gpu-check: skipped: ")
  report("GPU_CHECK_BUDGET=120: expected calibrate's limit cut to at most 110 s and a pass; got ${rc_fitting_budget}, [${out_fitting_budget}]")
endif()

# gpu-bundle replaces its output folder whole: never one that is not a bundle.
set(not_bundle "${WORK_DIR}/not_a_bundle")
# bundle_refused(<why> <stderr after "gpu-bundle: FOLDER ">): exit 1, that line, the folder kept.
function(bundle_refused why expected)
  execute_process(COMMAND "${SOURCE_DIR}/scripts/gpu-bundle" "${WORK_DIR}/no_build" "${not_bundle}" RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc STREQUAL "1" OR NOT err STREQUAL "gpu-bundle: ${not_bundle} ${expected}\n" OR NOT EXISTS "${not_bundle}/keep.txt")
    report("scripts/gpu-bundle into a folder ${why}: got ${rc}, [${out}], [${err}]")
  endif()
endfunction()
file(WRITE "${not_bundle}/keep.txt" "mine")
bundle_refused("that is not a bundle" "exists and is not a bundle (no meshsim-run in it): name a new or empty folder")
file(WRITE "${not_bundle}/meshsim-run" "")  # a meshsim-run and other things besides: not a bundle either
bundle_refused("with meshsim-run and more" "holds keep.txt, which no bundle has: name a new or empty folder")

if(DEFINED BUILD_DIR AND NOT "${BUILD_DIR}" STREQUAL "")
  set(bundle "${WORK_DIR}/bundle")
  execute_process(COMMAND "${SOURCE_DIR}/scripts/gpu-bundle" "${BUILD_DIR}" "${bundle}" RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc STREQUAL "0" OR NOT out MATCHES "^gpu-bundle: ${bundle}: meshsim, its CUDA backend module and [0-9]+ libraries")
    report("scripts/gpu-bundle: got ${rc}, [${out}], [${err}]")
  endif()
  # meshsim-run looks for the CUDA libraries the module was linked against.
  file(READ "${bundle}/meshsim-run" run_script)
  if(NOT run_script MATCHES "\ncuda_libs=\\([^\n]*libcudart\\.so\\.[0-9]" OR NOT run_script MATCHES "\ncuda_libs=\\([^\n]*libnccl\\.so\\.[0-9]")
    report("meshsim-run names no CUDA libraries from ldd: [${run_script}]")
  endif()
  # Every library the loader finds lies in the bundle, but for the target's own.
  set(ENV{LD_LIBRARY_PATH} "${bundle}/lib")
  foreach(object meshsim libmeshsim_cuda_backend.so)
    execute_process(COMMAND ldd "${bundle}/${object}" OUTPUT_VARIABLE ldd RESULT_VARIABLE rc)
    string(REGEX MATCHALL "[^\n\t ]+ => [^\n ]+" resolved "${ldd}")
    if(NOT rc STREQUAL "0" OR NOT resolved)
      report("ldd ${object}: ${rc} [${ldd}]")
    endif()
    foreach(line ${resolved})
      string(REGEX REPLACE " => .*" "" name "${line}")
      string(REGEX REPLACE ".* => " "" path "${line}")
      if(NOT name MATCHES "^(libc|libm|libmvec|libdl|libpthread|librt|libresolv|libutil|libstdc\\+\\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnccl|libnvidia-.*)\\.so"
         AND NOT path STREQUAL "${bundle}/lib/${name}")
        report("${object} loads ${name} from ${path}, not from the bundle")
      endif()
    endforeach()
  endforeach()
  unset(ENV{LD_LIBRARY_PATH})
  gpu_check(bundled "${bundle}/meshsim-run")
  if(NOT rc_bundled STREQUAL "0" OR NOT out_bundled MATCHES "gpu-check: PASS: held-out GEMMs" OR out_bundled MATCHES "FAILED")
    report("scripts/gpu-check with the bundle's meshsim-run: got ${rc_bundled}, [${out_bundled}]")
  endif()
endif()

file(REMOVE_RECURSE "${WORK_DIR}")
finish(gpu_check.cmake)
