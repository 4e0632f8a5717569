#include "topology/graph_check.hpp"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/visitors.hpp>
#include <vector>

namespace meshsim::topology {

namespace {
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;

std::vector<int> bfs_distances(const Graph& g, std::size_t source) {
  std::vector<int> dist(boost::num_vertices(g), -1);
  dist[source] = 0;
  boost::breadth_first_search(
      g, boost::vertex(source, g),
      boost::visitor(boost::make_bfs_visitor(boost::record_distances(dist.data(), boost::on_tree_edge()))));
  return dist;
}
}  // namespace

GraphCheck check_with_bfs(const Torus& torus, std::size_t max_sources) {
  const std::size_t n = torus.num_chips();
  Graph g(n);
  // The ICI links; between slices a route is the two DCN links (checked below).
  for (LinkId l = 0; l < torus.num_link_slots(); ++l)
    if (torus.link_exists(l) && !torus.link_info(l).dcn) boost::add_edge(torus.link_info(l).src, torus.link_info(l).dst, g);

  GraphCheck out;
  out.connected = true;
  const std::size_t sources = max_sources >= n ? n : max_sources;
  for (std::size_t i = 0; i < sources; ++i) {
    const std::size_t src = i * n / sources;
    const std::vector<int> dist = bfs_distances(g, src);
    for (std::size_t dst = 0; dst < n; ++dst) {
      if (torus.between_slices(static_cast<ChipId>(src), static_cast<ChipId>(dst))) {
        ++out.pairs_checked;
        if (torus.route(static_cast<ChipId>(src), static_cast<ChipId>(dst)).size() != 2) ++out.route_mismatches;
        continue;
      }
      if (dist[dst] < 0) {
        out.connected = false;
        continue;
      }
      ++out.pairs_checked;
      const auto routed = torus.route(static_cast<ChipId>(src), static_cast<ChipId>(dst)).size();
      if (routed != static_cast<std::size_t>(dist[dst])) ++out.route_mismatches;
    }
  }
  return out;
}

}  // namespace meshsim::topology
