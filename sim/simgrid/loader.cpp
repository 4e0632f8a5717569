// meshsim's side of the SimGrid module (module_abi.hpp): finds the module, opens
// it on the first run that asks for the SimGrid engine and turns its failures
// back into Error. Native runs never load SimGrid.
#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>

#include "base/dynamic_module.hpp"
#include "base/error.hpp"
#include "sim/simgrid/module_abi.hpp"
#include "sim/simgrid/simgrid_executor.hpp"

namespace meshsim::sim {

namespace {

struct Module {
  const SimgridModuleApi* api = nullptr;
  std::string problem;  // why api is null
};

Module load() {
  const OpenedModule opened = open_first_module(module_candidates("MESHSIM_SIMGRID_MODULE", MESHSIM_SIMGRID_MODULE_FILE));
  if (opened.path.empty())
    return {nullptr, fmt::format("SimGrid engine: its module is missing (looked for {})", opened.looked)};
  if (!opened.handle)
    return {nullptr, fmt::format("SimGrid engine: the module {} cannot be loaded: {}", opened.path.string(), opened.why)};
  using Entry = const SimgridModuleApi* (*)();
  auto* entry = reinterpret_cast<Entry>(dlsym(opened.handle, kSimgridModuleSymbol));
  const SimgridModuleApi* api = entry ? entry() : nullptr;
  if (!api || api->abi != kSimgridModuleAbi || api->run_size != sizeof(SimgridRun) ||
      api->resource_size != sizeof(FlowResource) || !api->run)
    return {nullptr, fmt::format("SimGrid engine: {} is not the SimGrid module of this meshsim (rebuild meshsim)",
                                 opened.path.string())};
  return {api, {}};
}

// The one process-wide state of the core, on purpose: dlopen's handle is the
// process's (a module is loaded once and never closed), written once under
// call_once and only read after.
const Module& module() {
  static std::once_flag once;
  static Module m;
  std::call_once(once, [] { m = load(); });
  return m;
}

}  // namespace

SimgridRun run_on_simgrid(const FlowGraph& graph, std::span<const FlowResource> resources, std::uint32_t num_nodes,
                          std::span<const std::string> extra_config) {
  const Module& m = module();
  if (!m.api) throw Error(m.problem);
  SimgridRun run;
  std::string error;
  if (!m.api->run(graph, resources, num_nodes, extra_config, run, error)) throw Error(error);
  return run;
}

}  // namespace meshsim::sim
