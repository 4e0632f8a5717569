#pragma once
// Least-squares fits of the model's parameters to measurements (Eigen). Every fit
// minimises the relative residuals sum(((model - measured) / measured)^2), so a
// 1 KiB point weighs as much as a 1 GiB one, with every coefficient kept
// non-negative (a coefficient the data cannot support is dropped, i.e. its rate
// becomes kUnboundedRate). Residuals are reported with each fit.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "calibrate/calibration.hpp"

namespace meshsim::calibrate {

// The rate written for a term the fit drops (no measurable cost): the largest
// rate a calibration file accepts.
inline constexpr double kUnboundedRate = 1e18;

struct MatmulPoint {
  std::uint64_t m = 0, k = 0, n = 0;  // C[m,n] = A[m,k] . B[k,n]
  std::uint64_t element_bytes = 2;
  double time_s = 0;
};
double matmul_flops(const MatmulPoint& p);      // 2mkn
double matmul_hbm_bytes(const MatmulPoint& p);  // (mk + kn + mn) x element bytes

struct CopyPoint {
  std::uint64_t bytes = 0;  // copied (read once, written once)
  double time_s = 0;
};

struct CollectivePoint {
  OpKind kind = OpKind::AllReduce;
  Level level = Level::Nvlink;
  int ranks = 2;
  std::uint64_t bytes = 0;  // V as in docs/WORKLOAD.md (nccl-tests' "size")
  double time_s = 0;
  // What the simulation adds before the first step whatever the link terms
  // (NCCL's base latency of the algorithm and protocol that ran,
  // driver::nccl_base_latency): the fitted steps and bytes explain the rest of
  // time_s.
  double fixed_s = 0;
};

// The ring forms of docs/MODEL.md: steps of latency and bytes through each rank's
// port. AllGather/ReduceScatter: N-1 and (N-1)/N V; AllReduce (ring): 2(N-1) and
// 2(N-1)/N V; AllToAll (grouped send/recv): 1 and (N-1) V/N^2; Send: 1 and V.
struct RingTerms {
  double steps = 0;
  double wire_bytes = 0;
};
RingTerms ring_terms(OpKind kind, int ranks, std::uint64_t bytes);

// Each throws Error when the points cannot determine the fit (too few points, a
// non-positive time).
// With sms > 0 the wave term (kernels/calibrated_matmul.hpp) is a fourth column.
MatmulFit fit_matmul(const std::string& dtype, std::span<const MatmulPoint> points, int sms = 0);
HbmFit fit_hbm(std::span<const CopyPoint> points);
// All the points of one level together (the parameters `run` uses).
LinkFit fit_link(Level level, std::span<const CollectivePoint> points);
// The points of one kind, level and rank count.
CollectiveFit fit_collective(OpKind kind, Level level, int ranks, std::span<const CollectivePoint> points);

// Relative error in percent: 100 (model - measured) / measured.
double error_percent(double model_s, double measured_s);
// The median of |values| (0 for none).
double median_abs(std::vector<double> values);

}  // namespace meshsim::calibrate
