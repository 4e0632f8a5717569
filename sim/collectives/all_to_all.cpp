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
  // Every shortest route in each rotated order: both ways at an antipode, and
  // on a twisted torus through a twisted wraparound where that is as short.
  // Between slices, the one route over the data-center network.
  const auto routes_to = [&](ChipId src, ChipId dst, std::vector<std::vector<LinkId>>& out) {
    out.clear();
    if (t.between_slices(src, dst))
      out.push_back(t.route(src, dst, axes));
    else
      for (const std::vector<int>& order : orders)
        for (auto& route : t.shortest_routes(src, dst, order)) out.push_back(std::move(route));
  };
  // The member `i` (0 .. group-1, mixed radix over `axes`) places after `src`
  // on every axis, or (from = 0) the member at absolute position i.
  const auto member = [&](ChipId src, std::uint32_t i, bool relative) {
    ChipId d = src;
    for (int a : axes) {
      const auto size = static_cast<std::uint32_t>(t.axis(a).size);
      const std::uint32_t from = relative ? static_cast<std::uint32_t>(t.coord(src, a)) : 0;
      d = t.with_coord(d, a, static_cast<int>((from + i % size) % size));
      i /= size;
    }
    return d;
  };

  bool wrapped = !t.twisted();
  for (int a : axes) wrapped = wrapped && (t.axis(a).wraparound || t.switched(a));
  if (wrapped) {
    // Every axis wraps: each chip lists its group from its own position, so
    // the k-th pieces of all chips go to k different chips and every chip's
    // pieces are its neighbours' translated. Offset by offset (farthest
    // first) and route by route, the pieces advance hop by hop: hop h of every
    // chip's piece, then hop h + 1. A link's tasks are then in the same order
    // on every chip (driver/translations.hpp), and tasks that run at about the
    // same time get neighbouring ids.
    std::vector<ChipId> sources;
    for (ChipId src = 0; src < t.num_chips(); ++src)
      if (ports.active(src)) sources.push_back(src);
    if (sources.empty()) return;
    std::vector<std::pair<int, std::uint32_t>> offsets;  // (hops, offset)
    for (std::uint32_t i = 1; i < group; ++i)
      offsets.emplace_back(t.hop_distance(sources[0], member(sources[0], i, true)), i);
    std::stable_sort(offsets.begin(), offsets.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    std::vector<std::vector<std::vector<LinkId>>> all(sources.size());  // per source: its routes to the offset
    std::vector<TaskId> prev(sources.size());
    for (const auto& [hops, i] : offsets) {
      for (std::size_t s = 0; s < sources.size(); ++s) {
        routes_to(sources[s], member(sources[s], i, true), all[s]);
        MESHSIM_ASSERT(all[s].size() == all[0].size(), "a wrapped torus' routes differ from chip to chip");
        for (std::size_t r = 0; r < all[s].size(); ++r)
          MESHSIM_ASSERT(all[s][r].size() == all[0][r].size(), "a wrapped torus' routes differ from chip to chip");
      }
      const std::uint64_t share = ceil_div(piece, all[0].size());
      for (std::size_t r = 0; r < all[0].size(); ++r) {
        for (std::size_t h = 0; h < all[0][r].size(); ++h)
          for (std::size_t s = 0; s < sources.size(); ++s) {
            const LinkId link = all[s][r][h];
            const TaskId x = b.transfer(link, share, ports.op, static_cast<std::uint16_t>(h + 1));
            if (h == 0)
              b.depend(ports.entry[t.link_info(link).src], x);
            else
              b.depend(prev[s], x, sim::EdgeKind::Stream);
            prev[s] = x;
          }
        for (std::size_t s = 0; s < sources.size(); ++s)
          b.depend(prev[s], ports.exit[t.link_info(all[s][r].back()).dst]);
      }
    }
    return;
  }

  // Over slices, every chip lists its group from its own position on (shifted):
  // the k-th pieces of all chips then go to k different chips, not all into one
  // chip's DCN link at once.
  const bool shifted = std::find(axes.begin(), axes.end(), t.dcn_axis()) != axes.end();
  struct Dest {
    int hops;
    ChipId chip;
  };
  std::vector<Dest> dests;
  std::vector<std::vector<LinkId>> routes;
  for (ChipId src = 0; src < t.num_chips(); ++src) {
    if (!ports.active(src)) continue;  // not in the op's chips (nor is its group)
    // The group of src: every chip that differs from it only on `axes`.
    dests.clear();
    for (std::uint32_t i = 0; i < group; ++i) {
      const ChipId d = member(src, i, shifted);
      if (d != src) dests.push_back({t.hop_distance(src, d), d});
    }
    // Farthest pieces first, so they are under way while the near ones are sent.
    std::stable_sort(dests.begin(), dests.end(), [](const Dest& x, const Dest& y) { return x.hops > y.hops; });
    for (const Dest& d : dests) {
      routes_to(src, d.chip, routes);
      const std::uint64_t share = ceil_div(piece, routes.size());
      for (const auto& r : routes) routed_chain(b, t, r, share, ports.entry, ports.exit, ports.op);
    }
  }
}

}  // namespace meshsim::collectives
