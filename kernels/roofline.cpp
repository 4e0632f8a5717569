#include "kernels/roofline.hpp"

#include "base/error.hpp"

namespace meshsim::kernels {

Roofline roofline(const RooflineInput& in) {
  MESHSIM_ASSERT(in.peak_flops_per_s > 0 && in.hbm_bandwidth_bytes_per_s > 0, "roofline needs positive peaks");
  MESHSIM_ASSERT(in.efficiency > 0 && in.efficiency <= 1, "efficiency must be in (0, 1]");
  Roofline r;
  r.compute_time = tick_from_seconds(in.flops / (in.peak_flops_per_s * in.efficiency));
  r.memory_time = tick_from_seconds(in.hbm_bytes / in.hbm_bandwidth_bytes_per_s);
  return r;
}

RooflineInput matmul_traffic(std::uint64_t m, std::uint64_t k, std::uint64_t n, std::uint64_t element_bytes) {
  RooflineInput in;
  const double dm = static_cast<double>(m), dk = static_cast<double>(k), dn = static_cast<double>(n);
  in.flops = 2.0 * dm * dk * dn;
  in.hbm_bytes = static_cast<double>(element_bytes) * (dm * dk + dk * dn + dm * dn);
  return in;
}

}  // namespace meshsim::kernels
