// The fabric fit and the comparison of measured points, in words (meshsim
// calibrate --from and meshsim compare).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "calibrate/fit.hpp"
#include "calibrate/fit_fabric.hpp"

namespace meshsim::calibrate {

std::string format_fabric_fit(const FabricFit& fit, std::span<const MeasuredPoint> points) {
  std::string out = fmt::format("fitted {} points by simulating them ({} simulations, {} Gauss-Newton steps)\n",
                                points.size(), fit.simulations, fit.iterations);
  for (const LevelFit& l : fit.levels) {
    out += fmt::format(
        "  {} on {}: hop latency {:.4g} s ± {:.2g}{}, link efficiency {:.4f} ± {:.2g}{}; "
        "rms residual {:.2f} %, max {:.2f} % over {} points\n",
        workloads::level_name(l.level), l.preset, l.hop_latency_s, l.hop_latency_error_s,
        l.hop_latency_fitted ? "" : " (the preset's, kept)", l.efficiency, l.efficiency_error,
        l.efficiency_fitted ? "" : " (the preset's, kept)", 100 * l.quality.rms_relative_residual,
        100 * l.quality.max_relative_residual, l.quality.points);
    for (const LevelFit::Fixed& f : l.fixed_cost)
      out += fmt::format("    fixed cost of {}: {:.4g} s ± {:.2g}{}\n", kind_name(f.kind), f.seconds, f.error_s,
                         f.fitted   ? ""
                         : f.shared ? " (no points: shared, see the note)"
                                    : " (not fitted, kept at 0)");
  }
  for (const std::string& n : fit.notes) out += "note: " + n + "\n";
  // The points that fit worst, after the fit.
  std::vector<std::size_t> order(points.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto error = [&](std::size_t i) { return error_percent(fit.points[i].after_s, fit.points[i].measured_s); };
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return std::abs(error(a)) > std::abs(error(b)); });
  out += "worst points (measured, simulated before and after, error after):\n";
  for (std::size_t k = 0; k < order.size() && k < 5; ++k) {
    const std::size_t i = order[k];
    const MeasuredPoint& p = points[i];
    out += fmt::format("  {}: {} {} B on {} {} over {}: {:.4g} s, {:.4g} s, {:.4g} s, {:+.2f} %\n", p.where(),
                       kind_name(p.kind), p.bytes, p.hardware, p.topology, p.axes, p.time_s, fit.points[i].before_s,
                       fit.points[i].after_s, error(i));
  }
  return out;
}

std::string format_point_comparison(std::span<const MeasuredPoint> points, const Calibration* cal) {
  std::string out = fmt::format("{:<24} {:<14} {:>12}  {:<22} {:>13} {:>12} {:>9}", "point", "kind", "bytes", "system",
                                "measured (us)", "before (us)", "error");
  if (cal) out += fmt::format(" {:>12} {:>9}", "after (us)", "error");
  out += "\n";
  std::vector<double> before_errors, after_errors;
  for (const MeasuredPoint& p : points) {
    const double before = simulate_point(p, {});
    before_errors.push_back(error_percent(before, p.time_s));
    out += fmt::format("{:<24} {:<14} {:>12}  {:<22} {:>13.3f} {:>12.3f} {:>+8.1f}%", p.where(), kind_name(p.kind),
                       p.bytes, fmt::format("{} {} {}", p.hardware, p.topology, p.axes), p.time_s * 1e6, before * 1e6,
                       before_errors.back());
    if (cal) {
      const double after = simulate_point(p, cal->fabric);
      after_errors.push_back(error_percent(after, p.time_s));
      out += fmt::format(" {:>12.3f} {:>+8.1f}%", after * 1e6, after_errors.back());
    }
    out += "\n";
  }
  out += fmt::format("median |error| over {} points: {:.1f} % before", points.size(), median_abs(before_errors));
  if (cal) out += fmt::format(", {:.1f} % after calibration", median_abs(after_errors));
  return out + "\n";
}

}  // namespace meshsim::calibrate
