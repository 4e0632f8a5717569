#pragma once
// How a multi-axis AllGather, ReduceScatter or AllReduce divides its data among
// axis orders (docs/MODEL.md, "Balanced multi-axis schedules").
//
// A part of the data runs one phase per axis, in its order. The chips a chip
// reaches over the links of the first k axes of the order form a group G_k;
// phase k is a ring (or line) of m_k = |G_k| / |G_{k-1}| positions along axis
// pi_k: on an ordinary torus m_k is that axis's size; on a twisted torus the
// links of a short axis alone reach two of its lines (m = 2k) and a later axis
// then has fewer new positions. Phase k of an AllGather moves (m_k - 1) shards
// of |G_{k-1}| V / P per chip, over the two link directions of a ring or the one
// link into the end of a line. A ReduceScatter in order pi is the AllGather in
// the reverse order run backwards; an AllReduce is that ReduceScatter followed
// by the AllGather.
//
//  - Equal: N parts of V/N, part p in the axis order rotated by p (the cheat
//    sheet's V/(W N_axes) on a cube: every phase keeps every axis busy).
//  - Balanced (the default): the fraction of V given to each (axis order, start
//    stage) solves a linear program that minimises the sum over lock-step
//    stages of the busiest link's time, so that every axis carries its share of
//    every stage: on a cube it is the equal split, which is then used as is; on
//    4x4x8 or a line beside a ring it shifts data to the orders that load the
//    short or slow axes late.
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "base/op_kind.hpp"
#include "topology/torus.hpp"

namespace meshsim::collectives {

enum class Schedule : std::uint8_t { Balanced, Equal };

std::optional<Schedule> parse_schedule(std::string_view name);

// The shape a multi-axis collective sees over its N axes: whether each runs its
// phases as a ring or a line, and the size of the group that every subset of the
// axes spans (bit i of the index: axes[i]).
struct AxesShape {
  std::vector<bool> ring;
  std::vector<std::uint64_t> group;
  // Per axis: the time a phase's shard takes through a chip's links on that
  // axis, per byte, in units of one ICI link's (a ring's shards leave over two
  // links: 1/2; a line's over one: 1; the slices of a multislice system through
  // the chip's one DCN link out: ICI / DCN bandwidth), and the latency of one
  // hop of its chains (seconds; product_shape: 1, a unit).
  std::vector<double> cost;
  std::vector<double> hop_s;
  auto operator<=>(const AxesShape&) const = default;
};
// An ordinary torus: every subset spans the product of its sizes.
AxesShape product_shape(std::span<const topology::AxisSpec> axes);
// The collective over `axes` (each of size > 1) on `t`. A twisted torus whose
// twisted axes among `axes` have their long axes among them too: every axis is
// a ring and each subset spans the chips its links reach from a chip (twisted
// wraparounds included); otherwise a twisted axis is a line.
AxesShape axes_shape(const topology::Torus& t, std::span<const int> axes);
// The ring sizes m_k of the phases of an AllGather whose axes (indices into the
// shape) come in `order`.
std::vector<int> gather_sizes(const AxesShape& shape, std::span<const int> order);

// One part of a multi-axis collective: `bytes` of V taken through the axes in
// `order`: the gather order of an AllGather, the reduction order of a
// ReduceScatter or AllReduce (whose gathers then run it reversed).
struct AxisOrderPart {
  std::vector<int> order;  // hardware axes
  std::vector<int> sizes;  // per phase of `order`: the ring size m
  std::vector<bool> rings;  // per phase of `order`: a ring (else a line)
  std::uint64_t bytes = 0;
  int first_stage = 0;  // lock step: the stage of its first phase (its reduction's, for an AllReduce)
};
struct MultiAxisPlan {
  std::vector<AxisOrderPart> parts;
  int stages = 0;         // of one AllGather or ReduceScatter (an AllReduce runs 2 x stages)
  bool lockstep = false;  // the parts share a barrier per chip between stages (else each runs on its own)
};

namespace detail {

// A plan: each gather order (indices into the axes) with the stage its first
// phase runs in and its fraction of V; the stages' bandwidth time, the sum over
// stages of the busiest link's time in V / (one link's bandwidth), and their
// latency, the sum over stages of the longest phase's hops.
struct OrderPlan {
  std::vector<std::vector<int>> orders;
  std::vector<int> offsets;
  std::vector<double> fractions;  // add up to 1
  int stages = 0;
  double lockstep_time = 0;
  double latency_hops = 0;
  double latency_s = 0;  // the same hops, each at its axis's hop latency (AxesShape::hop_s)
  bool equal = false;  // the equal split (rotations, each part on its own)
};
// The linear program's plan with parts starting at stages 0..max_offset
// (nothing if the simplex fails on rounding).
std::optional<OrderPlan> plan_orders(const AxesShape& shape, int max_offset);
// The equal split first, then (Balanced) the linear program's plans for
// max_offset = 0, 1, ..., N-1 that move data faster than every plan before them.
std::vector<OrderPlan> candidate_plans(const AxesShape& shape, Schedule s);

// maximize c.x subject to A x <= b, x >= 0, with b >= 0 (so x = 0 is feasible);
// dense tableau simplex with Bland's rule (no cycling). Returns x, or nothing
// when the program is unbounded (or, on rounding, the pivots pass a cap).
std::optional<std::vector<double>> maximize(const std::vector<std::vector<double>>& a, std::span<const double> b,
                                            std::span<const double> c);

}  // namespace detail

// The shapes and plans of one run's multi-axis collectives. A training step has
// thousands of collectives over the same few axis sets, and a plan solves linear
// programs (a twisted torus's shape searches the chips): they are memoized by
// what they depend on (the torus's axes, twist and link speeds, the
// collective's axes, the schedule). A run owns one (driver::Expander, the run's
// estimate, its reports) and hands it down; nothing outlives the run, and the
// answers are those of an empty cache (the key holds everything they read).
class PlanCache {
 public:
  // axes_shape(t, axes).
  const AxesShape& shape(const topology::Torus& t, std::span<const int> axes);
  // The plan parts() uses for V = `group_bytes`: of the candidates, the one
  // with the least bandwidth time x V / b + its latency.
  const detail::OrderPlan& plan(const topology::Torus& t, std::span<const int> axes, std::uint64_t group_bytes,
                                Schedule s);
  // The most parts any V gives (the run-size estimate).
  std::size_t part_bound(const topology::Torus& t, std::span<const int> axes, Schedule s);
  // The parts of a `kind` (AllGather, ReduceScatter or AllReduce) collective of
  // V = `group_bytes` over `axes` (each of size > 1). Balanced: the bytes add up
  // to V. Equal: N parts of ceil(V/N), part p in the axes rotated by p, as the
  // schedule always had.
  MultiAxisPlan parts(const topology::Torus& t, OpKind kind, std::span<const int> axes, std::uint64_t group_bytes,
                      Schedule s);

 private:
  struct Planned {
    AxesShape shape;
    std::vector<detail::OrderPlan> plans;
  };
  // (axis sizes and wraparounds, twisted, the collective's axes, schedule, DCN
  // axis, ICI and DCN bandwidth and latency)
  using Key = std::tuple<std::vector<std::pair<int, bool>>, bool, std::vector<int>, Schedule, int,
                         std::array<std::int64_t, 4>>;
  const Planned& planned(const topology::Torus& t, std::span<const int> axes, Schedule s);
  std::map<Key, Planned> planned_;
};

// PlanCache{}.parts(...): one collective's parts, nothing kept.
MultiAxisPlan axis_order_parts(const topology::Torus& t, OpKind kind, std::span<const int> axes,
                               std::uint64_t group_bytes, Schedule s);

}  // namespace meshsim::collectives
