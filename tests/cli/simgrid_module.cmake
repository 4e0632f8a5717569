# The SimGrid module (sim/simgrid/module_abi.hpp):
# - meshsim itself never links SimGrid (31 MB and 50 ms at every start); the
#   module does, and native runs never load it;
# - a missing module, a file that is no library, and a library that is not the
#   module each end `--engine simgrid` with one plain line, exit 1.
#
#   cmake -DMESHSIM=<binary> -DMODULE=<module> -DREADELF=<readelf> -DFOREIGN_LIBRARY=<some other .so>
#         -DEXAMPLE=<workload> -DWORK_DIR=<scratch> -P tests/cli/simgrid_module.cmake
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
require(simgrid_module.cmake MESHSIM MODULE READELF FOREIGN_LIBRARY EXAMPLE WORK_DIR)
fresh_dir("${WORK_DIR}")

needed("${MESHSIM}" meshsim_libs)
if(meshsim_libs MATCHES "libsimgrid")
  report("meshsim itself needs libsimgrid (only the module may): ${meshsim_libs}")
endif()
needed("${MODULE}" module_libs)
if(NOT module_libs MATCHES "libsimgrid")
  report("the SimGrid module does not link libsimgrid: ${module_libs}")
endif()

# simgrid_with(<MESHSIM_SIMGRID_MODULE value> <regex for the one stderr line>)
function(simgrid_with module want)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env "MESHSIM_SIMGRID_MODULE=${module}" "${MESHSIM}" run "${EXAMPLE}"
                          --engine simgrid RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  if(NOT "${rc}" STREQUAL "1" OR NOT "${out}" STREQUAL "" OR NOT "${err}" MATCHES "^${want}\n$")
    report("MESHSIM_SIMGRID_MODULE=${module} meshsim run --engine simgrid: expected exit 1 and one line matching [${want}]; got ${rc}, [${out}], [${err}]")
  endif()
endfunction()

simgrid_with("${WORK_DIR}/missing.so"
             "meshsim: error: SimGrid engine: its module is missing \\(looked for ${WORK_DIR}/missing.so\\)")
file(WRITE "${WORK_DIR}/not_a_library.so" "not an ELF file\n")
simgrid_with("${WORK_DIR}/not_a_library.so"
             "meshsim: error: SimGrid engine: the module ${WORK_DIR}/not_a_library.so cannot be loaded: [^\n]+")
simgrid_with("${FOREIGN_LIBRARY}"
             "meshsim: error: SimGrid engine: ${FOREIGN_LIBRARY} is not the SimGrid module of this meshsim \\(rebuild meshsim\\)")

# A native run works without any module at all.
execute_process(COMMAND ${CMAKE_COMMAND} -E env "MESHSIM_SIMGRID_MODULE=${WORK_DIR}/missing.so" "${MESHSIM}" run
                        "${EXAMPLE}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT rc EQUAL 0)
  report("a native run without the SimGrid module failed: ${rc}, [${err}]")
endif()

file(REMOVE_RECURSE "${WORK_DIR}")
finish("simgrid_module.cmake: ${MESHSIM}")
