#include <catch2/catch.hpp>

#include "kernels/calibrated_matmul.hpp"

using namespace meshsim::kernels;

TEST_CASE("Calibrated matmul: launch, smooth, wave and memory terms add up", "[kernels]") {
  // 1024 x 1024 x 512 bf16: 2^30 FLOPs; 64 tiles of 128x128, one wave on 132 SMs.
  MatmulTimeModel m{.launch_s = 5e-6, .flops_per_s = 1e15, .wave_flops_per_s = 2e15, .hbm_bytes_per_s = 4e12,
                    .sms = 132};
  const double flops = 2.0 * 1024 * 1024 * 512;
  const double bytes = 2.0 * (1024 * 512 + 512 * 1024 + 1024 * 1024);
  const double wave = 132.0 * 2 * 128 * 128 * 512;
  CHECK(wave_flops(1024, 512, 1024, 132) == wave);
  CHECK(calibrated_matmul_time(m, 1024, 512, 1024, 2) == Approx(5e-6 + flops / 1e15 + wave / 2e15 + bytes / 4e12));
  // One tile more than a wave: two waves.
  CHECK(wave_flops(128 * 133, 64, 128, 132) == 2.0 * 132 * 2 * 128 * 128 * 64);
  // A partial tile counts as a whole one.
  CHECK(wave_flops(1, 64, 1, 132) == 132.0 * 2 * 128 * 128 * 64);
  // Without SMs, no wave term.
  m.sms = 0;
  CHECK(wave_flops(1024, 512, 1024, 0) == 0);
  CHECK(calibrated_matmul_time(m, 1024, 512, 1024, 2) == Approx(5e-6 + flops / 1e15 + bytes / 4e12));
}
