#include "calibrate/fit_fabric.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "base/error.hpp"
#include "driver/costs.hpp"
#include "driver/simulate.hpp"

namespace meshsim::calibrate {

namespace {

using workloads::FabricLevel;

// One fitted term. Latency-like terms (a hop latency, a fixed cost) are seconds
// >= 0; a level's slowness is 1 / efficiency (service times scale with it).
struct Term {
  enum class What { HopLatency, Slowness, FixedCost } what;
  FabricLevel level;
  OpKind kind = OpKind::AllReduce;  // FixedCost
  std::string name() const {
    switch (what) {
      case What::HopLatency:
        return fmt::format("the {} hop latency", workloads::level_name(level));
      case What::Slowness:
        return fmt::format("the {} link efficiency", workloads::level_name(level));
      case What::FixedCost:
        break;
    }
    return fmt::format("the {} fixed cost of {}", workloads::level_name(level), kind_name(kind));
  }
};

// The levels whose links a point's collective uses.
std::vector<FabricLevel> levels_used(const workloads::Workload& w, FabricLevel outer) {
  if (!w.hardware.gpu) return {outer};
  if (outer == FabricLevel::Nic) return {FabricLevel::Nvlink, FabricLevel::Nic};
  return {FabricLevel::Nvlink};
}

Tick& latency_of(workloads::Hardware& hw, FabricLevel level) {
  switch (level) {
    case FabricLevel::Ici:
      return hw.ici.latency;
    case FabricLevel::Dcn:
      return hw.dcn.latency;
    case FabricLevel::Nvlink:
      return hw.nvlink.latency;
    case FabricLevel::Nic:
      break;
  }
  return hw.nic.latency;
}

void set_terms(workloads::Hardware& hw, const std::vector<Term>& terms, const Eigen::VectorXd& x) {
  for (std::size_t j = 0; j < terms.size(); ++j) {
    const Term& t = terms[j];
    const double v = x(static_cast<Eigen::Index>(j));
    const auto level = static_cast<std::size_t>(t.level);
    switch (t.what) {
      case Term::What::HopLatency:
        latency_of(hw, t.level) = tick_from_seconds(v);
        if (t.level == FabricLevel::Nic) hw.spine.latency = tick_from_seconds(v);
        break;
      case Term::What::Slowness:
        hw.link_efficiency[level] = 1.0 / v;
        break;
      case Term::What::FixedCost:
        hw.fixed_cost[level][static_cast<std::size_t>(t.kind)] = tick_from_seconds(v);
        break;
    }
  }
  workloads::apply_link_efficiency(hw);
}

double simulate_time(const workloads::Workload& w) {
  const driver::RunResult r = driver::simulate(w);
  return r.ops.front().time().seconds();
}

struct Point {
  const MeasuredPoint* measured;
  workloads::Workload workload;
  FabricLevel outer;
};

class Fitter {
 public:
  explicit Fitter(std::span<const MeasuredPoint> points) {
    for (const MeasuredPoint& m : points) {
      workloads::Workload w = point_workload(m);
      const FabricLevel outer = driver::comm_level(w.ops.front(), w.make_system());
      points_.push_back({&m, std::move(w), outer});
    }
    const std::string& preset = points_.front().workload.hardware.preset;
    for (const Point& p : points_)
      if (p.workload.hardware.preset != preset)
        throw InputError(p.measured->file, p.measured->pointer,
                         fmt::format("a point on {} among points on {}: calibrate one hardware at a time",
                                     p.workload.hardware.preset, preset));
    std::map<std::pair<int, int>, bool> fixed;
    std::vector<FabricLevel> levels;
    for (const Point& p : points_) {
      for (FabricLevel l : levels_used(p.workload, p.outer))
        if (std::find(levels.begin(), levels.end(), l) == levels.end()) levels.push_back(l);
      fixed[{static_cast<int>(p.outer), static_cast<int>(p.workload.ops.front().kind)}] = true;
    }
    std::sort(levels.begin(), levels.end());
    for (FabricLevel l : levels) {
      terms_.push_back({Term::What::HopLatency, l});
      terms_.push_back({Term::What::Slowness, l});
    }
    for (const auto& [key, unused] : fixed)
      terms_.push_back({Term::What::FixedCost, static_cast<FabricLevel>(key.first), static_cast<OpKind>(key.second)});
    x_ = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(terms_.size()));
    const workloads::Hardware& hw = points_.front().workload.hardware;
    for (std::size_t j = 0; j < terms_.size(); ++j) {
      const Term& t = terms_[j];
      if (t.what == Term::What::HopLatency) {
        workloads::Hardware start = hw;  // the preset's latency is where the fit starts
        x_(static_cast<Eigen::Index>(j)) = latency_of(start, t.level).seconds();
      }
      if (t.what == Term::What::Slowness)  // the preset's efficiency (NVLink: NCCL's payload rate)
        x_(static_cast<Eigen::Index>(j)) = 1.0 / workloads::preset_link_efficiency(hw, t.level);
    }
    free_.assign(terms_.size(), true);
  }

  FabricFit run() {
    FabricFit out;
    const std::size_t n = points_.size();
    const Eigen::VectorXd start = x_;
    Eigen::VectorXd before = times(x_);
    Eigen::MatrixXd jac = jacobian(x_, before);
    check_determined(jac, out.notes);
    Eigen::VectorXd now = before;
    if (start_at_line_rate()) {
      now = times(x_);
      jac = jacobian(x_, now);
    }
    out.iterations = descend(jac, now);
    check_efficiency();
    jac = jacobian(x_, now);
    Eigen::VectorXd error = standard_errors(jac, now);
    if (keep_loose_hop_latencies(error, start, out.notes)) {  // fit the rest again without them
      now = times(x_);
      jac = jacobian(x_, now);
      out.iterations += descend(jac, now);
      check_efficiency();
      jac = jacobian(x_, now);
      error = standard_errors(jac, now);
    }
    out.levels = level_fits(error, now);
    for (LevelFit& f : out.levels) share_fixed_costs(f, out.notes);
    for (std::size_t i = 0; i < n; ++i) {
      const auto row = static_cast<Eigen::Index>(i);
      out.points.push_back({points_[i].measured->time_s, before(row), now(row)});
    }
    out.simulations = simulations_;
    return out;
  }

 private:
  Eigen::Index size() const { return static_cast<Eigen::Index>(terms_.size()); }

  // The descent starts each fitted efficiency at the line rate (the bound it
  // cannot pass); "before" and what is kept are the preset's. From the preset's
  // NVLink payload rate (0.824) the steps stop in a worse optimum on the bundled
  // log (rms 11.1 % against 9.2 %): the protocol NCCL's model picks jumps with
  // the terms, so Gauss-Newton depends on where it starts. Returns whether any
  // term moved.
  bool start_at_line_rate() {
    bool moved = false;
    for (Eigen::Index j = 0; j < size(); ++j)
      if (terms_[static_cast<std::size_t>(j)].what == Term::What::Slowness && free_[static_cast<std::size_t>(j)] &&
          x_(j) != 1.0) {
        x_(j) = 1.0;
        moved = true;
      }
    return moved;
  }

  // Gauss-Newton steps from x_ (halved until the cost falls); `now` holds the
  // simulated times at x_, `jac` their sensitivities. Returns the steps taken.
  int descend(Eigen::MatrixXd& jac, Eigen::VectorXd& now) {
    double cost = cost_of(now);
    int it = 0;
    for (; it < 30; ++it) {
      const Eigen::VectorXd step = solve_step(jac, now);
      double scale = 1.0;
      Eigen::VectorXd next_x, next_t;
      double next_cost = cost;
      for (int halvings = 0; halvings < 12; ++halvings, scale /= 2) {
        next_x = clamp(x_ + scale * step);
        next_t = times(next_x);
        next_cost = cost_of(next_t);
        if (next_cost <= cost) break;
      }
      if (next_cost > cost) break;  // no step improves: converged to the rounding of integer picoseconds
      const double moved = relative_change(x_, next_x);
      x_ = next_x;
      now = next_t;
      cost = next_cost;
      if (moved < 1e-9) break;
      jac = jacobian(x_, now);
    }
    return it + 1;
  }

  // A hop latency the fit leaves uncertain by more than a tenth of its value
  // while fixed costs are fitted beside it: on one ring length a hop's latency
  // and a fixed cost both add a constant to every size, and only the latency's
  // share of the pipelined steps tells them apart, which noise hides. Such a
  // latency is put back at the preset's value, with a note; the caller refits.
  bool keep_loose_hop_latencies(const Eigen::VectorXd& error, const Eigen::VectorXd& start,
                                std::vector<std::string>& notes) {
    constexpr double kLoose = 0.1;
    bool fixed_costs = false;
    for (std::size_t j = 0; j < terms_.size(); ++j)
      fixed_costs = fixed_costs || (terms_[j].what == Term::What::FixedCost && free_[j]);
    bool kept = false;
    for (Eigen::Index j = 0; j < size() && fixed_costs; ++j) {
      const Term& t = terms_[static_cast<std::size_t>(j)];
      if (t.what != Term::What::HopLatency || !free_[static_cast<std::size_t>(j)]) continue;
      if (!(error(j) > kLoose * x_(j))) continue;
      notes.push_back(fmt::format(
          "{} is kept at the preset's {:.4g} s: the points put it at {:.4g} s ± {:.2g} ({}), which they cannot tell "
          "from the fixed costs (measure the collective over two axis lengths or rank counts to separate them)",
          t.name(), start(j), x_(j), error(j),
          x_(j) > 0 ? fmt::format("± {:.0f} %", 100 * error(j) / x_(j)) : std::string("at the bound 0")));
      free_[static_cast<std::size_t>(j)] = false;
      x_(j) = start(j);
      kept = true;
    }
    return kept;
  }

  Eigen::VectorXd times(const Eigen::VectorXd& x) {
    Eigen::VectorXd t(static_cast<Eigen::Index>(points_.size()));
    for (std::size_t i = 0; i < points_.size(); ++i) t(static_cast<Eigen::Index>(i)) = simulate_at(points_[i], x);
    return t;
  }

  double simulate_at(const Point& p, const Eigen::VectorXd& x) {
    workloads::Workload w = p.workload;
    set_terms(w.hardware, terms_, x);
    ++simulations_;
    return simulate_time(w);
  }

  // d(time)/d(term) per point: a fixed cost adds exactly (every chip pays it
  // before its first transfer); the other terms by a forward difference.
  Eigen::MatrixXd jacobian(const Eigen::VectorXd& x, const Eigen::VectorXd& t) {
    Eigen::MatrixXd jac = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(points_.size()), size());
    for (Eigen::Index j = 0; j < size(); ++j) {
      const Term& term = terms_[static_cast<std::size_t>(j)];
      for (std::size_t i = 0; i < points_.size(); ++i) {
        const Point& p = points_[i];
        const auto row = static_cast<Eigen::Index>(i);
        if (term.what == Term::What::FixedCost) {
          jac(row, j) = p.outer == term.level && p.workload.ops.front().kind == term.kind ? 1.0 : 0.0;
          continue;
        }
        const std::vector<FabricLevel> used = levels_used(p.workload, p.outer);
        if (std::find(used.begin(), used.end(), term.level) == used.end()) continue;
        const double h = term.what == Term::What::HopLatency ? std::max(1e-9, 1e-3 * x(j)) : 1e-3 * x(j);
        Eigen::VectorXd moved = x;
        moved(j) += h;
        jac(row, j) = (simulate_at(p, moved) - t(row)) / h;
      }
    }
    return jac;
  }

  double cost_of(const Eigen::VectorXd& t) const {
    double c = 0;
    for (std::size_t i = 0; i < points_.size(); ++i) {
      const double m = points_[i].measured->time_s;
      const double r = (t(static_cast<Eigen::Index>(i)) - m) / m;
      c += r * r;
    }
    return c;
  }

  Eigen::MatrixXd weighted(const Eigen::MatrixXd& jac) const {
    Eigen::MatrixXd a = jac;
    for (std::size_t i = 0; i < points_.size(); ++i) a.row(static_cast<Eigen::Index>(i)) /= points_[i].measured->time_s;
    return a;
  }

  std::vector<Eigen::Index> free_columns() const {
    std::vector<Eigen::Index> cols;
    for (Eigen::Index j = 0; j < size(); ++j)
      if (free_[static_cast<std::size_t>(j)]) cols.push_back(j);
    return cols;
  }

  // The Gauss-Newton step over the free terms (columns scaled to unit norm).
  Eigen::VectorXd solve_step(const Eigen::MatrixXd& jac, const Eigen::VectorXd& t) const {
    const Eigen::MatrixXd a = weighted(jac);
    Eigen::VectorXd r(static_cast<Eigen::Index>(points_.size()));
    for (std::size_t i = 0; i < points_.size(); ++i) {
      const double m = points_[i].measured->time_s;
      r(static_cast<Eigen::Index>(i)) = (m - t(static_cast<Eigen::Index>(i))) / m;
    }
    const std::vector<Eigen::Index> cols = free_columns();
    Eigen::MatrixXd sub(a.rows(), static_cast<Eigen::Index>(cols.size()));
    Eigen::VectorXd scale(static_cast<Eigen::Index>(cols.size()));
    for (std::size_t k = 0; k < cols.size(); ++k) {
      const auto c = static_cast<Eigen::Index>(k);
      sub.col(c) = a.col(cols[k]);
      scale(c) = sub.col(c).norm() > 0 ? sub.col(c).norm() : 1.0;
      sub.col(c) /= scale(c);
    }
    const Eigen::VectorXd s = sub.colPivHouseholderQr().solve(r);
    Eigen::VectorXd step = Eigen::VectorXd::Zero(size());
    for (std::size_t k = 0; k < cols.size(); ++k)
      step(cols[k]) = s(static_cast<Eigen::Index>(k)) / scale(static_cast<Eigen::Index>(k));
    return step;
  }

  // Latencies and fixed costs stay >= 0; slowness above 0 (efficiency is checked at the end).
  Eigen::VectorXd clamp(Eigen::VectorXd x) const {
    for (Eigen::Index j = 0; j < size(); ++j) {
      if (terms_[static_cast<std::size_t>(j)].what == Term::What::Slowness)
        x(j) = std::max(x(j), 0.05);
      else
        x(j) = std::max(x(j), 0.0);
    }
    return x;
  }

  static double relative_change(const Eigen::VectorXd& a, const Eigen::VectorXd& b) {
    double m = 0;
    for (Eigen::Index j = 0; j < a.size(); ++j)
      m = std::max(m, std::abs(a(j) - b(j)) / std::max({std::abs(a(j)), std::abs(b(j)), 1e-12}));
    return m;
  }

  // Keeps what the points cannot determine at the preset's value (a fixed cost
  // at 0), with a note saying why and what to measure; refuses only when they
  // determine nothing, or too little for the terms left. A hop latency the
  // points cannot tell from the fixed costs is kept too.
  void check_determined(const Eigen::MatrixXd& jac, std::vector<std::string>& notes) {
    const Eigen::MatrixXd a = weighted(jac);
    std::vector<std::string> undetermined;
    for (Eigen::Index j = 0; j < size(); ++j) {
      const Term& t = terms_[static_cast<std::size_t>(j)];
      std::string why;
      if (t.what == Term::What::Slowness) {
        const double share = (a.col(j) * x_(j)).cwiseAbs().maxCoeff();
        if (share < 0.2)
          why = fmt::format("bandwidth is at most {:.1f} % of any measured time (add larger messages to fit it)",
                            100 * share);
      } else {
        // 10 us of a latency-like term (NCCL's are some 5 to 100 us) must move
        // some measured time by 1 %: one of at most a millisecond.
        const double per_us = (a.col(j) * 1e-6).cwiseAbs().maxCoeff();
        if (per_us < 0.001)
          why = fmt::format(
              "1 us of it changes no measured time by more than {:.3f} % (add smaller messages to fit "
              "it)",
              100 * per_us);
      }
      if (why.empty()) continue;
      free_[static_cast<std::size_t>(j)] = false;
      undetermined.push_back(fmt::format("the points cannot determine {}: {}", t.name(), why));
      notes.push_back(fmt::format(
          "{} is kept at the preset's {}: {}", t.name(),
          t.what == Term::What::Slowness ? fmt::format("{:.4g}", 1 / x_(j)) : fmt::format("{:.4g} s", x_(j)), why));
    }
    if (free_columns().empty()) throw Error(fmt::format("{}; nothing is left to fit", fmt::join(undetermined, "; ")));
    const auto condition = [&](const std::vector<Eigen::Index>& cols) {
      Eigen::MatrixXd sub(a.rows(), static_cast<Eigen::Index>(cols.size()));
      for (std::size_t k = 0; k < cols.size(); ++k) {
        const auto c = static_cast<Eigen::Index>(k);
        sub.col(c) = a.col(cols[k]) / a.col(cols[k]).norm();
      }
      const Eigen::JacobiSVD<Eigen::MatrixXd> svd(sub);
      const Eigen::VectorXd sv = svd.singularValues();
      return sv(sv.size() - 1) > 0 ? sv(0) / sv(sv.size() - 1) : std::numeric_limits<double>::infinity();
    };
    constexpr double kMaxCondition = 1e4;
    if (condition(free_columns()) > kMaxCondition) {
      for (Eigen::Index j = 0; j < size(); ++j) {
        const Term& t = terms_[static_cast<std::size_t>(j)];
        if (t.what != Term::What::HopLatency) continue;
        free_[static_cast<std::size_t>(j)] = false;
        notes.push_back(fmt::format("{} is kept at the preset's {:.4g} s: the points cannot tell it from the fixed "
                                    "costs (measure a second shape, rank count or kind to fit it)",
                                    t.name(), x_(j)));
      }
    }
    const std::vector<Eigen::Index> cols = free_columns();
    if (points_.size() < cols.size() + 1)
      throw Error(fmt::format("{} points cannot determine {} terms ({}): measure more sizes", points_.size(),
                              cols.size() + 0, describe(cols)));
    if (condition(cols) > kMaxCondition)
      throw Error(fmt::format("the points cannot tell apart {}: vary the message sizes, shapes or kinds",
                              describe(cols)));
  }

  std::string describe(const std::vector<Eigen::Index>& cols) const {
    std::string s;
    for (std::size_t k = 0; k < cols.size(); ++k)
      s += (k == 0 ? "" : k + 1 == cols.size() ? " and " : ", ") + terms_[static_cast<std::size_t>(cols[k])].name();
    return s;
  }

  void check_efficiency() const {
    for (Eigen::Index j = 0; j < size(); ++j) {
      const Term& t = terms_[static_cast<std::size_t>(j)];
      if (t.what == Term::What::Slowness && x_(j) < 1.0 - 1e-9)
        throw Error(fmt::format("the measured times put {} at {:.3f}, above the {} peak: check the preset and that "
                                "bytes are counted as docs/CALIBRATION.md says",
                                t.name(), 1.0 / x_(j), points_.front().workload.hardware.preset));
    }
  }

  // sigma^2 (A^T A)^-1 over the free terms, sigma^2 = residual sum / (points - terms).
  Eigen::VectorXd standard_errors(const Eigen::MatrixXd& jac, const Eigen::VectorXd& t) const {
    const std::vector<Eigen::Index> cols = free_columns();
    const Eigen::MatrixXd a = weighted(jac);
    Eigen::MatrixXd sub(a.rows(), static_cast<Eigen::Index>(cols.size()));
    for (std::size_t k = 0; k < cols.size(); ++k) sub.col(static_cast<Eigen::Index>(k)) = a.col(cols[k]);
    const double dof = static_cast<double>(points_.size() - cols.size());
    const double sigma2 = cost_of(t) / dof;
    const Eigen::MatrixXd cov = sigma2 * (sub.transpose() * sub).inverse();
    Eigen::VectorXd error = Eigen::VectorXd::Zero(size());
    for (std::size_t k = 0; k < cols.size(); ++k)
      error(cols[k]) = std::sqrt(std::max(0.0, cov(static_cast<Eigen::Index>(k), static_cast<Eigen::Index>(k))));
    return error;
  }

  std::vector<LevelFit> level_fits(const Eigen::VectorXd& error, const Eigen::VectorXd& t) const {
    std::vector<LevelFit> out;
    const auto level_entry = [&](FabricLevel level) -> LevelFit& {
      for (LevelFit& f : out)
        if (f.level == level) return f;
      LevelFit f;
      f.level = level;
      f.preset = points_.front().workload.hardware.preset;
      out.push_back(f);
      return out.back();
    };
    for (Eigen::Index j = 0; j < size(); ++j) {
      const Term& term = terms_[static_cast<std::size_t>(j)];
      LevelFit& f = level_entry(term.level);
      switch (term.what) {
        case Term::What::HopLatency:
          f.hop_latency_s = x_(j);
          f.hop_latency_error_s = error(j);
          f.hop_latency_fitted = free_[static_cast<std::size_t>(j)];
          break;
        case Term::What::Slowness:
          f.efficiency = 1.0 / x_(j);
          f.efficiency_error = error(j) / (x_(j) * x_(j));
          f.efficiency_fitted = free_[static_cast<std::size_t>(j)];
          break;
        case Term::What::FixedCost:
          f.fixed_cost.push_back({term.kind, x_(j), error(j), free_[static_cast<std::size_t>(j)]});
          break;
      }
    }
    // Each level's residuals over the points that reach it (their outermost level).
    for (LevelFit& f : out) {
      std::vector<double> rel;
      for (std::size_t i = 0; i < points_.size(); ++i) {
        const std::vector<FabricLevel> used = levels_used(points_[i].workload, points_[i].outer);
        if (std::find(used.begin(), used.end(), f.level) == used.end()) continue;
        const double m = points_[i].measured->time_s;
        rel.push_back((t(static_cast<Eigen::Index>(i)) - m) / m);
      }
      f.quality.points = rel.size();
      double sum = 0, most = 0;
      for (double r : rel) sum += r * r, most = std::max(most, std::abs(r));
      f.quality.rms_relative_residual = rel.empty() ? 0 : std::sqrt(sum / static_cast<double>(rel.size()));
      f.quality.max_relative_residual = most;
    }
    std::sort(out.begin(), out.end(), [](const LevelFit& a, const LevelFit& b) { return a.level < b.level; });
    return out;
  }

  // A kind the points do not measure, or whose fixed cost they cannot see (no
  // small messages), takes the mean of the level's fitted fixed costs: NCCL's
  // base latency is per algorithm and protocol, not per kind, and the launch and
  // synchronisation a fixed cost stands for are one kernel path for every
  // collective (and send), so an all-gather's predicts a reduce-scatter's floor.
  static void share_fixed_costs(LevelFit& f, std::vector<std::string>& notes) {
    double sum = 0;
    int fitted = 0;
    std::vector<std::string> measured;
    for (const LevelFit::Fixed& x : f.fixed_cost) {
      if (!x.fitted) continue;
      sum += x.seconds;
      ++fitted;
      measured.push_back(fmt::format("{}'s", kind_name(x.kind)));
    }
    if (fitted == 0) return;
    const double mean = sum / fitted;
    std::vector<std::string> shared;
    for (OpKind k : {OpKind::AllGather, OpKind::ReduceScatter, OpKind::AllReduce, OpKind::AllToAll, OpKind::Send}) {
      auto it = std::find_if(f.fixed_cost.begin(), f.fixed_cost.end(), [k](const auto& x) { return x.kind == k; });
      if (it != f.fixed_cost.end() && it->fitted) continue;
      if (it == f.fixed_cost.end()) it = f.fixed_cost.insert(f.fixed_cost.end(), LevelFit::Fixed{.kind = k});
      *it = {k, mean, 0, false, true};
      shared.emplace_back(kind_name(k));
    }
    std::sort(f.fixed_cost.begin(), f.fixed_cost.end(), [](const auto& a, const auto& b) { return a.kind < b.kind; });
    notes.push_back(fmt::format(
        "the {} fixed cost of {} (no points that show it) is {}{}: one launch and synchronisation path for every "
        "kind",
        workloads::level_name(f.level), fmt::join(shared, ", "), fitted == 1 ? "" : "the mean of ",
        fmt::join(measured, " and ")));
  }

  std::vector<Point> points_;
  std::vector<Term> terms_;
  std::vector<bool> free_;
  Eigen::VectorXd x_;
  std::size_t simulations_ = 0;
};

}  // namespace

FabricFit fit_fabric(std::span<const MeasuredPoint> points) {
  if (points.empty()) throw Error("no measured points to fit");
  return Fitter(points).run();
}

double simulate_point(const MeasuredPoint& p, std::span<const LevelFit> levels) {
  workloads::Workload w = point_workload(p);
  Calibration c;
  c.fabric.assign(levels.begin(), levels.end());
  apply_calibration(w, c);
  return simulate_time(w);
}

}  // namespace meshsim::calibrate
