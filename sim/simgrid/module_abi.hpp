#pragma once
// The boundary between meshsim and its SimGrid module (libmeshsim_simgrid.so).
// SimGrid 3.32 and the ns-3 libraries it depends on take about 31 MB of resident
// memory and 50 ms to load and initialise; meshsim loads them with dlopen only
// when a run asks for the SimGrid engine (sim/simgrid/loader.cpp), never for a
// native run. Both sides are built by the same build: the structure is checked
// by its version and sizes, C++ types pass as they are, and no exception crosses
// the boundary (a failure comes back as a message).
#include <cstdint>
#include <span>
#include <string>

#include "sim/simgrid/simgrid_executor.hpp"

namespace meshsim::sim {

inline constexpr std::uint32_t kSimgridModuleAbi = 1;
inline constexpr const char* kSimgridModuleSymbol = "meshsim_simgrid_module";

struct SimgridModuleApi {
  std::uint32_t abi = kSimgridModuleAbi;
  std::uint32_t run_size = sizeof(SimgridRun);
  std::uint32_t resource_size = sizeof(FlowResource);
  // run_on_simgrid() inside the module: true with `out` filled, or false with
  // `error` set to the message of the Error it would have thrown.
  bool (*run)(const FlowGraph& graph, std::span<const FlowResource> resources, std::uint32_t num_nodes,
              std::span<const std::string> extra_config, SimgridRun& out, std::string& error) = nullptr;
};

}  // namespace meshsim::sim

// The module's one exported symbol (extern "C": found by name with dlsym).
extern "C" const meshsim::sim::SimgridModuleApi* meshsim_simgrid_module();
