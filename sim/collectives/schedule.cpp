#include "sim/collectives/schedule.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <numeric>
#include <tuple>
#include <utility>

#include "base/error.hpp"

namespace meshsim::collectives {

std::optional<Schedule> parse_schedule(std::string_view name) {
  if (name == "balanced") return Schedule::Balanced;
  if (name == "equal") return Schedule::Equal;
  return std::nullopt;
}

AxesShape product_shape(std::span<const topology::AxisSpec> axes) {
  AxesShape shape;
  const std::size_t n = axes.size();
  for (const topology::AxisSpec& a : axes) {
    MESHSIM_ASSERT(a.size > 1, "axis orders over an axis of size 1");
    shape.ring.push_back(a.wraparound);
    shape.cost.push_back(a.wraparound ? 0.5 : 1.0);
    shape.hop_s.push_back(1.0);
  }
  shape.group.assign(std::size_t{1} << n, 1);
  for (std::size_t mask = 0; mask < shape.group.size(); ++mask)
    for (std::size_t i = 0; i < n; ++i)
      if (mask >> i & 1) shape.group[mask] *= static_cast<std::uint64_t>(axes[i].size);
  return shape;
}

namespace {

// The costs and hop latencies of `axes` on `t` (AxesShape::cost, hop_s), for a
// shape whose rings are known.
void set_costs(const topology::Torus& t, std::span<const int> axes, AxesShape& shape) {
  shape.cost.clear();
  shape.hop_s.clear();
  const double ici = static_cast<double>(t.link_spec().bandwidth_bytes_per_s);
  for (std::size_t i = 0; i < axes.size(); ++i) {
    if (t.switched(axes[i])) {
      shape.cost.push_back(ici / static_cast<double>(t.dcn_spec().bandwidth_bytes_per_s));
      shape.hop_s.push_back(2 * t.dcn_spec().latency.seconds());  // out to the network and in
    } else {
      shape.cost.push_back(shape.ring[i] ? 0.5 : 1.0);
      shape.hop_s.push_back(t.link_spec().latency.seconds());
    }
  }
}

AxesShape torus_axes_shape(const topology::Torus& t, std::span<const int> axes);

}  // namespace

AxesShape axes_shape(const topology::Torus& t, std::span<const int> axes) {
  AxesShape shape = torus_axes_shape(t, axes);
  set_costs(t, axes, shape);
  return shape;
}

namespace {

AxesShape torus_axes_shape(const topology::Torus& t, std::span<const int> axes) {
  const std::size_t n = axes.size();
  // Twisted axes among `axes` whose long axes are not: their chips form lines.
  bool twisted_rings = t.twisted();
  for (int a : axes)
    for (int b = 0; b < t.num_axes(); ++b)
      if (t.twist(a, b) != 0 && std::find(axes.begin(), axes.end(), b) == axes.end()) twisted_rings = false;
  if (!twisted_rings) {
    std::vector<topology::AxisSpec> specs;
    for (int a : axes) specs.push_back({t.axis(a).size, t.axis(a).wraparound && !t.twisted_axis(a)});
    return product_shape(specs);
  }
  // Every axis wraps; a subset spans the chips its links reach from chip 0.
  AxesShape shape;
  shape.ring.assign(n, true);
  shape.group.assign(std::size_t{1} << n, 1);
  std::vector<std::uint32_t> seen(t.num_chips(), 0);
  std::vector<topology::ChipId> queue;
  for (std::size_t mask = 1; mask < shape.group.size(); ++mask) {
    queue.assign(1, 0);
    seen[0] = static_cast<std::uint32_t>(mask);
    for (std::size_t q = 0; q < queue.size(); ++q)
      for (std::size_t i = 0; i < n; ++i) {
        if (!(mask >> i & 1)) continue;
        for (topology::Direction d : {topology::Direction::Plus, topology::Direction::Minus}) {
          const topology::ChipId next = t.neighbor(queue[q], axes[i], d);
          if (next == topology::kNoChip || seen[next] == mask) continue;
          seen[next] = static_cast<std::uint32_t>(mask);
          queue.push_back(next);
        }
      }
    shape.group[mask] = queue.size();
  }
  return shape;
}

}  // namespace

std::vector<int> gather_sizes(const AxesShape& shape, std::span<const int> order) {
  std::vector<int> sizes;
  std::size_t mask = 0;
  for (int a : order) {
    const std::uint64_t before = shape.group[mask];
    mask |= std::size_t{1} << a;
    MESHSIM_ASSERT(shape.group[mask] % before == 0, "a group that is not a union of its subgroup's cosets");
    sizes.push_back(static_cast<int>(shape.group[mask] / before));
  }
  return sizes;
}

namespace detail {

namespace {

// Solves m x = rhs (m square, row-major) by Gaussian elimination with partial
// pivoting; nothing if m is singular.
std::optional<std::vector<double>> solve(std::vector<std::vector<double>> m, std::vector<double> rhs) {
  const std::size_t n = m.size();
  for (std::size_t k = 0; k < n; ++k) {
    std::size_t p = k;
    for (std::size_t i = k + 1; i < n; ++i)
      if (std::abs(m[i][k]) > std::abs(m[p][k])) p = i;
    if (std::abs(m[p][k]) < 1e-12) return std::nullopt;
    std::swap(m[p], m[k]);
    std::swap(rhs[p], rhs[k]);
    for (std::size_t i = k + 1; i < n; ++i) {
      const double f = m[i][k] / m[k][k];
      if (f == 0) continue;
      for (std::size_t j = k; j < n; ++j) m[i][j] -= f * m[k][j];
      rhs[i] -= f * rhs[k];
    }
  }
  std::vector<double> x(n, 0.0);
  for (std::size_t k = n; k-- > 0;) {
    double v = rhs[k];
    for (std::size_t j = k + 1; j < n; ++j) v -= m[k][j] * x[j];
    x[k] = v / m[k][k];
  }
  return x;
}

}  // namespace

std::optional<std::vector<double>> maximize(const std::vector<std::vector<double>>& a, std::span<const double> b,
                                            std::span<const double> c) {
  constexpr double kEps = 1e-12, kPivot = 1e-9;
  const std::size_t rows = a.size(), vars = c.size(), cols = vars + rows + 1, rhs = cols - 1;
  // Tableau: one row per constraint (with its slack), then the objective row
  // holding -c (reduced costs); the basis starts at the slacks.
  std::vector<std::vector<double>> t(rows + 1, std::vector<double>(cols, 0.0));
  std::vector<std::size_t> basis(rows);
  for (std::size_t i = 0; i < rows; ++i) {
    MESHSIM_ASSERT(a[i].size() == vars && b[i] >= 0, "simplex: malformed program");
    std::copy(a[i].begin(), a[i].end(), t[i].begin());
    t[i][vars + i] = 1;
    t[i][rhs] = b[i];
    basis[i] = vars + i;
  }
  for (std::size_t j = 0; j < vars; ++j) t[rows][j] = -c[j];
  // The entering column is the one that improves most (Dantzig's rule: few
  // pivots, so little rounding builds up); after a run of degenerate pivots
  // (the programs here are highly degenerate: most right-hand sides are 0) it
  // is the first that improves (Bland's rule, which cannot cycle in exact
  // arithmetic) until the objective moves again. The leaving row is the first
  // (by basic variable) of the tightest ratio. The pivots are capped all the same.
  // A column whose entries are all at most kPivot cannot enter: at an exact
  // optimum of a bounded program such a column has only rounding residue left;
  // one that improves with no bound at all is reported as unbounded.
  constexpr std::size_t kDegenerateRun = 16;
  std::size_t degenerate = 0;
  for (std::size_t pivots = 0;; ++pivots) {
    if (pivots > 100 * (rows + cols)) return std::nullopt;
    const bool bland = degenerate >= kDegenerateRun;
    std::size_t enter = cols;
    bool unbounded = false;
    for (std::size_t j = 0; j < rhs && !(bland && enter != cols); ++j) {
      if (t[rows][j] >= -kEps) continue;
      if (enter != cols && t[rows][j] >= t[rows][enter]) continue;
      double most = 0;
      for (std::size_t i = 0; i < rows; ++i) most = std::max(most, t[i][j]);
      if (most > kPivot)
        enter = j;
      else if (most <= 0)
        unbounded = true;
    }
    if (enter == cols) {
      if (unbounded) return std::nullopt;
      break;
    }
    std::size_t leave = rows;
    double best = 0;
    for (std::size_t i = 0; i < rows; ++i) {
      if (t[i][enter] <= kPivot) continue;
      const double ratio = std::max(0.0, t[i][rhs]) / t[i][enter];
      if (leave == rows || ratio < best - kEps || (ratio <= best + kEps && basis[i] < basis[leave]))
        leave = i, best = ratio;
    }
    degenerate = best <= kEps ? degenerate + 1 : 0;
    const double pivot = t[leave][enter];
    for (double& v : t[leave]) v /= pivot;
    for (std::size_t i = 0; i <= rows; ++i) {
      if (i == leave || t[i][enter] == 0) continue;
      const double f = t[i][enter];
      for (std::size_t j = 0; j < cols; ++j) {
        t[i][j] -= f * t[leave][j];
        if (std::abs(t[i][j]) < kEps) t[i][j] = 0;  // rounding residue, not a coefficient
      }
    }
    basis[leave] = enter;
  }
  // The optimal basis's solution, solved anew from the program itself: the
  // tableau's right-hand side carries the rounding of every pivot.
  std::vector<std::vector<double>> m(rows, std::vector<double>(rows, 0.0));
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t k = 0; k < rows; ++k) m[i][k] = basis[k] < vars ? a[i][basis[k]] : (basis[k] - vars == i ? 1.0 : 0.0);
  const std::optional<std::vector<double>> xb = solve(std::move(m), std::vector<double>(b.begin(), b.end()));
  if (!xb) return std::nullopt;
  std::vector<double> x(vars, 0.0);
  for (std::size_t k = 0; k < rows; ++k) {
    if ((*xb)[k] < -1e-9) return std::nullopt;  // not a feasible basis after all
    if (basis[k] < vars) x[basis[k]] = std::max(0.0, (*xb)[k]);
  }
  return x;
}

namespace {

// The group spanned by the first k axes of `order`.
std::uint64_t prefix_group(const AxesShape& shape, std::span<const int> order, std::size_t k) {
  std::size_t mask = 0;
  for (std::size_t j = 0; j < k; ++j) mask |= std::size_t{1} << order[j];
  return shape.group[mask];
}

// Time of phase `k` of the AllGather in `order`, per unit of V over one link's
// bandwidth: (m - 1) shards of |G_{k-1}| V / P, over the chip's links on that
// axis (two on a ring, one at the end of a line).
double phase_coefficient(const AxesShape& shape, std::span<const int> order, std::size_t k) {
  const double before = static_cast<double>(prefix_group(shape, order, k));
  const double m = static_cast<double>(prefix_group(shape, order, k + 1)) / before;
  const double p = static_cast<double>(shape.group.back());
  return (m - 1) * before / p * shape.cost[static_cast<std::size_t>(order[k])];
}

// Hops of phase `k`: half its ring, or its whole line.
int phase_hops(const AxesShape& shape, std::span<const int> order, std::size_t k) {
  const auto m = static_cast<int>(prefix_group(shape, order, k + 1) / prefix_group(shape, order, k));
  return shape.ring[static_cast<std::size_t>(order[k])] ? m / 2 : m - 1;
}

// Fills in a plan's stage count, lock-step time and latency from its parts.
void measure(const AxesShape& shape, OrderPlan& plan) {
  const std::size_t n = shape.ring.size();
  plan.stages = 0;
  for (int o : plan.offsets) plan.stages = std::max(plan.stages, o + static_cast<int>(n));
  plan.lockstep_time = 0;
  plan.latency_hops = 0;
  plan.latency_s = 0;
  for (int s = 0; s < plan.stages; ++s) {
    std::vector<double> load(n, 0.0);
    int hops = 0;
    double hop_s = 0;
    for (std::size_t i = 0; i < plan.orders.size(); ++i) {
      const int k = s - plan.offsets[i];
      if (k < 0 || k >= static_cast<int>(n)) continue;
      const auto phase = static_cast<std::size_t>(k);
      load[static_cast<std::size_t>(plan.orders[i][phase])] +=
          plan.fractions[i] * phase_coefficient(shape, plan.orders[i], phase);
      const int h = phase_hops(shape, plan.orders[i], phase);
      hops = std::max(hops, h);
      hop_s = std::max(hop_s, h * shape.hop_s[static_cast<std::size_t>(plan.orders[i][phase])]);
    }
    plan.lockstep_time += *std::max_element(load.begin(), load.end());
    plan.latency_hops += hops;
    plan.latency_s += hop_s;
  }
}

OrderPlan equal_plan(const AxesShape& shape) {
  const std::size_t n = shape.ring.size();
  OrderPlan plan;
  plan.equal = true;
  for (std::size_t r = 0; r < n; ++r) {
    std::vector<int> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = static_cast<int>((i + r) % n);
    plan.orders.push_back(std::move(order));
    plan.offsets.push_back(0);
    plan.fractions.push_back(1.0 / static_cast<double>(n));
  }
  measure(shape, plan);
  return plan;
}

}  // namespace

std::optional<OrderPlan> plan_orders(const AxesShape& shape, int max_offset) {
  const std::size_t n = shape.ring.size();
  MESHSIM_ASSERT(n > 0 && shape.group.size() == std::size_t{1} << n && max_offset >= 0, "plan_orders: no axes");

  // Every order of the axes, starting at every stage up to max_offset, is a
  // candidate part.
  std::vector<std::vector<int>> orders;
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  do orders.push_back(order);
  while (std::next_permutation(order.begin(), order.end()));
  struct Candidate {
    std::size_t order;
    int offset;
  };
  std::vector<Candidate> parts;
  for (int d = 0; d <= max_offset; ++d)
    for (std::size_t o = 0; o < orders.size(); ++o) parts.push_back({o, d});
  const std::size_t m = parts.size(), stages = n + static_cast<std::size_t>(max_offset);

  // Variables: f_i (one per candidate), then T_s (one per stage). The program
  // is scaled so that its optimum is 1 / (the lock-step time): maximise sum f
  // subject to (load of axis a in stage s) - T_s <= 0 and sum T <= 1.
  std::vector<std::vector<double>> a;
  std::vector<double> b;
  for (std::size_t s = 0; s < stages; ++s) {
    for (std::size_t axis = 0; axis < n; ++axis) {
      std::vector<double> row(m + stages, 0.0);
      for (std::size_t i = 0; i < m; ++i) {
        const auto k = static_cast<std::ptrdiff_t>(s) - parts[i].offset;
        if (k < 0 || k >= static_cast<std::ptrdiff_t>(n)) continue;
        const std::vector<int>& o = orders[parts[i].order];
        if (static_cast<std::size_t>(o[static_cast<std::size_t>(k)]) == axis)
          row[i] = phase_coefficient(shape, o, static_cast<std::size_t>(k));
      }
      row[m + s] = -1;
      a.push_back(std::move(row));
      b.push_back(0);
    }
  }
  std::vector<double> sum_t(m + stages, 0.0);
  std::fill(sum_t.begin() + static_cast<std::ptrdiff_t>(m), sum_t.end(), 1.0);
  a.push_back(std::move(sum_t));
  b.push_back(1);
  std::vector<double> c(m + stages, 0.0);
  std::fill(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(m), 1.0);
  // The program is bounded (every part loads some stage, and the stages add
  // up to at most 1); a failure can only be rounding, and then this offset
  // gives no plan.
  const std::optional<std::vector<double>> x = maximize(a, b, c);
  if (!x) return std::nullopt;
  double z = 0;
  for (std::size_t i = 0; i < m; ++i) z += (*x)[i];
  if (!(z > 0)) return std::nullopt;

  // Parts too small to matter are dropped (each costs a full set of transfers).
  OrderPlan plan;
  double kept = 0;
  for (std::size_t i = 0; i < m; ++i)
    if ((*x)[i] / z >= 1e-6) kept += (*x)[i];
  for (std::size_t i = 0; i < m; ++i) {
    if ((*x)[i] / z < 1e-6) continue;
    plan.orders.push_back(orders[parts[i].order]);
    plan.offsets.push_back(parts[i].offset);
    plan.fractions.push_back((*x)[i] / kept);
  }
  // Stages no part uses at the start are dropped.
  const int first = *std::min_element(plan.offsets.begin(), plan.offsets.end());
  for (int& o : plan.offsets) o -= first;
  measure(shape, plan);
  return plan;
}

std::vector<OrderPlan> candidate_plans(const AxesShape& shape, Schedule s) {
  const std::size_t n = shape.ring.size();
  std::vector<OrderPlan> plans{equal_plan(shape)};
  if (s == Schedule::Equal || n == 1) return plans;
  for (int d = 0; d < static_cast<int>(n); ++d) {
    std::optional<OrderPlan> plan = plan_orders(shape, d);
    if (!plan) continue;
    // Only plans that move the data faster than every one before them.
    bool better = true;
    for (const OrderPlan& q : plans) better = better && plan->lockstep_time < q.lockstep_time * (1 - 1e-9);
    if (better) plans.push_back(std::move(*plan));
  }
  return plans;
}

}  // namespace detail

const PlanCache::Planned& PlanCache::planned(const topology::Torus& t, std::span<const int> axes, Schedule s) {
  Key key{{},
          t.twisted(),
          std::vector<int>(axes.begin(), axes.end()),
          s,
          t.dcn_axis(),
          {static_cast<std::int64_t>(t.link_spec().bandwidth_bytes_per_s), t.link_spec().latency.ps(),
           static_cast<std::int64_t>(t.dcn_spec().bandwidth_bytes_per_s), t.dcn_spec().latency.ps()}};
  for (const topology::AxisSpec& a : t.axes()) std::get<0>(key).emplace_back(a.size, a.wraparound);
  auto it = planned_.find(key);
  if (it == planned_.end()) {
    Planned p{axes_shape(t, axes), {}};
    p.plans = detail::candidate_plans(p.shape, s);
    it = planned_.emplace(std::move(key), std::move(p)).first;
  }
  return it->second;
}

const detail::OrderPlan& PlanCache::plan(const topology::Torus& t, std::span<const int> axes,
                                         std::uint64_t group_bytes, Schedule s) {
  MESHSIM_ASSERT(!axes.empty(), "axis orders of no axes");
  const std::vector<detail::OrderPlan>& plans = planned(t, axes, s).plans;
  // The plan that finishes first by its lock-step estimate: the data over one
  // link's bandwidth plus a hop latency per hop of every stage (more stages
  // balance the links better but add latency); ties to the earlier plan.
  const double v_over_b = static_cast<double>(group_bytes) / static_cast<double>(t.link_spec().bandwidth_bytes_per_s);
  const detail::OrderPlan* best = &plans.front();
  double best_s = 0;
  for (const detail::OrderPlan& plan : plans) {
    const double est = plan.lockstep_time * v_over_b + plan.latency_s;
    if (&plan == &plans.front() || est < best_s * (1 - 1e-9)) best = &plan, best_s = est;
  }
  return *best;
}

const AxesShape& PlanCache::shape(const topology::Torus& t, std::span<const int> axes) {
  return planned(t, axes, Schedule::Equal).shape;  // the equal split solves no program
}

std::size_t PlanCache::part_bound(const topology::Torus& t, std::span<const int> axes, Schedule s) {
  std::size_t most = 0;
  for (const detail::OrderPlan& plan : planned(t, axes, s).plans) most = std::max(most, plan.orders.size());
  return most;
}

MultiAxisPlan axis_order_parts(const topology::Torus& t, OpKind kind, std::span<const int> axes,
                               std::uint64_t group_bytes, Schedule s) {
  PlanCache plans;
  return plans.parts(t, kind, axes, group_bytes, s);
}

MultiAxisPlan PlanCache::parts(const topology::Torus& t, OpKind kind, std::span<const int> axes,
                               std::uint64_t group_bytes, Schedule s) {
  MESHSIM_ASSERT(kind == OpKind::AllGather || kind == OpKind::ReduceScatter || kind == OpKind::AllReduce,
                 "axis orders for a gather or reduction");
  MultiAxisPlan out;
  if (axes.empty()) return out;
  const detail::OrderPlan& plan = this->plan(t, axes, group_bytes, s);
  out.stages = plan.stages;
  out.lockstep = !plan.equal;
  // The plan's orders are gather orders: a reduction runs them reversed (the
  // same phases, backwards in time, so a part starting at gather stage d
  // starts reducing at stage stages - n - d), except the equal split's
  // rotations, which reduce in rotated order as they always did (on a cube,
  // the same times).
  const bool reversed = !plan.equal && kind != OpKind::AllGather;
  const int n = static_cast<int>(axes.size());
  const AxesShape& shape = planned(t, axes, s).shape;
  const auto part = [&](std::size_t i, std::uint64_t bytes) {
    AxisOrderPart p;
    // The phases of the AllGather whose time-reverse this part is: the plan's
    // order, or (the equal split's reductions) the reverse of the rotation.
    std::vector<int> gather = plan.orders[i];
    if (plan.equal && kind != OpKind::AllGather) std::reverse(gather.begin(), gather.end());
    p.sizes = gather_sizes(shape, gather);
    for (int a : gather) {
      p.order.push_back(axes[static_cast<std::size_t>(a)]);
      p.rings.push_back(shape.ring[static_cast<std::size_t>(a)]);
    }
    if (kind != OpKind::AllGather) {
      std::reverse(p.order.begin(), p.order.end());
      std::reverse(p.sizes.begin(), p.sizes.end());
      std::reverse(p.rings.begin(), p.rings.end());
    }
    p.first_stage = reversed ? plan.stages - n - plan.offsets[i] : plan.offsets[i];
    p.bytes = bytes;
    return p;
  };
  if (plan.equal) {
    const std::uint64_t k = plan.orders.size();
    for (std::size_t i = 0; i < plan.orders.size(); ++i) out.parts.push_back(part(i, (group_bytes + k - 1) / k));
    return out;
  }
  // Cumulative rounding: the parts add up to V exactly.
  const double v = static_cast<double>(group_bytes);
  double cumulative = 0;
  std::uint64_t given = 0;
  for (std::size_t i = 0; i < plan.orders.size(); ++i) {
    cumulative += plan.fractions[i];
    const bool last = i + 1 == plan.orders.size();
    // (in double, which can hold V only approximately: at or past V is V)
    const double x = std::floor(cumulative * v + 0.5);
    const std::uint64_t upto = last || x >= v ? group_bytes : std::min(group_bytes, static_cast<std::uint64_t>(x));
    if (upto <= given) continue;
    out.parts.push_back(part(i, upto - given));
    given = upto;
  }
  return out;
}

}  // namespace meshsim::collectives
