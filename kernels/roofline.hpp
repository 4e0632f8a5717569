#pragma once
// Roofline cost of a local kernel: it takes the longer of its compute time at the
// achieved FLOP rate and its memory time at HBM bandwidth. The sharded-matmul
// lowering (issue 3) asks this model for every local matmul; calibration sets
// `efficiency`.
#include <cstdint>

#include "base/tick.hpp"

namespace meshsim::kernels {

struct RooflineInput {
  double flops = 0;                        // floating-point (or integer) operations
  double hbm_bytes = 0;                    // bytes read and written in HBM
  double peak_flops_per_s = 0;             // for the kernel's dtype
  double hbm_bandwidth_bytes_per_s = 0;
  double efficiency = 1.0;                 // achieved / peak FLOP rate, (0, 1]
};

struct Roofline {
  Tick compute_time;
  Tick memory_time;
  Tick time() const { return max(compute_time, memory_time); }
  bool compute_bound() const { return compute_time >= memory_time; }
};

Roofline roofline(const RooflineInput& in);

// FLOPs and HBM bytes of C[m,n] = A[m,k] . B[k,n] with elements of `element_bytes`.
RooflineInput matmul_traffic(std::uint64_t m, std::uint64_t k, std::uint64_t n, std::uint64_t element_bytes);

}  // namespace meshsim::kernels
