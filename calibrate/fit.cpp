#include "calibrate/fit.hpp"

#include <fmt/format.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.hpp"

namespace meshsim::calibrate {

double matmul_flops(const MatmulPoint& p) {
  return 2.0 * static_cast<double>(p.m) * static_cast<double>(p.k) * static_cast<double>(p.n);
}

double matmul_hbm_bytes(const MatmulPoint& p) {
  const double m = static_cast<double>(p.m), k = static_cast<double>(p.k), n = static_cast<double>(p.n);
  return (m * k + k * n + m * n) * static_cast<double>(p.element_bytes);
}

RingTerms ring_terms(OpKind kind, int ranks, std::uint64_t bytes) {
  const double n = ranks, v = static_cast<double>(bytes);
  switch (kind) {
    case OpKind::AllGather:
    case OpKind::ReduceScatter:
      return {n - 1, (n - 1) / n * v};
    case OpKind::AllReduce:
      return {2 * (n - 1), 2 * (n - 1) / n * v};
    case OpKind::AllToAll:
      return {1, (n - 1) * v / (n * n)};
    case OpKind::Send:
      return {1, v};
    case OpKind::Matmul:
    case OpKind::Elementwise:
      break;
  }
  MESHSIM_ASSERT(false, "ring_terms of a matmul");
  return {};
}

namespace {

struct Solution {
  Eigen::VectorXd coef;
  FitQuality quality;
};

// min sum_i ((offset_i + x_i . c - t_i) / t_i)^2 subject to c >= 0 (no
// offsets: all 0): the best of the unconstrained solutions over every subset of
// the columns whose coefficients all come out non-negative (at most 4 columns:
// 15 subsets).
Solution relative_nnls(const Eigen::MatrixXd& x, const Eigen::VectorXd& t, const char* what,
                       const Eigen::VectorXd* offset = nullptr) {
  const Eigen::Index rows = x.rows(), cols = x.cols();
  if (rows < cols + 1)
    throw Error(fmt::format("{}: {} measurements cannot determine {} parameters", what, rows, cols));
  for (Eigen::Index i = 0; i < rows; ++i)
    if (!(t(i) > 0) || !std::isfinite(t(i))) throw Error(fmt::format("{}: measured time {} is not positive", what, t(i)));
  Eigen::MatrixXd a = x;
  for (Eigen::Index i = 0; i < rows; ++i) a.row(i) /= t(i);
  // The target of each relative row: 1, less the share of t_i the offset explains.
  Eigen::VectorXd target = Eigen::VectorXd::Ones(rows);
  if (offset) target -= offset->cwiseQuotient(t);
  // Scale the columns so that the solve is well conditioned (flops ~ 1e12, latency terms ~ 1).
  Eigen::VectorXd scale(cols);
  for (Eigen::Index c = 0; c < cols; ++c) {
    const double norm = a.col(c).norm();
    scale(c) = norm > 0 ? norm : 1.0;
    a.col(c) /= scale(c);
  }
  double best_cost = std::numeric_limits<double>::infinity();
  Eigen::VectorXd best = Eigen::VectorXd::Zero(cols);
  for (unsigned mask = 1; mask < (1u << cols); ++mask) {
    std::vector<Eigen::Index> used;
    for (Eigen::Index c = 0; c < cols; ++c)
      if (mask & (1u << c)) used.push_back(c);
    Eigen::MatrixXd sub(rows, static_cast<Eigen::Index>(used.size()));
    for (std::size_t u = 0; u < used.size(); ++u) sub.col(static_cast<Eigen::Index>(u)) = a.col(used[u]);
    const Eigen::VectorXd s = sub.colPivHouseholderQr().solve(target);
    if ((s.array() < 0).any() || !s.allFinite()) continue;
    const double cost = (sub * s - target).squaredNorm();
    if (cost < best_cost) {
      best_cost = cost;
      best.setZero();
      for (std::size_t u = 0; u < used.size(); ++u) best(used[u]) = s(static_cast<Eigen::Index>(u));
    }
  }
  if (!std::isfinite(best_cost)) throw Error(fmt::format("{}: no non-negative fit exists", what));
  Solution sol;
  sol.coef = best.cwiseQuotient(scale);
  Eigen::VectorXd model = x * sol.coef;
  if (offset) model += *offset;
  const Eigen::VectorXd rel = (model - t).cwiseQuotient(t);
  sol.quality.points = static_cast<std::uint64_t>(rows);
  sol.quality.rms_relative_residual = std::sqrt(rel.squaredNorm() / static_cast<double>(rows));
  sol.quality.max_relative_residual = rel.cwiseAbs().maxCoeff();
  return sol;
}

double rate_of(double seconds_per_unit) {
  return seconds_per_unit > 1.0 / kUnboundedRate ? 1.0 / seconds_per_unit : kUnboundedRate;
}

LinkFit fit_terms(std::span<const CollectivePoint> points, const char* what, Solution& sol) {
  Eigen::MatrixXd x(static_cast<Eigen::Index>(points.size()), 2);
  Eigen::VectorXd t(static_cast<Eigen::Index>(points.size())), fixed(static_cast<Eigen::Index>(points.size()));
  for (std::size_t i = 0; i < points.size(); ++i) {
    const RingTerms r = ring_terms(points[i].kind, points[i].ranks, points[i].bytes);
    const auto row = static_cast<Eigen::Index>(i);
    x(row, 0) = r.steps;
    x(row, 1) = r.wire_bytes;
    t(row) = points[i].time_s;
    fixed(row) = points[i].fixed_s;
  }
  sol = relative_nnls(x, t, what, &fixed);
  LinkFit f;
  f.step_latency_s = sol.coef(0);
  f.bandwidth_bytes_per_s = rate_of(sol.coef(1));
  f.quality = sol.quality;
  return f;
}

}  // namespace

MatmulFit fit_matmul(const std::string& dtype, std::span<const MatmulPoint> points, int sms) {
  Eigen::MatrixXd x(static_cast<Eigen::Index>(points.size()), sms > 0 ? 4 : 3);
  Eigen::VectorXd t(static_cast<Eigen::Index>(points.size()));
  for (std::size_t i = 0; i < points.size(); ++i) {
    const auto row = static_cast<Eigen::Index>(i);
    x(row, 0) = 1.0;
    x(row, 1) = matmul_flops(points[i]);
    x(row, 2) = matmul_hbm_bytes(points[i]);
    if (sms > 0) x(row, 3) = kernels::wave_flops(points[i].m, points[i].k, points[i].n, sms);
    t(row) = points[i].time_s;
  }
  const std::string what = dtype + " matmul fit";
  const Solution sol = relative_nnls(x, t, what.c_str());
  MatmulFit f;
  f.dtype = dtype;
  f.launch_s = sol.coef(0);
  f.flops_per_s = rate_of(sol.coef(1));
  f.hbm_bytes_per_s = rate_of(sol.coef(2));
  if (sms > 0) {
    f.sms = sms;
    f.wave_flops_per_s = rate_of(sol.coef(3));
  }
  f.quality = sol.quality;
  return f;
}

HbmFit fit_hbm(std::span<const CopyPoint> points) {
  Eigen::MatrixXd x(static_cast<Eigen::Index>(points.size()), 2);
  Eigen::VectorXd t(static_cast<Eigen::Index>(points.size()));
  for (std::size_t i = 0; i < points.size(); ++i) {
    const auto row = static_cast<Eigen::Index>(i);
    x(row, 0) = 1.0;
    x(row, 1) = 2.0 * static_cast<double>(points[i].bytes);
    t(row) = points[i].time_s;
  }
  const Solution sol = relative_nnls(x, t, "HBM copy fit");
  HbmFit f;
  f.latency_s = sol.coef(0);
  f.bandwidth_bytes_per_s = rate_of(sol.coef(1));
  f.quality = sol.quality;
  return f;
}

LinkFit fit_link(Level level, std::span<const CollectivePoint> points) {
  std::vector<CollectivePoint> mine;
  for (const CollectivePoint& p : points)
    if (p.level == level) mine.push_back(p);
  const std::string what = fmt::format("{} link fit", level_name(level));
  Solution sol;
  LinkFit f = fit_terms(mine, what.c_str(), sol);
  f.level = level;
  return f;
}

CollectiveFit fit_collective(OpKind kind, Level level, int ranks, std::span<const CollectivePoint> points) {
  std::vector<CollectivePoint> mine;
  for (const CollectivePoint& p : points)
    if (p.kind == kind && p.level == level && p.ranks == ranks) mine.push_back(p);
  const std::string what = fmt::format("{} fit ({} ranks, {})", kind_name(kind), ranks, level_name(level));
  Solution sol;
  const LinkFit l = fit_terms(mine, what.c_str(), sol);
  CollectiveFit f;
  f.kind = kind;
  f.level = level;
  f.ranks = ranks;
  f.step_latency_s = l.step_latency_s;
  f.bandwidth_bytes_per_s = l.bandwidth_bytes_per_s;
  f.quality = l.quality;
  return f;
}

double error_percent(double model_s, double measured_s) { return 100.0 * (model_s - measured_s) / measured_s; }

double median_abs(std::vector<double> values) {
  if (values.empty()) return 0;
  for (double& v : values) v = std::abs(v);
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace meshsim::calibrate
