#pragma once
// Fits a fabric's terms to measured collectives by simulating them
// (docs/CALIBRATION.md): per level (ici; nvlink and nic) the hop latency of its
// links and the fraction of their peak bandwidth they achieve, and per level and
// kind a fixed cost paid before every chip's first transfer. The model is the
// simulator itself: each point's time is simulated at the current terms, its
// sensitivity to every term is simulated too (finite differences; the fixed
// cost adds exactly), and Gauss-Newton steps minimise the relative residuals
// sum(((simulated - measured) / measured)^2) with every latency and cost kept
// non-negative. Times emerge from simulated transfers at every step.
#include <span>
#include <string>
#include <vector>

#include "calibrate/calibration.hpp"
#include "calibrate/measured.hpp"

namespace meshsim::calibrate {

struct FabricFit {
  std::vector<LevelFit> levels;  // in FabricLevel order
  struct PointFit {
    double measured_s = 0;
    double before_s = 0;  // simulated on the preset
    double after_s = 0;   // simulated with the fitted terms
  };
  std::vector<PointFit> points;    // in the order given
  std::vector<std::string> notes;  // what the fit kept or could not use, one line each
  int iterations = 0;
  std::size_t simulations = 0;
};

// Throws Error (one line) when the points cannot determine the terms: too few
// points, no point where latency matters (only large messages), none where
// bandwidth does, or terms the points cannot tell apart; and when the fit puts a
// level's links above their peak (the preset or the size convention is wrong).
// All points must be on one hardware preset.
FabricFit fit_fabric(std::span<const MeasuredPoint> points);

// The point simulated alone with the terms of `levels` applied (none: the preset).
double simulate_point(const MeasuredPoint& p, std::span<const LevelFit> levels);

// The fit in words (calibrate --from): each level's terms with their errors, the
// notes, and the five points that fit worst after it. `points` are the fitted ones.
std::string format_fabric_fit(const FabricFit& fit, std::span<const MeasuredPoint> points);

// The comparison of measured points (compare on points or nccl-tests logs): each
// point measured, simulated on the preset and, with `cal`, with its fabric terms;
// the errors in percent and their median.
std::string format_point_comparison(std::span<const MeasuredPoint> points, const Calibration* cal);

}  // namespace meshsim::calibrate
