// meshsim's side of the SimGrid module (module_abi.hpp): finds the module, opens
// it on the first run that asks for the SimGrid engine and turns its failures
// back into Error. Native runs never load SimGrid.
#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <system_error>
#include <vector>

#include "base/error.hpp"
#include "sim/simgrid/module_abi.hpp"
#include "sim/simgrid/simgrid_executor.hpp"

namespace meshsim::sim {

namespace {

// Where the module may be: $MESHSIM_SIMGRID_MODULE alone when it is set; else
// beside the running executable (meshsim and meshsim_bench live in the build
// folder, as the module does), then where this build wrote it (for the test
// binaries, which live in a subfolder).
std::vector<std::filesystem::path> candidates() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("MESHSIM_SIMGRID_MODULE"); env && *env) return {fs::path(env)};
  std::vector<fs::path> paths;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) paths.push_back(exe.parent_path() / fs::path(MESHSIM_SIMGRID_MODULE_FILE).filename());
  paths.emplace_back(MESHSIM_SIMGRID_MODULE_FILE);
  return paths;
}

struct Module {
  const SimgridModuleApi* api = nullptr;
  std::string problem;  // why api is null
};

Module load() {
  const std::vector<std::filesystem::path> paths = candidates();
  for (const std::filesystem::path& path : paths) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) continue;
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = dlerror();
      return {nullptr, fmt::format("SimGrid engine: the module {} cannot be loaded: {}", path.string(),
                                   why ? why : "dlopen failed")};
    }
    using Entry = const SimgridModuleApi* (*)();
    auto* entry = reinterpret_cast<Entry>(dlsym(handle, kSimgridModuleSymbol));
    const SimgridModuleApi* api = entry ? entry() : nullptr;
    if (!api || api->abi != kSimgridModuleAbi || api->run_size != sizeof(SimgridRun) ||
        api->resource_size != sizeof(FlowResource) || !api->run)
      return {nullptr, fmt::format("SimGrid engine: {} is not the SimGrid module of this meshsim (rebuild meshsim)",
                                   path.string())};
    return {api, {}};
  }
  std::string looked;
  for (const std::filesystem::path& path : paths) looked += (looked.empty() ? "" : ", ") + path.string();
  return {nullptr, fmt::format("SimGrid engine: its module is missing (looked for {})", looked)};
}

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
