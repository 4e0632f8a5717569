// meshsim's side of the CUDA backend (backend_abi.hpp): finds the module, loads
// it on first use and turns its error strings back into Error. Always built; in
// a build without CUDA (MESHSIM_CUDA off) there is no module and every entry
// says so plainly.
#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "base/dynamic_module.hpp"
#include "base/error.hpp"
#include "kernels/cuda/backend_abi.hpp"
#include "kernels/cuda/device.hpp"

namespace meshsim::kernels::cuda {

namespace {

constexpr const char* kNoCuda =
    "this meshsim was built without CUDA (configure with -DMESHSIM_CUDA=ON where the CUDA toolkit, cuBLAS and NCCL "
    "are installed)";

struct Backend {
  const BackendApi* api = nullptr;
  std::string problem;  // why api is null
};

// Where the module may be: $MESHSIM_CUDA_BACKEND alone when it is set (in any
// build: the tests load a fake GPU through it); else, in a CUDA build, beside
// the meshsim executable, then where this build wrote it. None: built without CUDA.
std::vector<std::filesystem::path> candidates() {
#ifdef MESHSIM_CUDA_BACKEND_FILE
  return module_candidates("MESHSIM_CUDA_BACKEND", MESHSIM_CUDA_BACKEND_FILE);
#else
  return module_candidates("MESHSIM_CUDA_BACKEND", nullptr);
#endif
}

Backend load() {
  Backend b;
  const std::vector<std::filesystem::path> paths = candidates();
  if (paths.empty()) return {nullptr, kNoCuda};
  const OpenedModule opened = open_first_module(paths);
  if (opened.path.empty()) {
    b.problem = fmt::format("no usable GPU: the CUDA backend module is missing (looked for {})", opened.looked);
    return b;
  }
  if (!opened.handle) {
    b.problem =
        fmt::format("no usable GPU: the CUDA backend {} cannot be loaded: {}", opened.path.string(), opened.why);
    return b;
  }
  using Entry = const BackendApi* (*)();
  auto* entry = reinterpret_cast<Entry>(dlsym(opened.handle, kMeshsimCudaBackendSymbol));
  const BackendApi* api = entry ? entry() : nullptr;
  if (!api || api->abi != kBackendAbi || api->probe_size != sizeof(Probe) ||
      api->device_call_size != sizeof(DeviceCall) || api->repeat_size != sizeof(Repeat) || !api->probe ||
      !api->open_session || !api->open_rank_session || !api->close_session || !api->time) {
    b.problem =
        fmt::format("no usable GPU: {} is not the CUDA backend of this meshsim (rebuild meshsim)", opened.path.string());
    return b;  // the handle stays open: nothing of it is used
  }
  b.api = api;
  return b;
}

const Backend& backend() {
  static const Backend b = load();
  return b;
}

}  // namespace

Probe probe() {
  Probe p;
  const Backend& b = backend();
  if (!b.api) {
    p.problem = b.problem;
    return p;
  }
  b.api->probe(p);
  return p;
}

bool built_with_cuda() {
#ifdef MESHSIM_CUDA_BACKEND_FILE
  return true;
#else
  return false;
#endif
}

struct Session::Impl {
  const BackendApi* api = nullptr;
  void* handle = nullptr;
};

Session::Session(int gpus) : impl_(std::make_unique<Impl>()) {
  const Backend& b = backend();
  if (!b.api) throw Error(b.problem);
  std::string error;
  impl_->api = b.api;
  impl_->handle = b.api->open_session(gpus, error);
  if (!impl_->handle) throw Error(error);
}

Session::Session(Coordinator& coordinator, int local_device) : impl_(std::make_unique<Impl>()) {
  const Backend& b = backend();
  if (!b.api) throw Error(b.problem);
  std::string error;
  impl_->api = b.api;
  impl_->handle = b.api->open_rank_session(coordinator, local_device, error);
  if (!impl_->handle) throw Error(error);
}

Session::~Session() {
  if (impl_ && impl_->handle) impl_->api->close_session(impl_->handle);
}

Timing Session::time(const std::vector<DeviceCall>& calls, const Repeat& repeat) {
  Timing out;
  std::string error;
  bool fatal = false;
  if (!impl_->api->time(impl_->handle, calls, repeat, out, error, fatal)) {
    if (fatal) throw DeviceFatal(error);
    throw Error(error);
  }
  return out;
}

}  // namespace meshsim::kernels::cuda
