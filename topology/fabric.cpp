#include "topology/fabric.hpp"

#include <fmt/format.h>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/visitors.hpp>

#include "base/error.hpp"

namespace meshsim::topology {

Fabric::Fabric(FabricSpec spec) : spec_(spec) {
  MESHSIM_ASSERT(spec_.gpus_per_node >= 1 && spec_.nodes >= 1 && spec_.spines >= 1 && spec_.spine_cables >= 1,
                 "fabric sizes must be positive");
  MESHSIM_ASSERT(spec_.nvlink.bandwidth_bytes_per_s > 0 && spec_.nic.bandwidth_bytes_per_s > 0 &&
                     spec_.spine.bandwidth_bytes_per_s > 0,
                 "fabric bandwidths must be positive");
  num_gpus_ = static_cast<std::uint32_t>(spec_.gpus_per_node * spec_.nodes);
  for (std::uint32_t g = 0; g < num_gpus_; ++g) links_.push_back({FabricLinkKind::NvlinkUp, g, 0, spec_.nvlink});
  for (std::uint32_t g = 0; g < num_gpus_; ++g) links_.push_back({FabricLinkKind::NvlinkDown, g, 0, spec_.nvlink});
  for (std::uint32_t g = 0; g < num_gpus_; ++g) links_.push_back({FabricLinkKind::NicUp, g, 0, spec_.nic});
  for (std::uint32_t g = 0; g < num_gpus_; ++g) links_.push_back({FabricLinkKind::NicDown, g, 0, spec_.nic});
  for (FabricLinkKind kind : {FabricLinkKind::LeafToSpine, FabricLinkKind::SpineToLeaf})
    for (int r = 0; r < spec_.gpus_per_node; ++r)
      for (int s = 0; s < spec_.spines; ++s)
        for (int c = 0; c < spec_.spine_cables; ++c)
          links_.push_back({kind, static_cast<std::uint32_t>(r), static_cast<std::uint32_t>(s), spec_.spine,
                            static_cast<std::uint32_t>(c)});
}

LinkId Fabric::leaf_to_spine(int rail, int spine, int cable) const {
  MESHSIM_ASSERT(cable >= 0 && cable < spec_.spine_cables, "no such spine cable");
  return 4 * num_gpus_ + static_cast<LinkId>((rail * spec_.spines + spine) * spec_.spine_cables + cable);
}

LinkId Fabric::spine_to_leaf(int spine, int rail, int cable) const {
  MESHSIM_ASSERT(cable >= 0 && cable < spec_.spine_cables, "no such spine cable");
  return 4 * num_gpus_ + static_cast<LinkId>(spec_.gpus_per_node * spec_.spines * spec_.spine_cables +
                                             (rail * spec_.spines + spine) * spec_.spine_cables + cable);
}

std::vector<LinkId> Fabric::route(ChipId src, ChipId dst) const {
  MESHSIM_ASSERT(src < num_gpus_ && dst < num_gpus_, "route to an unknown GPU");
  if (src == dst) return {};
  if (node_of(src) == node_of(dst)) return {nvlink_up(src), nvlink_down(dst)};
  const int rail = local_rank(src), to_rail = local_rank(dst);
  if (rail == to_rail) return {nic_up(src), nic_down(dst)};
  const int spine = node_of(dst) % spec_.spines;
  return {nic_up(src), leaf_to_spine(rail, spine, node_of(src) % spec_.spine_cables),
          spine_to_leaf(spine, to_rail, node_of(dst) / spec_.spines % spec_.spine_cables), nic_down(dst)};
}

std::string Fabric::gpu_name(ChipId g) const { return fmt::format("n{}.g{}", node_of(g), local_rank(g)); }

std::string Fabric::link_name(LinkId id) const {
  const FabricLink& l = links_[id];
  switch (l.kind) {
    case FabricLinkKind::NvlinkUp:
      return gpu_name(l.a) + " nvlink up";
    case FabricLinkKind::NvlinkDown:
      return gpu_name(l.a) + " nvlink down";
    case FabricLinkKind::NicUp:
      return gpu_name(l.a) + " nic up";
    case FabricLinkKind::NicDown:
      return gpu_name(l.a) + " nic down";
    case FabricLinkKind::LeafToSpine:
      return fmt::format("rail {} -> spine {}", l.a, l.b) +
             (spec_.spine_cables > 1 ? fmt::format(", cable {}", l.cable) : std::string());
    case FabricLinkKind::SpineToLeaf:
      return fmt::format("spine {} -> rail {}", l.b, l.a) +
             (spec_.spine_cables > 1 ? fmt::format(", cable {}", l.cable) : std::string());
  }
  return "?";
}

bool check_fabric_with_bfs(const Fabric& f) {
  // Vertices: GPUs, then one NVLink switch per node, one leaf per rail, spines.
  const std::size_t gpus = f.num_gpus(), nodes = static_cast<std::size_t>(f.nodes()),
                    rails = static_cast<std::size_t>(f.gpus_per_node());
  const std::size_t nv0 = gpus, leaf0 = nv0 + nodes, spine0 = leaf0 + rails;
  std::size_t spines = 0;
  for (LinkId l = 0; l < f.num_links(); ++l)
    if (f.link(l).kind == FabricLinkKind::LeafToSpine) spines = std::max<std::size_t>(spines, f.link(l).b + 1);
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
  Graph g(spine0 + spines);
  for (LinkId l = 0; l < f.num_links(); ++l) {
    const FabricLink& k = f.link(l);
    switch (k.kind) {
      case FabricLinkKind::NvlinkUp:
        boost::add_edge(k.a, nv0 + static_cast<std::size_t>(f.node_of(k.a)), g);
        break;
      case FabricLinkKind::NvlinkDown:
        boost::add_edge(nv0 + static_cast<std::size_t>(f.node_of(k.a)), k.a, g);
        break;
      case FabricLinkKind::NicUp:
        boost::add_edge(k.a, leaf0 + static_cast<std::size_t>(f.local_rank(k.a)), g);
        break;
      case FabricLinkKind::NicDown:
        boost::add_edge(leaf0 + static_cast<std::size_t>(f.local_rank(k.a)), k.a, g);
        break;
      case FabricLinkKind::LeafToSpine:
        boost::add_edge(leaf0 + k.a, spine0 + k.b, g);
        break;
      case FabricLinkKind::SpineToLeaf:
        boost::add_edge(spine0 + k.b, leaf0 + k.a, g);
        break;
    }
  }
  for (std::size_t s = 0; s < gpus; ++s) {
    std::vector<int> dist(boost::num_vertices(g), -1);
    dist[s] = 0;
    boost::breadth_first_search(
        g, boost::vertex(s, g),
        boost::visitor(boost::make_bfs_visitor(boost::record_distances(dist.data(), boost::on_tree_edge()))));
    for (std::size_t d = 0; d < gpus; ++d) {
      if (dist[d] < 0) return false;
      const auto routed = f.route(static_cast<ChipId>(s), static_cast<ChipId>(d)).size();
      if (routed < static_cast<std::size_t>(dist[d]) || routed > static_cast<std::size_t>(dist[d]) + 2) return false;
    }
  }
  return true;
}

}  // namespace meshsim::topology
