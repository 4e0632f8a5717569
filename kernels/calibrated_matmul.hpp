#pragma once
// A local matmul's time as fitted on real hardware (meshsim calibrate):
//
//   t = launch + flops / flops_per_s + wave_flops / wave_flops_per_s + hbm_bytes / hbm_bytes_per_s
//
// flops = 2mkn and hbm_bytes = (mk + kn + mn) x element bytes are the roofline's
// (kernels/roofline.hpp); wave_flops counts the work of whole waves: the output
// is cut into 128 x 128 tiles, one per streaming multiprocessor at a time, so a
// last partial wave costs as much as a full one (2k x 128 x 128 x sms per wave).
// The fit (calibrate/fit.cpp, non-negative least squares) decides how much of
// the compute time follows the smooth term and how much the waves: a library
// that splits work finely (stream-K, split-K) leaves the wave term near zero.
// A term the data does not support has a rate of 1e18 (no cost).
#include <cstdint>

namespace meshsim::kernels {

inline constexpr std::uint64_t kWaveTile = 128;

struct MatmulTimeModel {
  double launch_s = 0;
  double flops_per_s = 0;
  double wave_flops_per_s = 0;
  double hbm_bytes_per_s = 0;
  int sms = 0;  // streaming multiprocessors; 0: no wave term
};

double wave_flops(std::uint64_t m, std::uint64_t k, std::uint64_t n, int sms);
double calibrated_matmul_time(const MatmulTimeModel& model, std::uint64_t m, std::uint64_t k, std::uint64_t n,
                              std::uint64_t element_bytes);

}  // namespace meshsim::kernels
