#include <catch2/catch.hpp>

#include "kernels/roofline.hpp"

using namespace meshsim::kernels;

TEST_CASE("Roofline: compute-bound and memory-bound matmuls", "[kernels]") {
  // bf16 8192^3 on a v5e: 2*8192^3 FLOPs / 1.97e14 = 5.58 ms; bytes 3*2*8192^2 / 8.2e11 = 0.49 ms.
  RooflineInput big = matmul_traffic(8192, 8192, 8192, 2);
  big.peak_flops_per_s = 1.97e14;
  big.hbm_bandwidth_bytes_per_s = 8.2e11;
  const Roofline r = roofline(big);
  CHECK(r.compute_bound());
  CHECK(r.time().seconds() == Approx(2.0 * 8192.0 * 8192.0 * 8192.0 / 1.97e14).epsilon(1e-9));

  // A matrix-vector product is memory-bound.
  RooflineInput gemv = matmul_traffic(8192, 8192, 1, 2);
  gemv.peak_flops_per_s = 1.97e14;
  gemv.hbm_bandwidth_bytes_per_s = 8.2e11;
  CHECK_FALSE(roofline(gemv).compute_bound());

  big.efficiency = 0.5;
  CHECK(roofline(big).compute_time.seconds() == Approx(2 * r.compute_time.seconds()).epsilon(1e-9));
}
