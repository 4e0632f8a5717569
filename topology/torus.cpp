#include "topology/torus.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "base/error.hpp"

namespace meshsim::topology {

namespace {
constexpr const char* kAxisNames[] = {"x", "y", "z", "w", "v", "u"};
}  // namespace

std::string Torus::twist_error(std::span<const AxisSpec> axes) {
  if (axes.size() != 3) return "a twisted torus has 3 axes";
  int lo = axes[0].size, hi = axes[0].size;
  for (const AxisSpec& a : axes) lo = std::min(lo, a.size), hi = std::max(hi, a.size);
  for (const AxisSpec& a : axes) {
    if (a.size % 4 != 0 || (a.size != lo && a.size != hi) || hi != 2 * lo)
      return "a twisted torus has the shape k x k x 2k or k x 2k x 2k (in any axis order) with k a multiple of 4";
    if (!a.wraparound) return "a twisted torus wraps every axis";
  }
  return {};
}

bool Torus::twisted_axis(int a) const {
  for (int b = 0; b < num_axes(); ++b)
    if (twist(a, b) != 0) return true;
  return false;
}

Torus::Torus(std::vector<AxisSpec> axes, LinkSpec link, bool twisted, LinkSpec dcn)
    : axes_(std::move(axes)), link_spec_(link), dcn_spec_(dcn) {
  MESHSIM_ASSERT(!axes_.empty() && axes_.size() <= kMaxTorusAxes, "torus needs 1..6 axes");
  for (std::size_t a = 0; a < axes_.size(); ++a) {
    if (!axes_[a].switched) continue;
    MESHSIM_ASSERT(a + 1 == axes_.size() && a > 0, "the switched (slice) axis is the last of several");
    MESHSIM_ASSERT(dcn_spec_.bandwidth_bytes_per_s > 0, "DCN bandwidth must be positive");
    axes_[a].wraparound = true;  // any slice reaches any other
    dcn_axis_ = static_cast<int>(a);
  }
  // The ICI axes (all but the slices).
  const std::size_t ici = dcn_axis_ < 0 ? axes_.size() : static_cast<std::size_t>(dcn_axis_);
  if (twisted) {
    MESHSIM_ASSERT(twist_error(std::span<const AxisSpec>(axes_).first(ici)).empty(),
                   "a twisted torus of a shape that cannot be twisted");
    int lo = axes_[0].size;
    for (std::size_t a = 0; a < ici; ++a) lo = std::min(lo, axes_[a].size);
    const std::size_t n = axes_.size();
    twist_.assign(n * n, 0);
    for (std::size_t a = 0; a < ici; ++a)
      for (std::size_t b = 0; b < ici; ++b)
        if (axes_[a].size == lo && axes_[b].size == 2 * lo) twist_[a * n + b] = lo;
  }
  MESHSIM_ASSERT(link_spec_.bandwidth_bytes_per_s > 0, "link bandwidth must be positive");
  std::uint64_t chips = 1;
  for (const AxisSpec& a : axes_) {
    MESHSIM_ASSERT(a.size >= 1, "axis size must be positive");
    strides_.push_back(static_cast<std::uint32_t>(chips));
    chips *= static_cast<std::uint64_t>(a.size);
    MESHSIM_ASSERT(chips <= (1u << 24), "too many chips");
  }
  num_chips_ = static_cast<std::uint32_t>(chips);
  const auto n_axes = axes_.size();
  links_.assign(static_cast<std::size_t>(num_chips_) * 2 * n_axes, Link{});
  for (ChipId c = 0; c < num_chips_; ++c) {
    for (int a = 0; a < num_axes(); ++a) {
      for (Direction d : {Direction::Plus, Direction::Minus}) {
        const ChipId n = neighbor(c, a, d);
        if (n == kNoChip) continue;
        Link& l = links_[static_cast<std::size_t>(c) * 2 * n_axes + static_cast<std::size_t>(a) * 2 +
                         static_cast<std::size_t>(d)];
        // A DCN link joins the chip and the network (out: Plus, in: Minus).
        l = switched(a) ? Link{c, c, static_cast<std::uint8_t>(a), d, true} : Link{c, n, static_cast<std::uint8_t>(a), d};
        ++num_links_;
      }
    }
  }
}

int Torus::coord(ChipId chip, int axis) const {
  const auto a = static_cast<std::size_t>(axis);
  return static_cast<int>((chip / strides_[a]) % static_cast<std::uint32_t>(axes_[a].size));
}

std::vector<int> Torus::coords(ChipId chip) const {
  std::vector<int> out(axes_.size());
  for (int a = 0; a < num_axes(); ++a) out[static_cast<std::size_t>(a)] = coord(chip, a);
  return out;
}

ChipId Torus::chip(std::span<const int> coords) const {
  MESHSIM_ASSERT(coords.size() == axes_.size(), "coordinate rank mismatch");
  ChipId id = 0;
  for (std::size_t a = 0; a < axes_.size(); ++a) {
    MESHSIM_ASSERT(coords[a] >= 0 && coords[a] < axes_[a].size, "coordinate out of range");
    id += static_cast<ChipId>(coords[a]) * strides_[a];
  }
  return id;
}

ChipId Torus::with_coord(ChipId chip, int axis, int value) const {
  const auto a = static_cast<std::size_t>(axis);
  const int old = coord(chip, axis);
  return chip - static_cast<ChipId>(old) * strides_[a] + static_cast<ChipId>(value) * strides_[a];
}

ChipId Torus::neighbor(ChipId chip, int axis, Direction dir) const {
  const AxisSpec& spec = axes_[static_cast<std::size_t>(axis)];
  if (spec.size == 1) return kNoChip;
  if (switched(axis)) return with_coord(chip, axis, (coord(chip, axis) + sign(dir) + spec.size) % spec.size);
  int next = coord(chip, axis) + sign(dir);
  if (next < 0 || next >= spec.size) {
    if (!spec.wraparound) return kNoChip;
    next = (next + spec.size) % spec.size;
    // A twisted wraparound lands shifted along the long axes.
    for (int b = 0; b < num_axes(); ++b) {
      const int shift = twist(axis, b);
      if (shift == 0) continue;
      const int size = axes_[static_cast<std::size_t>(b)].size;
      chip = with_coord(chip, b, ((coord(chip, b) + sign(dir) * shift) % size + size) % size);
    }
  }
  return with_coord(chip, axis, next);
}

Torus::AxisHops Torus::axis_hops(int axis, int from, int to) const {
  const AxisSpec& spec = axes_[static_cast<std::size_t>(axis)];
  if (from == to) return {};
  if (switched(axis)) return {1, Direction::Plus};
  if (!spec.wraparound) return {std::abs(to - from), to > from ? Direction::Plus : Direction::Minus};
  const int plus = ((to - from) % spec.size + spec.size) % spec.size;
  const int minus = spec.size - plus;
  if (plus <= minus) return {plus, Direction::Plus};
  return {minus, Direction::Minus};
}

Torus::TwistedPlan Torus::twisted_plan(ChipId src, ChipId dst, std::span<const int> axis_order) const {
  const int n = num_axes();
  std::vector<bool> listed(static_cast<std::size_t>(n), false);
  std::vector<int> twisted_axes;
  for (int a : axis_order) {
    listed[static_cast<std::size_t>(a)] = true;
    if (twisted_axis(a)) twisted_axes.push_back(a);
  }
  TwistedPlan best;
  best.hops = -1;
  // Every twisted axis moves its net displacement delta + w * size, w = 0 (not
  // through its wraparound), +1 (through it the Plus way, shifting the long axes
  // by +k) or -1: a full loop can pay when it saves hops on two long axes. At
  // most 3^2 combinations; more loops only add hops (two shifts of k are none).
  std::vector<int> crossing(static_cast<std::size_t>(n), 0);
  std::size_t combos = 1;
  for (std::size_t i = 0; i < twisted_axes.size(); ++i) combos *= 3;
  for (std::size_t code = 0; code < combos; ++code) {
    std::size_t rest = code;
    bool valid = true;
    int hops = 0;
    for (int a : twisted_axes) {
      const int w = static_cast<int>(rest % 3) == 2 ? -1 : static_cast<int>(rest % 3);
      rest /= 3;
      crossing[static_cast<std::size_t>(a)] = w;
      hops += std::abs(coord(dst, a) - coord(src, a) + w * axis(a).size);
      for (int b = 0; b < n && w != 0; ++b)
        if (twist(a, b) != 0 && !listed[static_cast<std::size_t>(b)]) valid = false;
    }
    if (!valid) continue;
    for (int b : axis_order) {
      if (twisted_axis(b)) continue;
      int target = coord(dst, b);
      for (int a : twisted_axes) target -= crossing[static_cast<std::size_t>(a)] * twist(a, b);
      const int size = axis(b).size;
      hops += axis_hops(b, coord(src, b), (target % size + size) % size).hops;
    }
    if (best.hops < 0 || hops < best.hops) best = {hops, {}};
    if (hops == best.hops) best.crossings.push_back(crossing);
  }
  MESHSIM_ASSERT(best.hops >= 0, "no route on the twisted torus");
  return best;
}

void Torus::walk(ChipId at, ChipId dst, std::span<const int> axis_order, std::size_t i, std::span<const int> crossing,
                 bool all_ties, std::vector<LinkId>& path, std::vector<std::vector<LinkId>>& out) const {
  if (i == axis_order.size()) {
    MESHSIM_ASSERT(at == dst, "route does not reach its destination (axis order incomplete)");
    out.push_back(path);
    return;
  }
  const int a = axis_order[i];
  const int size = axis(a).size;
  if (switched(a)) {
    MESHSIM_ASSERT(coord(at, a) == coord(dst, a), "routes between slices are taken whole (route())");
    walk(at, dst, axis_order, i + 1, crossing, all_ties, path, out);
    return;
  }
  AxisHops h;
  bool tie = false;
  if (twisted_axis(a)) {
    const int net = coord(dst, a) - coord(at, a) + crossing[static_cast<std::size_t>(a)] * size;
    h = {std::abs(net), net > 0 ? Direction::Plus : Direction::Minus};
  } else {
    // The shifts of the twisted crossings still to come.
    int target = coord(dst, a);
    for (std::size_t j = i + 1; j < axis_order.size() && !crossing.empty(); ++j)
      target -= crossing[static_cast<std::size_t>(axis_order[j])] * twist(axis_order[j], a);
    h = axis_hops(a, coord(at, a), (target % size + size) % size);
    tie = all_ties && axis(a).wraparound && size % 2 == 0 && size > 2 && h.hops == size / 2;
  }
  for (Direction d : {h.direction, h.direction == Direction::Plus ? Direction::Minus : Direction::Plus}) {
    if (d != h.direction && !tie) break;
    const std::size_t mark = path.size();
    ChipId c = at;
    for (int k = 0; k < h.hops; ++k) {
      const LinkId l = link(c, a, d);
      MESHSIM_ASSERT(l != kNoLink, "route uses a missing link");
      path.push_back(l);
      c = links_[l].dst;
    }
    walk(c, dst, axis_order, i + 1, crossing, all_ties, path, out);
    path.resize(mark);
  }
}

bool Torus::between_slices(ChipId src, ChipId dst) const {
  return dcn_axis_ >= 0 && coord(src, dcn_axis_) != coord(dst, dcn_axis_);
}

std::vector<LinkId> Torus::route(ChipId src, ChipId dst, std::span<const int> axis_order) const {
  if (between_slices(src, dst)) {
    MESHSIM_ASSERT(std::find(axis_order.begin(), axis_order.end(), dcn_axis_) != axis_order.end(),
                   "route between slices without the slice axis");
    return {dcn_out(src), dcn_in(dst)};
  }
  std::vector<LinkId> path;
  std::vector<std::vector<LinkId>> out;
  const std::vector<int> crossing = twisted() ? twisted_plan(src, dst, axis_order).crossings.front() : std::vector<int>{};
  walk(src, dst, axis_order, 0, crossing, false, path, out);
  return std::move(out.front());
}

std::vector<std::vector<LinkId>> Torus::shortest_routes(ChipId src, ChipId dst, std::span<const int> axis_order) const {
  if (between_slices(src, dst)) return {route(src, dst, axis_order)};
  std::vector<LinkId> path;
  std::vector<std::vector<LinkId>> out;
  if (!twisted()) {
    walk(src, dst, axis_order, 0, {}, true, path, out);
    return out;
  }
  for (const std::vector<int>& crossing : twisted_plan(src, dst, axis_order).crossings)
    walk(src, dst, axis_order, 0, crossing, true, path, out);
  return out;
}

std::vector<LinkId> Torus::route(ChipId src, ChipId dst) const {
  std::vector<int> order(axes_.size());
  std::iota(order.begin(), order.end(), 0);
  return route(src, dst, order);
}

int Torus::hop_distance(ChipId src, ChipId dst) const {
  if (between_slices(src, dst)) return 1;
  if (twisted()) {
    std::vector<int> order(axes_.size());
    std::iota(order.begin(), order.end(), 0);
    return twisted_plan(src, dst, order).hops;
  }
  int hops = 0;
  for (int a = 0; a < num_axes(); ++a) hops += axis_hops(a, coord(src, a), coord(dst, a)).hops;
  return hops;
}

Tick Torus::route_latency(ChipId src, ChipId dst) const {
  Tick t;
  for (LinkId l : route(src, dst)) t = t + spec(l).latency;
  return t;
}

std::string Torus::axis_name(int axis) const { return switched(axis) ? "dcn" : kAxisNames[axis]; }

std::string Torus::chip_name(ChipId chip) const {
  std::string s = "(";
  for (int a = 0; a < num_axes(); ++a) {
    if (a) s += ',';
    s += std::to_string(coord(chip, a));
  }
  return s + ")";
}

std::string Torus::link_name(LinkId id) const {
  const Link& l = links_[id];
  if (l.dcn) return chip_name(l.src) + (l.direction == Direction::Plus ? " dcn out" : " dcn in");
  return chip_name(l.src) + (l.direction == Direction::Plus ? "+" : "-") + axis_name(l.axis);
}

std::string Torus::shape_string() const {
  std::string s;
  for (std::size_t a = 0; a < axes_.size(); ++a) {
    if (switched(static_cast<int>(a))) return s + " x " + std::to_string(axes_[a].size) + " slices";
    if (a) s += 'x';
    s += std::to_string(axes_[a].size);
  }
  return s;
}

}  // namespace meshsim::topology
