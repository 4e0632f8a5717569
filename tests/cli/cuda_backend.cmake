# The CUDA backend module (kernels/cuda/backend_abi.hpp), on a machine with or
# without a GPU:
# - meshsim itself never links the CUDA runtime, cuBLAS or NCCL; the module does;
# - a missing module, a file that is no library, and a library that is not the
#   backend each end `calibrate` with one plain line, exit 1;
# - a build without CUDA says so.
#
#   cmake -DMESHSIM=<binary> -DBACKEND=<module or empty> -DREADELF=<readelf>
#         -DFOREIGN_LIBRARY=<some other .so> -DWORK_DIR=<scratch> -P tests/cli/cuda_backend.cmake
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
require(cuda_backend.cmake MESHSIM READELF FOREIGN_LIBRARY WORK_DIR)
fresh_dir("${WORK_DIR}")

needed("${MESHSIM}" meshsim_libs)
foreach(lib cudart cublas nccl)
  if(meshsim_libs MATCHES "lib${lib}")
    report("meshsim itself needs lib${lib} (only the backend module may): ${meshsim_libs}")
  endif()
endforeach()

# calibrate_with(<MESHSIM_CUDA_BACKEND value> <regex for the one stderr line>)
function(calibrate_with module want)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env "MESHSIM_CUDA_BACKEND=${module}" "${MESHSIM}" calibrate --out
                          "${WORK_DIR}/cal.json" --quick RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  TIMEOUT 60)
  if(NOT "${rc}" STREQUAL "1" OR NOT "${out}" STREQUAL "" OR NOT "${err}" MATCHES "^${want}\n$")
    report("MESHSIM_CUDA_BACKEND=${module} meshsim calibrate: expected exit 1 and one line matching [${want}]; got ${rc}, [${out}], [${err}]")
  endif()
endfunction()

if("${BACKEND}" STREQUAL "")
  calibrate_with("" "meshsim: error: calibrate: this meshsim was built without CUDA \\(configure with -DMESHSIM_CUDA=ON[^\n]*")
else()
  needed("${BACKEND}" backend_libs)
  foreach(lib cudart cublas cublasLt nccl)
    if(NOT backend_libs MATCHES "lib${lib}")
      report("the backend module does not link lib${lib}: ${backend_libs}")
    endif()
  endforeach()
  calibrate_with("${WORK_DIR}/missing.so"
                 "meshsim: error: calibrate: no usable GPU: the CUDA backend module is missing \\(looked for ${WORK_DIR}/missing.so\\)")
  file(WRITE "${WORK_DIR}/not_a_library.so" "not an ELF file\n")
  calibrate_with("${WORK_DIR}/not_a_library.so"
                 "meshsim: error: calibrate: no usable GPU: the CUDA backend ${WORK_DIR}/not_a_library.so cannot be loaded: [^\n]+")
  calibrate_with("${FOREIGN_LIBRARY}"
                 "meshsim: error: calibrate: no usable GPU: ${FOREIGN_LIBRARY} is not the CUDA backend of this meshsim \\(rebuild meshsim\\)")
endif()

file(REMOVE_RECURSE "${WORK_DIR}")
finish("cuda_backend.cmake: ${MESHSIM}")
