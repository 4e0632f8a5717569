#include "base/dynamic_module.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <system_error>

namespace meshsim {

std::vector<std::filesystem::path> module_candidates(const char* env_var, const char* built_file) {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv(env_var); env && *env) return {fs::path(env)};
  std::vector<fs::path> paths;
  if (built_file == nullptr) return paths;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) paths.push_back(exe.parent_path() / fs::path(built_file).filename());
  paths.emplace_back(built_file);
  return paths;
}

OpenedModule open_first_module(const std::vector<std::filesystem::path>& candidates) {
  OpenedModule m;
  for (const std::filesystem::path& path : candidates) m.looked += (m.looked.empty() ? "" : ", ") + path.string();
  for (const std::filesystem::path& path : candidates) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) continue;
    m.path = path;
    // RTLD_LOCAL: the module's own dependencies (CUDA, SimGrid) stay its own.
    m.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!m.handle) {
      const char* why = dlerror();
      m.why = why ? why : "dlopen failed";
    }
    return m;
  }
  return m;
}

}  // namespace meshsim
