// Point-to-point send. The bytes are split evenly over the dimension-order routes
// of every rotation of the axes on which src and dst differ (X-then-Y and
// Y-then-X on a 2D torus): these routes share no link, so they run at once.
// Between slices of a multislice system: the one route over the data-center
// network (Torus::route).
#include <algorithm>

#include "base/error.hpp"
#include "sim/collectives/collective.hpp"
#include "sim/collectives/ring_phase.hpp"

namespace meshsim::collectives {

using namespace detail;

namespace {
std::vector<int> differing_axes(const Torus& t, ChipId src, ChipId dst) {
  if (t.between_slices(src, dst)) return {t.dcn_axis()};
  std::vector<int> axes;
  for (int a = 0; a < t.num_axes(); ++a)
    if (t.coord(src, a) != t.coord(dst, a)) axes.push_back(a);
  return axes;
}
}  // namespace

int send_paths(const Torus& t, ChipId src, ChipId dst) {
  return static_cast<int>(differing_axes(t, src, dst).size());
}

GroupLoad send_load(const Torus& t, std::span<const std::pair<ChipId, ChipId>> pairs, std::uint64_t bytes) {
  std::vector<std::uint64_t> load(t.num_link_slots(), 0);
  GroupLoad out;
  for (const auto& [src, dst] : pairs) {
    const std::vector<int> axes = differing_axes(t, src, dst);
    const std::uint64_t share = axes.empty() ? 0 : ceil_div(bytes, axes.size());
    for (std::size_t p = 0; p < axes.size(); ++p) {
      const std::vector<topology::LinkId> route = t.route(src, dst, rotated(axes, p));
      out.transfers += route.size();
      out.chain_hops = std::max<std::uint64_t>(out.chain_hops, route.size());
      for (topology::LinkId l : route) load[l] += share;
    }
  }
  for (std::size_t l = 0; l < load.size(); ++l)
    if (load[l] > out.busiest_bytes) out.busiest_bytes = load[l], out.busiest_link = static_cast<topology::LinkId>(l);
  return out;
}

void send(ProgramBuilder& b, const Torus& t, ChipId src, ChipId dst, std::uint64_t bytes, const OpPorts& ports) {
  const std::vector<int> axes = differing_axes(t, src, dst);
  if (axes.empty()) return;  // a chip sending to itself moves nothing over the network
  const std::uint64_t share = ceil_div(bytes, axes.size());
  for (std::size_t p = 0; p < axes.size(); ++p) {
    const std::vector<topology::LinkId> route = t.route(src, dst, rotated(axes, p));
    // The sender is done with the send once its bytes have arrived (gpu::send).
    b.depend(routed_chain(b, t, route, share, ports.entry, ports.exit, ports.op), ports.exit[src]);
  }
}

}  // namespace meshsim::collectives
