// AllToAll over one or several axes: every chip sends a distinct piece of
// V / P^2 bytes (P chips per group) to every other chip of its group. Each piece
// is routed dimension-order over the group's axes, the short way round, and
// forwarded hop by hop with cut-through (the ICI routers forward; the
// intermediate chips' programs are not involved). A piece whose offset on a
// wrapped even axis is exactly half the ring is split in two halves, one each way,
// so both directions carry the same load (this gives the cheat sheet's V/(4W) on a
// bidirectional ring exactly). On a twisted torus each rotation takes every
// shortest route over the twisted links (Torus::shortest_routes). Between slices
// of a multislice system a piece takes the data-center network, host to host.
#include <algorithm>
#include <numeric>

#include "base/error.hpp"
#include "sim/collectives/collective.hpp"
#include "sim/collectives/ring_phase.hpp"

namespace meshsim::collectives {

using namespace detail;
using topology::LinkId;

void all_to_all(ProgramBuilder& b, const Torus& t, std::span<const int> axes, std::uint64_t group_bytes,
                const OpPorts& ports) {
  if (axes.empty()) return;
  std::uint32_t group = 1;
  for (int a : axes) group *= static_cast<std::uint32_t>(t.axis(a).size);
  const std::uint64_t piece = ceil_div(group_bytes, std::uint64_t{group} * group);

  // Every rotation of the axis order carries an equal share (X-then-Y and
  // Y-then-X on a 2D torus), so all axes' links have work from the start.
  std::vector<std::vector<int>> orders;
  for (std::size_t r = 0; r < axes.size(); ++r) orders.push_back(rotated(axes, r));
  std::vector<std::vector<LinkId>> routes;
  struct Dest {
    int hops;
    ChipId chip;
  };
  std::vector<Dest> dests;
  // Over slices, every chip lists its group from its own position on (shifted):
  // the k-th pieces of all chips then go to k different chips, not all into one
  // chip's DCN link at once.
  const bool shifted = std::find(axes.begin(), axes.end(), t.dcn_axis()) != axes.end();
  for (ChipId src = 0; src < t.num_chips(); ++src) {
    if (!ports.active(src)) continue;  // not in the op's chips (nor is its group)
    // The group of src: every chip that differs from it only on `axes`.
    dests.clear();
    for (std::uint32_t i = 0; i < group; ++i) {
      ChipId d = src;
      std::uint32_t rest = i;
      for (int a : axes) {
        const auto size = static_cast<std::uint32_t>(t.axis(a).size);
        const std::uint32_t from = shifted ? static_cast<std::uint32_t>(t.coord(src, a)) : 0;
        d = t.with_coord(d, a, static_cast<int>((from + rest % size) % size));
        rest /= size;
      }
      if (d != src) dests.push_back({t.hop_distance(src, d), d});
    }
    // Farthest pieces first, so they are under way while the near ones are sent.
    std::stable_sort(dests.begin(), dests.end(), [](const Dest& x, const Dest& y) { return x.hops > y.hops; });
    for (const Dest& d : dests) {
      routes.clear();
      // Every shortest route in each rotated order: both ways at an antipode,
      // and on a twisted torus through a twisted wraparound where that is as short.
      // Between slices, the one route over the data-center network.
      if (t.between_slices(src, d.chip))
        routes.push_back(t.route(src, d.chip, axes));
      else
        for (const std::vector<int>& order : orders)
          for (auto& route : t.shortest_routes(src, d.chip, order)) routes.push_back(std::move(route));
      const std::uint64_t share = ceil_div(piece, routes.size());
      for (const auto& r : routes) routed_chain(b, t, r, share, ports.entry, ports.exit, ports.op);
    }
  }
}

}  // namespace meshsim::collectives
