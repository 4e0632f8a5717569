#pragma once
// Finding and opening meshsim's optional modules (the CUDA backend, the SimGrid
// engine): shared libraries built beside the executable and opened with dlopen
// on first use, so that what they link is loaded only by the runs that need it.
#include <filesystem>
#include <string>
#include <vector>

namespace meshsim {

// Where a module may be: the value of `env_var` alone when that variable is set;
// else beside the running executable (the build layout), then `built_file` (the
// path the build wrote it to, for test binaries that live elsewhere); nothing
// when `built_file` is null (a build without the module).
std::vector<std::filesystem::path> module_candidates(const char* env_var, const char* built_file);

struct OpenedModule {
  void* handle = nullptr;          // dlopen's handle (RTLD_NOW | RTLD_LOCAL), or null
  std::filesystem::path path;      // the first candidate that exists (empty: none does)
  std::string why;                 // dlerror() when it exists but cannot be opened
  std::string looked;              // every candidate, comma-separated
};
// Opens the first candidate that exists.
OpenedModule open_first_module(const std::vector<std::filesystem::path>& candidates);

}  // namespace meshsim
