#include "topology/torus.hpp"

#include <fmt/format.h>

#include <numeric>

#include "base/error.hpp"

namespace meshsim::topology {

namespace {
constexpr const char* kAxisNames[] = {"x", "y", "z", "w", "v", "u"};
constexpr int kMaxAxes = 6;
}  // namespace

Torus::Torus(std::vector<AxisSpec> axes, LinkSpec link) : axes_(std::move(axes)), link_spec_(link) {
  MESHSIM_ASSERT(!axes_.empty() && axes_.size() <= kMaxAxes, "torus needs 1..6 axes");
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
        l = Link{c, n, static_cast<std::uint8_t>(a), d};
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
  int next = coord(chip, axis) + sign(dir);
  if (next < 0 || next >= spec.size) {
    if (!spec.wraparound) return kNoChip;
    next = (next + spec.size) % spec.size;
  }
  return with_coord(chip, axis, next);
}

Torus::AxisHops Torus::axis_hops(int axis, int from, int to) const {
  const AxisSpec& spec = axes_[static_cast<std::size_t>(axis)];
  if (from == to) return {};
  if (!spec.wraparound) return {std::abs(to - from), to > from ? Direction::Plus : Direction::Minus};
  const int plus = ((to - from) % spec.size + spec.size) % spec.size;
  const int minus = spec.size - plus;
  if (plus <= minus) return {plus, Direction::Plus};
  return {minus, Direction::Minus};
}

std::vector<LinkId> Torus::route(ChipId src, ChipId dst, std::span<const int> axis_order) const {
  std::vector<LinkId> path;
  ChipId at = src;
  for (int a : axis_order) {
    const AxisHops h = axis_hops(a, coord(at, a), coord(dst, a));
    for (int i = 0; i < h.hops; ++i) {
      const LinkId l = link(at, a, h.direction);
      MESHSIM_ASSERT(l != kNoLink, "route uses a missing link");
      path.push_back(l);
      at = links_[l].dst;
    }
  }
  MESHSIM_ASSERT(at == dst, "route does not reach its destination (axis order incomplete)");
  return path;
}

std::vector<LinkId> Torus::route(ChipId src, ChipId dst) const {
  std::vector<int> order(axes_.size());
  std::iota(order.begin(), order.end(), 0);
  return route(src, dst, order);
}

int Torus::hop_distance(ChipId src, ChipId dst) const {
  int hops = 0;
  for (int a = 0; a < num_axes(); ++a) hops += axis_hops(a, coord(src, a), coord(dst, a)).hops;
  return hops;
}

std::string Torus::axis_name(int axis) const { return kAxisNames[axis]; }

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
  return chip_name(l.src) + (l.direction == Direction::Plus ? "+" : "-") + axis_name(l.axis);
}

std::string Torus::shape_string() const {
  std::string s;
  for (std::size_t a = 0; a < axes_.size(); ++a) {
    if (a) s += 'x';
    s += std::to_string(axes_[a].size);
  }
  return s;
}

}  // namespace meshsim::topology
