// The CUDA backend when meshsim is built without it (MESHSIM_CUDA=OFF): every
// entry says so, plainly.
#include "base/error.hpp"
#include "kernels/cuda/device.hpp"

namespace meshsim::kernels::cuda {

namespace {
constexpr const char* kNoCuda =
    "this meshsim was built without CUDA (configure with -DMESHSIM_CUDA=ON where the CUDA toolkit, cuBLAS and NCCL "
    "are installed)";
}

Probe probe() {
  Probe p;
  p.problem = kNoCuda;
  return p;
}

bool built_with_cuda() { return false; }

struct Session::Impl {};

Session::Session(int) { throw Error(kNoCuda); }
Session::~Session() = default;

std::vector<double> Session::time(const std::vector<DeviceCall>&, const Repeat&) { throw Error(kNoCuda); }

}  // namespace meshsim::kernels::cuda
