#include "kernels/calibrated_matmul.hpp"

#include "kernels/roofline.hpp"

namespace meshsim::kernels {

double wave_flops(std::uint64_t m, std::uint64_t k, std::uint64_t n, int sms) {
  if (sms <= 0) return 0;
  const double tiles = static_cast<double>((m + kWaveTile - 1) / kWaveTile) *
                       static_cast<double>((n + kWaveTile - 1) / kWaveTile);
  const double s = sms;
  const double waves = static_cast<double>(static_cast<std::uint64_t>((tiles + s - 1) / s));
  return waves * s * 2.0 * static_cast<double>(kWaveTile * kWaveTile) * static_cast<double>(k);
}

double calibrated_matmul_time(const MatmulTimeModel& model, std::uint64_t m, std::uint64_t k, std::uint64_t n,
                              std::uint64_t element_bytes) {
  const RooflineInput in = matmul_traffic(m, k, n, element_bytes);
  double t = model.launch_s + in.flops / model.flops_per_s + in.hbm_bytes / model.hbm_bytes_per_s;
  if (model.sms > 0) t += wave_flops(m, k, n, model.sms) / model.wave_flops_per_s;
  return t;
}

}  // namespace meshsim::kernels
