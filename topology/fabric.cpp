#include "topology/fabric.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/visitors.hpp>

#include "base/error.hpp"

namespace meshsim::topology {

Fabric::Fabric(FabricSpec spec) : spec_(spec) {
  MESHSIM_ASSERT(spec_.gpus_per_node >= 1 && spec_.nodes >= 1 && spec_.spines >= 1 && spec_.spine_cables >= 1 &&
                     spec_.leaf_nodes >= 0 && spec_.pod_nodes >= 0 && spec_.core_cables >= 1,
                 "fabric sizes must be positive");
  MESHSIM_ASSERT(spec_.nvlink.bandwidth_bytes_per_s > 0 && spec_.nic.bandwidth_bytes_per_s > 0 &&
                     spec_.spine.bandwidth_bytes_per_s > 0,
                 "fabric bandwidths must be positive");
  num_gpus_ = static_cast<std::uint32_t>(spec_.gpus_per_node * spec_.nodes);
  leaf_nodes_ = spec_.leaf_nodes > 0 ? std::min(spec_.leaf_nodes, spec_.nodes) : spec_.nodes;
  units_ = (spec_.nodes + leaf_nodes_ - 1) / leaf_nodes_;
  if (spec_.pod_nodes > 0 && spec_.pod_nodes < spec_.nodes) {
    MESHSIM_ASSERT(spec_.pod_nodes % leaf_nodes_ == 0, "a pod is a whole number of units");
    units_per_pod_ = spec_.pod_nodes / leaf_nodes_;
  } else {
    units_per_pod_ = units_;
  }
  pods_ = (units_ + units_per_pod_ - 1) / units_per_pod_;
  for (std::uint32_t g = 0; g < num_gpus_; ++g) links_.push_back({FabricLinkKind::NvlinkUp, g, 0, spec_.nvlink});
  for (std::uint32_t g = 0; g < num_gpus_; ++g) links_.push_back({FabricLinkKind::NvlinkDown, g, 0, spec_.nvlink});
  for (std::uint32_t g = 0; g < num_gpus_; ++g) links_.push_back({FabricLinkKind::NicUp, g, 0, spec_.nic});
  for (std::uint32_t g = 0; g < num_gpus_; ++g) links_.push_back({FabricLinkKind::NicDown, g, 0, spec_.nic});
  for (FabricLinkKind kind : {FabricLinkKind::LeafToSpine, FabricLinkKind::SpineToLeaf})
    for (int l = 0; l < leaves(); ++l)
      for (int s = 0; s < spec_.spines; ++s)
        for (int c = 0; c < spec_.spine_cables; ++c)
          links_.push_back({kind, static_cast<std::uint32_t>(l), static_cast<std::uint32_t>(s), spec_.spine,
                            static_cast<std::uint32_t>(c)});
  core_base_ = static_cast<LinkId>(links_.size());
  if (pods_ > 1)
    for (FabricLinkKind kind : {FabricLinkKind::SpineToCore, FabricLinkKind::CoreToSpine})
      for (int p = 0; p < pods_; ++p)
        for (int s = 0; s < spec_.spines; ++s)
          for (int c = 0; c < spec_.core_cables; ++c)
            links_.push_back({kind, static_cast<std::uint32_t>(p), static_cast<std::uint32_t>(s), spec_.spine,
                              static_cast<std::uint32_t>(c)});
}

LinkId Fabric::leaf_to_spine(int leaf, int spine, int cable) const {
  MESHSIM_ASSERT(cable >= 0 && cable < spec_.spine_cables, "no such spine cable");
  return 4 * num_gpus_ + static_cast<LinkId>((leaf * spec_.spines + spine) * spec_.spine_cables + cable);
}

LinkId Fabric::spine_to_leaf(int spine, int leaf, int cable) const {
  MESHSIM_ASSERT(cable >= 0 && cable < spec_.spine_cables, "no such spine cable");
  return 4 * num_gpus_ + static_cast<LinkId>(leaves() * spec_.spines * spec_.spine_cables +
                                             (leaf * spec_.spines + spine) * spec_.spine_cables + cable);
}

LinkId Fabric::spine_to_core(int pod, int spine, int cable) const {
  MESHSIM_ASSERT(pods_ > 1 && cable >= 0 && cable < spec_.core_cables, "no such core cable");
  return core_base_ + static_cast<LinkId>((pod * spec_.spines + spine) * spec_.core_cables + cable);
}

LinkId Fabric::core_to_spine(int spine, int pod, int cable) const {
  MESHSIM_ASSERT(pods_ > 1 && cable >= 0 && cable < spec_.core_cables, "no such core cable");
  return core_base_ + static_cast<LinkId>(pods_ * spec_.spines * spec_.core_cables +
                                          (pod * spec_.spines + spine) * spec_.core_cables + cable);
}

std::vector<LinkId> Fabric::route(ChipId src, ChipId dst) const {
  MESHSIM_ASSERT(src < num_gpus_ && dst < num_gpus_, "route to an unknown GPU");
  if (src == dst) return {};
  if (node_of(src) == node_of(dst)) return {nvlink_up(src), nvlink_down(dst)};
  const int from = leaf_of(src), to = leaf_of(dst);
  if (from == to) return {nic_up(src), nic_down(dst)};
  const int spine = node_of(dst) % spec_.spines;
  const int up = node_of(src) % leaf_nodes_ % spec_.spine_cables;
  const int down = node_of(dst) % leaf_nodes_ / spec_.spines % spec_.spine_cables;
  const int pod_from = pod_of_leaf(from), pod_to = pod_of_leaf(to);
  if (pod_from == pod_to)
    return {nic_up(src), leaf_to_spine(from, spine, up), spine_to_leaf(spine, to, down), nic_down(dst)};
  // A leaf cable's index among the pod's cables on this spine.
  const int pod_leaves = units_per_pod_ * spec_.gpus_per_node;
  const int core_up = ((from - pod_from * pod_leaves) * spec_.spine_cables + up) % spec_.core_cables;
  const int core_down = ((to - pod_to * pod_leaves) * spec_.spine_cables + down) % spec_.core_cables;
  return {nic_up(src),
          leaf_to_spine(from, spine, up),
          spine_to_core(pod_from, spine, core_up),
          core_to_spine(spine, pod_to, core_down),
          spine_to_leaf(spine, to, down),
          nic_down(dst)};
}

int Fabric::cable_period() const {
  if (spec_.nodes % leaf_nodes_ != 0) return 0;
  int period = std::lcm(leaf_nodes_, spec_.spines);
  if (pods_ > 1) {
    if (spec_.nodes % spec_.pod_nodes != 0) return 0;
    period = std::lcm(period, spec_.pod_nodes);
  }
  return period;
}

Fabric::CableBlock Fabric::cable_block(LinkId cable) const {
  MESHSIM_ASSERT(cable >= 4 * num_gpus_ && cable < links_.size(), "not a switch's cable");
  const FabricLink& l = links_[cable];
  const auto g = static_cast<std::uint32_t>(spec_.gpus_per_node);
  if (cable < core_base_) {  // a leaf's: l.a is the leaf, unit * G + rail
    const std::uint32_t unit = l.a / g, rail = l.a % g;
    return {unit * static_cast<std::uint32_t>(leaf_nodes_) * g + rail, static_cast<std::uint32_t>(leaf_nodes_),
            g * static_cast<std::uint32_t>(spec_.spines * spec_.spine_cables)};
  }
  const auto pod_nodes = static_cast<std::uint32_t>(units_per_pod_ * leaf_nodes_);  // a core cable's: l.a is the pod
  return {l.a * pod_nodes * g, pod_nodes, static_cast<std::uint32_t>(spec_.spines * spec_.core_cables)};
}

std::string Fabric::gpu_name(ChipId g) const { return fmt::format("n{}.g{}", node_of(g), local_rank(g)); }

std::string Fabric::leaf_name(int leaf) const {
  const int rail = leaf % spec_.gpus_per_node;
  return units_ == 1 ? fmt::format("rail {}", rail) : fmt::format("unit {} rail {}", leaf / spec_.gpus_per_node, rail);
}

std::string Fabric::spine_name(int pod, int spine) const {
  return pods_ == 1 ? fmt::format("spine {}", spine) : fmt::format("pod {} spine {}", pod, spine);
}

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
      return fmt::format("{} -> {}", leaf_name(static_cast<int>(l.a)), spine_name(pod_of_leaf(static_cast<int>(l.a)), static_cast<int>(l.b))) +
             (spec_.spine_cables > 1 ? fmt::format(", cable {}", l.cable) : std::string());
    case FabricLinkKind::SpineToLeaf:
      return fmt::format("{} -> {}", spine_name(pod_of_leaf(static_cast<int>(l.a)), static_cast<int>(l.b)), leaf_name(static_cast<int>(l.a))) +
             (spec_.spine_cables > 1 ? fmt::format(", cable {}", l.cable) : std::string());
    case FabricLinkKind::SpineToCore:
      return fmt::format("{} -> core {}", spine_name(static_cast<int>(l.a), static_cast<int>(l.b)), l.b) +
             (spec_.core_cables > 1 ? fmt::format(", cable {}", l.cable) : std::string());
    case FabricLinkKind::CoreToSpine:
      return fmt::format("core {} -> {}", l.b, spine_name(static_cast<int>(l.a), static_cast<int>(l.b))) +
             (spec_.core_cables > 1 ? fmt::format(", cable {}", l.cable) : std::string());
  }
  return "?";
}

std::uint32_t Fabric::num_vertices() const {
  return num_gpus_ + static_cast<std::uint32_t>(spec_.nodes + leaves() + pods_ * spec_.spines +
                                                (pods_ > 1 ? spec_.spines : 0));
}

std::pair<std::uint32_t, std::uint32_t> Fabric::link_ends(LinkId id) const {
  const FabricLink& k = links_[id];
  const auto u = [](int v) { return static_cast<std::uint32_t>(v); };
  const std::uint32_t nvswitch0 = num_gpus_, leaf0 = nvswitch0 + u(spec_.nodes), spine0 = leaf0 + u(leaves()),
                      core0 = spine0 + u(pods_ * spec_.spines);
  const auto spine = [&](int pod, std::uint32_t s) { return spine0 + u(pod * spec_.spines) + s; };
  switch (k.kind) {
    case FabricLinkKind::NvlinkUp:
      return {k.a, nvswitch0 + u(node_of(k.a))};
    case FabricLinkKind::NvlinkDown:
      return {nvswitch0 + u(node_of(k.a)), k.a};
    case FabricLinkKind::NicUp:
      return {k.a, leaf0 + u(leaf_of(k.a))};
    case FabricLinkKind::NicDown:
      return {leaf0 + u(leaf_of(k.a)), k.a};
    case FabricLinkKind::LeafToSpine:
      return {leaf0 + k.a, spine(pod_of_leaf(static_cast<int>(k.a)), k.b)};
    case FabricLinkKind::SpineToLeaf:
      return {spine(pod_of_leaf(static_cast<int>(k.a)), k.b), leaf0 + k.a};
    case FabricLinkKind::SpineToCore:
      return {spine(static_cast<int>(k.a), k.b), core0 + k.b};
    case FabricLinkKind::CoreToSpine:
      return {core0 + k.b, spine(static_cast<int>(k.a), k.b)};
  }
  return {0, 0};
}

std::string Fabric::vertex_name(std::uint32_t v) const {
  if (v < num_gpus_) return gpu_name(v);
  int i = static_cast<int>(v - num_gpus_);
  if (i < spec_.nodes) return fmt::format("n{} nvswitch", i);
  i -= spec_.nodes;
  if (i < leaves()) return leaf_name(i) + " leaf";
  i -= leaves();
  if (i < pods_ * spec_.spines) return spine_name(i / spec_.spines, i % spec_.spines);
  return fmt::format("core {}", i - pods_ * spec_.spines);
}

bool check_fabric_with_bfs(const Fabric& f) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> ends(f.num_links());
  for (LinkId l = 0; l < f.num_links(); ++l) ends[l] = f.link_ends(l);
  const std::size_t gpus = f.num_gpus();
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
  Graph g(f.num_vertices());
  for (const auto& [a, b] : ends) boost::add_edge(a, b, g);
  for (std::size_t s = 0; s < gpus; ++s) {
    std::vector<int> dist(boost::num_vertices(g), -1);
    dist[s] = 0;
    boost::breadth_first_search(
        g, boost::vertex(s, g),
        boost::visitor(boost::make_bfs_visitor(boost::record_distances(dist.data(), boost::on_tree_edge()))));
    for (std::size_t d = 0; d < gpus; ++d) {
      if (dist[d] < 0) return false;
      const std::vector<LinkId> route = f.route(static_cast<ChipId>(s), static_cast<ChipId>(d));
      // The route is a path from s to d through the switches...
      std::size_t at = s;
      for (LinkId l : route) {
        if (ends[l].first != at) return false;
        at = ends[l].second;
      }
      if (at != d) return false;
      // ... no shorter than the shortest, and at most the detour of a rail change longer.
      const std::size_t routed = route.size();
      if (routed < static_cast<std::size_t>(dist[d]) || routed > static_cast<std::size_t>(dist[d]) + 2) return false;
    }
  }
  return true;
}

}  // namespace meshsim::topology
