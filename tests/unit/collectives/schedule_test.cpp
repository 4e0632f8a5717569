// The multi-axis schedules (sim/collectives/schedule.hpp): the simplex, the
// plans, and the balanced schedule's simulated time against the per-chip
// ingress bound on shapes that are not cubes.
#include <catch2/catch.hpp>

#include <numeric>
#include <set>

#include "harness.hpp"
#include "sim/collectives/ring_phase.hpp"
#include "sim/collectives/schedule.hpp"

using namespace meshsim;
using namespace meshsim::test;
using collectives::Schedule;

namespace {

// V (1 - 1/P) over the links into the chip with the fewest (two per ring axis,
// one per line), one-way bandwidth kB; doubled for an AllReduce.
double ingress_bound(const Torus& t, Kind kind, double v) {
  double p = 1, links = 0;
  for (int a = 0; a < t.num_axes(); ++a) {
    p *= t.axis(a).size;
    links += t.axis(a).wraparound ? 2 : 1;
  }
  return (kind == Kind::AllReduce ? 2 : 1) * v * (p - 1) / p / (links * kB);
}

std::vector<int> all_axes(const Torus& t) {
  std::vector<int> axes(static_cast<std::size_t>(t.num_axes()));
  std::iota(axes.begin(), axes.end(), 0);
  return axes;
}

double simulate_with(const Torus& t, Kind kind, std::uint64_t v, Schedule s) {
  const std::vector<int> axes = all_axes(t);
  return run(t, 1, [&](sim::ProgramBuilder& b, const auto& ports) { collectives::build(b, t, kind, axes, v, ports[0], s); })
      .makespan.seconds();
}

}  // namespace

TEST_CASE("Simplex: a small program's optimum; unbounded is reported", "[collectives][schedule]") {
  // max x + y s.t. x + 2y <= 4, 3x + y <= 6: the vertex (1.6, 1.2).
  const auto x = collectives::detail::maximize({{1, 2}, {3, 1}}, std::vector<double>{4, 6}, std::vector<double>{1, 1});
  REQUIRE(x.has_value());
  CHECK((*x)[0] == Approx(1.6));
  CHECK((*x)[1] == Approx(1.2));
  // A degenerate start (b = 0 rows) terminates under Bland's rule.
  const auto d = collectives::detail::maximize({{1, -1}, {-1, 1}, {1, 1}}, std::vector<double>{0, 0, 2},
                                               std::vector<double>{1, 2});
  REQUIRE(d.has_value());
  CHECK((*d)[0] == Approx(1));
  CHECK((*d)[1] == Approx(1));
  CHECK_FALSE(collectives::detail::maximize({{1, -1}}, std::vector<double>{1}, std::vector<double>{1, 1}).has_value());
}

TEST_CASE("Simplex: plans on four axes improve with every start offset allowed (degenerate programs, large costs)",
          "[collectives][schedule]") {
  // Three rings of 4 and a fourth axis of 2 whose phase costs c per shard: the
  // slices of a multislice system are c = B_ICI / B_DCN (14.4 on v5p). Offset d
  // admits every part of offset d - 1, so the optimum can only improve; each
  // plan is measured from its own fractions, so a simplex that ended on
  // rounding (the programs are degenerate, thousands of pivots) would show here.
  for (double c : {0.5, 2.0, 5.0, 14.4}) {
    INFO("cost " << c);
    std::vector<topology::AxisSpec> axes = {{4, true}, {4, true}, {4, true}, {2, true}};
    collectives::AxesShape shape = collectives::product_shape(axes);
    shape.cost[3] = c;
    double before = 1e300;
    for (int d = 0; d < 4; ++d) {
      const auto plan = collectives::detail::plan_orders(shape, d);
      REQUIRE(plan.has_value());
      CHECK(plan->lockstep_time <= before * (1 + 1e-9));
      double sum = 0;
      for (double f : plan->fractions) sum += f;
      CHECK(sum == Approx(1.0));
      before = plan->lockstep_time;
    }
  }
}

TEST_CASE("Schedule plans: cubes keep the equal split; other shapes balance within 2% of the bound",
          "[collectives][schedule]") {
  using topology::AxisSpec;
  for (const std::vector<AxisSpec>& cube : {std::vector<AxisSpec>{{4, true}, {4, true}, {4, true}},
                                           std::vector<AxisSpec>{{16, true}, {16, true}},
                                           std::vector<AxisSpec>{{8, false}, {8, false}}}) {
    const auto plans = collectives::detail::candidate_plans(collectives::product_shape(cube), Schedule::Balanced);
    CHECK(plans.size() == 1);
    CHECK(plans.front().equal);
  }
  struct Shape {
    std::vector<AxisSpec> axes;
    double within;  // of the ingress bound, in the lock-step estimate
  };
  for (const Shape& s : {Shape{{{4, true}, {4, true}, {8, true}}, 1.02}, Shape{{{4, true}, {4, true}, {28, true}}, 1.02},
                         Shape{{{16, true}, {20, true}, {28, true}}, 1.01}, Shape{{{8, false}, {16, true}}, 1.01},
                         Shape{{{4, false}, {8, false}}, 1.03}}) {
    double p = 1, links = 0;
    for (const AxisSpec& a : s.axes) p *= a.size, links += a.wraparound ? 2 : 1;
    const double bound = (p - 1) / p / links;  // in V / b
    const auto plans = collectives::detail::candidate_plans(collectives::product_shape(s.axes), Schedule::Balanced);
    const collectives::detail::OrderPlan& best = plans.back();
    INFO("axes " << s.axes.size() << " first size " << s.axes.front().size << " last " << s.axes.back().size);
    CHECK_FALSE(best.equal);
    CHECK(best.lockstep_time >= bound * (1 - 1e-9));  // no plan beats the bound
    CHECK(best.lockstep_time <= s.within * bound);
    CHECK(std::accumulate(best.fractions.begin(), best.fractions.end(), 0.0) == Approx(1));
    // The equal split is worse on every one of these shapes.
    CHECK(plans.front().lockstep_time > best.lockstep_time * 1.01);
  }
}

TEST_CASE("Schedule parts: bytes add up to V; the equal split is N rotations of ceil(V/N)", "[collectives][schedule]") {
  const Torus t = torus({{4, true}, {4, true}, {8, true}});
  const std::vector<int> axes{0, 1, 2};
  for (std::uint64_t v : {std::uint64_t{1} << 30, std::uint64_t{1000003}, std::uint64_t{7}}) {
    for (Kind kind : {Kind::AllGather, Kind::ReduceScatter, Kind::AllReduce}) {
      const collectives::MultiAxisPlan plan = collectives::axis_order_parts(t, kind, axes, v, Schedule::Balanced);
      std::uint64_t sum = 0;
      for (const auto& part : plan.parts) {
        CHECK(part.bytes > 0);
        CHECK(part.order.size() == 3);
        CHECK(part.first_stage >= 0);
        CHECK(part.first_stage + 3 <= plan.stages);
        sum += part.bytes;
      }
      CHECK(sum == v);
      const collectives::MultiAxisPlan eq = collectives::axis_order_parts(t, kind, axes, v, Schedule::Equal);
      REQUIRE(eq.parts.size() == 3);
      CHECK_FALSE(eq.lockstep);
      for (std::size_t p = 0; p < 3; ++p) {
        CHECK(eq.parts[p].bytes == (v + 2) / 3);
        CHECK(eq.parts[p].order == collectives::detail::rotated(axes, p));
      }
    }
  }
  // Large V: lock step over a balanced plan. Small V: the latency of extra
  // stages outweighs the balance, and the plan has the fewest stages.
  CHECK(collectives::axis_order_parts(t, Kind::AllGather, axes, std::uint64_t{1} << 30, Schedule::Balanced).lockstep);
  CHECK(collectives::axis_order_parts(t, Kind::AllGather, axes, 64, Schedule::Balanced).stages == 3);
}

TEST_CASE("Balanced schedule: on a cube the same program as the equal split", "[collectives][schedule]") {
  for (const Torus& t : {torus({{4, true}, {4, true}, {4, true}}), torus({{8, false}, {8, false}})}) {
    for (Kind kind : {Kind::AllGather, Kind::ReduceScatter, Kind::AllReduce}) {
      const std::vector<int> axes = all_axes(t);
      const auto build = [&](Schedule s) {
        return run(t, 1, [&](sim::ProgramBuilder& b, const auto& ports) {
          collectives::build(b, t, kind, axes, 3ull << 24, ports[0], s);
        });
      };
      const Outcome balanced = build(Schedule::Balanced), equal = build(Schedule::Equal);
      CHECK(balanced.makespan == equal.makespan);
      CHECK(balanced.link_bytes == equal.link_bytes);
      CHECK(balanced.max_link_bytes == equal.max_link_bytes);
    }
  }
}

TEST_CASE("Balanced schedule: simulated within 3% of the ingress bound where the equal split is not",
          "[collectives][schedule]") {
  constexpr std::uint64_t kV = std::uint64_t{1} << 30;
  for (const Torus& t : {torus({{4, true}, {4, true}, {8, true}}), torus({{4, true}, {4, true}, {12, true}}),
                         torus({{8, false}, {16, true}}), torus({{4, false}, {8, false}})}) {
    INFO(t.shape_string());
    double sum_rs_ag = 0;
    for (Kind kind : {Kind::ReduceScatter, Kind::AllGather, Kind::AllReduce}) {
      INFO(kind_name(kind));
      const double bound = ingress_bound(t, kind, static_cast<double>(kV));
      const double balanced = simulate_with(t, kind, kV, Schedule::Balanced);
      CHECK(balanced >= bound);
      CHECK(balanced <= 1.03 * bound);
      CHECK(simulate_with(t, kind, kV, Schedule::Equal) > 1.05 * bound);
      // The AllReduce is never slower than its ReduceScatter then its AllGather.
      if (kind == Kind::AllReduce)
        CHECK(balanced <= sum_rs_ag * (1 + 1e-9));
      else
        sum_rs_ag += balanced;
    }
  }
}

TEST_CASE("Schedule plans: every small shape plans, never below the bound nor above the equal split",
          "[collectives][schedule]") {
  using topology::AxisSpec;
  const std::vector<int> sizes{2, 3, 4, 5, 8, 12, 16, 28};
  int planned = 0;
  for (int a : sizes)
    for (int b : sizes)
      for (int c : {0, 4, 7, 12})
        for (int wraps = 0; wraps < 8; ++wraps) {
          std::vector<AxisSpec> axes{{a, (wraps & 1) != 0}, {b, (wraps & 2) != 0}};
          if (c) axes.push_back({c, (wraps & 4) != 0});
          else if (wraps >= 4) continue;
          double p = 1, links = 0;
          for (const AxisSpec& x : axes) p *= x.size, links += x.wraparound ? 2 : 1;
          const auto plans = collectives::detail::candidate_plans(collectives::product_shape(axes), Schedule::Balanced);
          INFO(a << "x" << b << "x" << c << " wraps " << wraps);
          REQUIRE_FALSE(plans.empty());
          CHECK(plans.front().equal);
          for (const auto& plan : plans) {
            CHECK(plan.lockstep_time >= (p - 1) / p / links * (1 - 1e-9));
            CHECK(plan.lockstep_time <= plans.front().lockstep_time * (1 + 1e-9));
            CHECK(std::accumulate(plan.fractions.begin(), plan.fractions.end(), 0.0) == Approx(1));
          }
          ++planned;
        }
  CHECK(planned == 8 * 8 * 4 + 8 * 8 * 3 * 8);
}

namespace {

// The chips reached from `c` over the links of `axes` (a coset of the subgroup
// they generate), by breadth-first search.
std::set<topology::ChipId> reach(const Torus& t, topology::ChipId c, const std::vector<int>& axes) {
  std::set<topology::ChipId> seen{c};
  std::vector<topology::ChipId> queue{c};
  for (std::size_t q = 0; q < queue.size(); ++q)
    for (int a : axes)
      for (topology::Direction d : {topology::Direction::Plus, topology::Direction::Minus}) {
        const topology::ChipId n = t.neighbor(queue[q], a, d);
        if (seen.insert(n).second) queue.push_back(n);
      }
  return seen;
}

Torus twisted_torus(std::vector<int> shape) {
  std::vector<AxisSpec> axes;
  for (int s : shape) axes.push_back({s, true});
  return Torus(axes, {kBw, tick_from_seconds(kAlpha)}, true);
}

}  // namespace

TEST_CASE("Twisted tori: a phase's ring of m positions meets every other coset of the chips before it once",
          "[collectives][schedule][twisted]") {
  // Phase k of an order gathers along axis a: chip c's chains reach c + j e_a for
  // j = 1..m/2 each way. Those must hold the m - 1 other cosets of G_{k-1} (the
  // chips reached over the earlier axes) in c's G_k, and c + m e_a is back in c's.
  for (const Torus& t : {twisted_torus({4, 4, 8}), twisted_torus({4, 8, 8}), twisted_torus({8, 4, 8})}) {
    const std::vector<int> axes{0, 1, 2};
    const collectives::AxesShape shape = collectives::axes_shape(t, axes);
    CHECK(shape.group.back() == t.num_chips());
    std::vector<int> order{0, 1, 2};
    do {
      const std::vector<int> sizes = collectives::gather_sizes(shape, order);
      INFO(t.shape_string() << " order " << order[0] << order[1] << order[2]);
      std::uint64_t product = 1;
      for (std::size_t k = 0; k < order.size(); ++k) {
        const std::vector<int> before(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k));
        const std::vector<int> upto(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k) + 1);
        product *= static_cast<std::uint64_t>(sizes[k]);
        for (topology::ChipId c : {topology::ChipId{0}, t.num_chips() / 2 + 3}) {
          CHECK(reach(t, c, upto).size() == product);
          std::set<topology::ChipId> covered = reach(t, c, before);
          topology::ChipId at = c;
          for (int j = 1; j < sizes[k]; ++j) {
            at = t.neighbor(at, order[k], topology::Direction::Plus);
            const std::set<topology::ChipId> coset = reach(t, at, before);
            for (topology::ChipId x : coset) CHECK(covered.insert(x).second);  // a new coset
          }
          CHECK(covered == reach(t, c, upto));
          at = t.neighbor(at, order[k], topology::Direction::Plus);
          CHECK(reach(t, c, before).count(at) == 1);  // m steps: back in c's coset
        }
      }
    } while (std::next_permutation(order.begin(), order.end()));
  }
}

TEST_CASE("Twisted tori: gathers and reductions over the twisted rings run at the ingress bound",
          "[collectives][schedule][twisted]") {
  constexpr std::uint64_t kV = std::uint64_t{1} << 30;
  for (const Torus& t : {twisted_torus({4, 4, 8}), twisted_torus({4, 8, 8})}) {
    INFO(t.shape_string());
    const collectives::AxesShape shape = collectives::axes_shape(t, std::vector<int>{0, 1, 2});
    CHECK(shape.ring == std::vector<bool>{true, true, true});
    for (Kind kind : {Kind::AllGather, Kind::ReduceScatter, Kind::AllReduce}) {
      INFO(kind_name(kind));
      const double bound = ingress_bound(t, kind, static_cast<double>(kV));
      const double time = simulate_with(t, kind, kV, Schedule::Balanced);
      CHECK(time >= bound);
      CHECK(time <= 1.01 * bound);
    }
  }
  // Without its long axis a twisted axis is a line: its chips do not form a ring.
  const Torus t = twisted_torus({4, 4, 8});
  CHECK(collectives::axes_shape(t, std::vector<int>{0}).ring == std::vector<bool>{false});
  CHECK(collectives::axes_shape(t, std::vector<int>{0, 1}).ring == std::vector<bool>{false, false});
  CHECK(collectives::axes_shape(t, std::vector<int>{0, 2}).ring == std::vector<bool>{true, true});
  CHECK(collectives::axes_shape(t, std::vector<int>{0, 2}).group == std::vector<std::uint64_t>{1, 8, 8, 32});
}
