// The fits recover known parameters from synthetic measurements with noise.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "calibrate/fit.hpp"

using namespace meshsim;
using namespace meshsim::calibrate;

namespace {

// Multiplicative Gaussian noise of 1 % (sigma), seeded: the same points every run.
struct Noise {
  std::mt19937_64 rng{12345};
  std::normal_distribution<double> normal{0.0, 0.01};
  double operator()(double t) { return t * (1.0 + normal(rng)); }
};

bool within(double got, double want, double fraction) { return std::abs(got - want) <= fraction * std::abs(want); }

}  // namespace

TEST_CASE("fit: matmul launch, FLOP rate and memory bandwidth within 2 % from noisy points", "[calibrate]") {
  // An H200-like device (rates invented for the test): 5 us launch, 700 TFLOP/s
  // sustained, 3.9 TB/s of effective HBM bandwidth.
  const double launch = 5e-6, rate = 7.0e14, bw = 3.9e12, peak = 9.89e14;
  Noise noise;
  std::vector<MatmulPoint> points;
  for (std::uint64_t m : {16u, 128u, 1024u, 4096u, 8192u})
    for (std::uint64_t n : {256u, 2048u, 8192u})
      for (std::uint64_t k : {256u, 4096u, 16384u}) {
        MatmulPoint p{m, k, n, 2, 0};
        p.time_s = noise(launch + matmul_flops(p) / rate + matmul_hbm_bytes(p) / bw);
        points.push_back(p);
      }
  const MatmulFit f = fit_matmul("bf16", points);
  CHECK(within(f.launch_s, launch, 0.02));
  CHECK(within(f.flops_per_s, rate, 0.02));
  CHECK(within(f.hbm_bytes_per_s, bw, 0.02));
  CHECK(f.quality.points == points.size());
  CHECK(f.quality.rms_relative_residual < 0.015);
  CHECK(f.quality.rms_relative_residual > 0.005);  // the noise is there, not fitted away
  // Efficiency (achieved / peak) on shapes it was not fitted on, within 2 %.
  for (MatmulPoint p : {MatmulPoint{3072, 3072, 3072, 2, 0}, MatmulPoint{64, 12288, 6144, 2, 0},
                        MatmulPoint{6144, 1536, 512, 2, 0}}) {
    const double true_eff = matmul_flops(p) / peak / (launch + matmul_flops(p) / rate + matmul_hbm_bytes(p) / bw);
    const double fit_eff = matmul_flops(p) / peak / f.time_s(p.m, p.k, p.n, 2);
    CHECK(within(fit_eff, true_eff, 0.02));
  }
}

TEST_CASE("fit: matmul with whole waves of tiles: the wave term, not the smooth one", "[calibrate]") {
  // A library without stream-K on 132 SMs: every wave of 128x128 tiles costs
  // its full time. 4 us launch, 750 TFLOP/s per full wave, 3.6 TB/s.
  const int sms = 132;
  const double launch = 4e-6, wave_rate = 7.5e14, bw = 3.6e12;
  auto truth = [&](const MatmulPoint& p) {
    return launch + kernels::wave_flops(p.m, p.k, p.n, sms) / wave_rate + matmul_hbm_bytes(p) / bw;
  };
  Noise noise;
  std::vector<MatmulPoint> points;
  for (std::uint64_t m : {128u, 512u, 2048u, 4096u, 8192u})
    for (std::uint64_t n : {128u, 512u, 2048u, 4096u, 8192u})
      for (std::uint64_t k : {512u, 4096u, 8192u}) {
        MatmulPoint p{m, k, n, 2, 0};
        p.time_s = noise(truth(p));
        points.push_back(p);
      }
  const MatmulFit f = fit_matmul("bf16", points, sms);
  CHECK(f.sms == sms);
  CHECK(within(f.launch_s, launch, 0.02));
  CHECK(within(f.wave_flops_per_s, wave_rate, 0.02));
  CHECK(within(f.hbm_bytes_per_s, bw, 0.02));
  CHECK(f.flops_per_s > 50 * wave_rate);  // the smooth term carries (almost) nothing
  // 3072^3 is 576 tiles, 4.4 waves on 132 SMs: the fifth wave costs in full.
  const MatmulPoint odd{3072, 3072, 3072, 2, 0};
  CHECK(within(f.time_s(odd.m, odd.k, odd.n, 2), truth(odd), 0.02));
  CHECK(kernels::wave_flops(3072, 3072, 3072, sms) == 5.0 * sms * 2 * 128 * 128 * 3072);
}

TEST_CASE("fit: HBM copy latency and bandwidth within 2 %", "[calibrate]") {
  const double latency = 4e-6, bw = 4.3e12;
  Noise noise;
  std::vector<CopyPoint> points;
  for (std::uint64_t bytes = 4096; bytes <= (std::uint64_t{1} << 32); bytes *= 4)
    points.push_back({bytes, noise(latency + 2.0 * static_cast<double>(bytes) / bw)});
  const HbmFit f = fit_hbm(points);
  CHECK(within(f.latency_s, latency, 0.02));
  CHECK(within(f.bandwidth_bytes_per_s, bw, 0.02));
}

TEST_CASE("fit: per-step latency and bandwidth of a fabric level within 2 %", "[calibrate]") {
  // One NVLink level: 3.4 us per ring step, 370 GB/s per port; sweeps of every
  // kind at 8 and 4 ranks from 1 KiB to 4 GiB.
  const double step = 3.4e-6, bw = 3.7e11;
  Noise noise;
  std::vector<CollectivePoint> points;
  for (OpKind kind : {OpKind::AllGather, OpKind::ReduceScatter, OpKind::AllReduce, OpKind::AllToAll})
    for (int ranks : {4, 8})
      for (std::uint64_t bytes = 1024; bytes <= (std::uint64_t{1} << 32); bytes *= 2) {
        const RingTerms r = ring_terms(kind, ranks, bytes);
        points.push_back({kind, Level::Nvlink, ranks, bytes, noise(r.steps * step + r.wire_bytes / bw)});
      }
  // A second level whose points must not leak into the first.
  points.push_back({OpKind::AllReduce, Level::Nic, 2, 1 << 20, 1.0});
  const LinkFit f = fit_link(Level::Nvlink, points);
  CHECK(f.level == Level::Nvlink);
  CHECK(within(f.step_latency_s, step, 0.02));
  CHECK(within(f.bandwidth_bytes_per_s, bw, 0.02));
  CHECK(f.quality.points == points.size() - 1);
  const CollectiveFit ar = fit_collective(OpKind::AllReduce, Level::Nvlink, 8, points);
  CHECK(ar.quality.points == 23);
  CHECK(within(ar.step_latency_s, step, 0.02));
  CHECK(within(ar.bandwidth_bytes_per_s, bw, 0.02));
}

TEST_CASE("fit: a point's fixed part (NCCL's base latency, which the simulation adds) is not fitted", "[calibrate]") {
  // Measured = base latency + steps x 3.4 us + wire bytes / 370 GB/s, the base
  // 6.6 us below 64 KiB (the ring with LL) and 8.4 us above (Simple). Told the
  // base, the fit finds the link terms; not told, the step latency absorbs it.
  const double step = 3.4e-6, bw = 3.7e11;
  std::vector<CollectivePoint> told, untold;
  for (OpKind kind : {OpKind::AllGather, OpKind::AllReduce})
    for (std::uint64_t bytes = 1024; bytes <= (std::uint64_t{1} << 30); bytes *= 4) {
      const RingTerms r = ring_terms(kind, 8, bytes);
      const double base = bytes < 65536 ? 6.6e-6 : 8.4e-6;
      const double t = base + r.steps * step + r.wire_bytes / bw;
      told.push_back({kind, Level::Nvlink, 8, bytes, t, base});
      untold.push_back({kind, Level::Nvlink, 8, bytes, t});
    }
  const LinkFit f = fit_link(Level::Nvlink, told);
  CHECK(within(f.step_latency_s, step, 1e-6));
  CHECK(within(f.bandwidth_bytes_per_s, bw, 1e-6));
  CHECK(f.quality.rms_relative_residual < 1e-9);
  const LinkFit g = fit_link(Level::Nvlink, untold);
  CHECK(g.step_latency_s > 1.2 * step);  // 4.17 us
  CHECK(g.quality.rms_relative_residual > 0.01);
}

TEST_CASE("fit: ring terms follow docs/MODEL.md", "[calibrate]") {
  CHECK(ring_terms(OpKind::AllGather, 8, 800).steps == 7);
  CHECK(ring_terms(OpKind::AllGather, 8, 800).wire_bytes == Approx(700));
  CHECK(ring_terms(OpKind::AllReduce, 8, 800).steps == 14);
  CHECK(ring_terms(OpKind::AllReduce, 8, 800).wire_bytes == Approx(1400));
  CHECK(ring_terms(OpKind::AllToAll, 4, 1600).wire_bytes == Approx(300));
}

TEST_CASE("fit: a term the data does not support is dropped, not negative", "[calibrate]") {
  // Pure bandwidth: no latency at all; the fit keeps latency at 0, not below.
  std::vector<CopyPoint> points;
  for (std::uint64_t bytes = 1 << 20; bytes <= (1u << 30); bytes *= 2)
    points.push_back({bytes, 2.0 * static_cast<double>(bytes) / 1e12});
  const HbmFit f = fit_hbm(points);
  CHECK(f.latency_s >= 0);
  CHECK(f.latency_s < 1e-9);
  CHECK(within(f.bandwidth_bytes_per_s, 1e12, 1e-6));
}

TEST_CASE("fit: too few or non-positive measurements are an error", "[calibrate]") {
  std::vector<CopyPoint> one{{1024, 1e-6}};
  CHECK_THROWS_WITH(fit_hbm(one), "HBM copy fit: 1 measurements cannot determine 2 parameters");
  std::vector<CopyPoint> bad{{1024, 1e-6}, {2048, 0.0}, {4096, 3e-6}};
  CHECK_THROWS_WITH(fit_hbm(bad), "HBM copy fit: measured time 0 is not positive");
}

TEST_CASE("fit: median absolute error", "[calibrate]") {
  CHECK(median_abs({}) == 0);
  CHECK(median_abs({-3, 1, 2}) == 2);
  CHECK(median_abs({-4, 1, 2, -10}) == 3);
  CHECK(error_percent(1.1, 1.0) == Approx(10.0));
}
