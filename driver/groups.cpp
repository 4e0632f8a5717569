#include "driver/groups.hpp"

#include <utility>

#include "base/error.hpp"
#include "topology/fabric.hpp"

namespace meshsim::driver {

std::optional<TranslatedGroups> translated_groups(const workloads::Workload& w, const topology::System& system) {
  const topology::Torus& t = system.grid();
  // A twisted wraparound lands shifted along other axes: its groups are not
  // translates of each other.
  if (w.training || t.twisted()) return std::nullopt;
  std::vector<bool> in_a(static_cast<std::size_t>(t.num_axes()), false);
  for (const workloads::Op& op : w.ops) {
    // Explicit groups (part of a torus axis, imported replica groups) say
    // nothing of the axes: the quotient by the translations reduces them.
    if (op.chips || op.kind == OpKind::Send || op.explicit_groups()) return std::nullopt;
    for (int a : op.comm_axes()) in_a[static_cast<std::size_t>(a)] = true;
  }
  // On a GPU fabric two kinds of groups are alike: the NVLink domains, for
  // collectives inside the node (spines are assigned by node number, so no
  // node axis may tell groups apart); and the rails, for collectives across all
  // the nodes and not inside them (a rail's traffic stays on its NICs, its
  // leaves' cables and the core cables of those, which are its own unless the
  // spines are oversubscribed).
  bool across = false, inside = false;  // some collective spans nodes; some is inside them
  for (int a = 0; a < t.num_axes(); ++a) (t.axis(a).in_node ? inside : across) |= in_a[static_cast<std::size_t>(a)];
  if (const topology::Fabric* fabric = system.fabric(); fabric && across) {
    if (inside) return std::nullopt;
    for (int a = 0; a < t.num_axes(); ++a)
      if (!t.axis(a).in_node && !in_a[static_cast<std::size_t>(a)] && t.axis(a).size > 1) return std::nullopt;
    const topology::Fabric& f = *fabric;
    if (f.pods() > 1 && f.core_cables() < f.leaves_per_pod() * f.spine_cables()) return std::nullopt;
  }
  std::vector<int> others;  // the axes that tell the groups apart
  for (int a = 0; a < t.num_axes(); ++a)
    if (!in_a[static_cast<std::size_t>(a)] && t.axis(a).size > 1) others.push_back(a);
  if (others.empty()) return std::nullopt;

  TranslatedGroups g;
  auto first = std::make_shared<std::vector<topology::ChipId>>();
  for (topology::ChipId c = 0; c < t.num_chips(); ++c) {
    bool zero = true;
    for (int a : others) zero = zero && t.coord(c, a) == 0;
    if (zero) first->push_back(c);
  }
  g.first = std::move(first);
  // Group 0 holds chip 0, so a group's offset is the id of its chip at 0 on the
  // collectives' axes: every chip with those coordinates 0 but group 0's.
  for (topology::ChipId c = 1; c < t.num_chips(); ++c) {
    bool base = true;
    for (int a = 0; a < t.num_axes() && base; ++a) base = !in_a[static_cast<std::size_t>(a)] || t.coord(c, a) == 0;
    if (base) g.offsets.push_back(c);
  }
  return g;
}

workloads::Workload first_group(const workloads::Workload& w, const TranslatedGroups& g) {
  workloads::Workload out = w;
  for (workloads::Op& op : out.ops) op.chips = g.first;
  return out;
}

sim::Reduced::Class translated_class(const TranslatedGroups& g, const topology::System& system, const Expanded& ex) {
  const topology::Torus& t = system.grid();
  // A chip's resources, as ids and how far they move per chip of offset.
  std::vector<std::uint32_t> resources;
  std::vector<std::uint32_t> scale;
  const auto links = static_cast<std::uint32_t>(ex.links);
  if (const topology::Fabric* fabric = system.fabric()) {
    // The fabric's per-GPU links come in four blocks of one per GPU (NVLink up,
    // down, NIC up, down: topology/fabric.hpp); an in-node group uses no spine.
    const std::uint32_t n = t.num_chips();
    for (topology::ChipId c : *g.first)
      for (std::uint32_t block = 0; block < 4; ++block) resources.push_back(block * n + c), scale.push_back(1);
    const topology::Fabric& f = *fabric;
    if (g.first->size() > 1 && f.node_of(g.first->back()) != 0) {
      // Rail 0: its leaves' cables, and their core cables; rail k's are the same
      // ids moved by k leaves (or k leaf cables on the core).
      const int rails = f.gpus_per_node();
      const auto id = [](topology::LinkId l) { return static_cast<std::uint32_t>(l); };
      for (int u = 0; u < f.units(); ++u)
        for (int s = 0; s < f.spines(); ++s)
          for (int c = 0; c < f.spine_cables(); ++c) {
            const int leaf = u * rails;
            for (const auto& [l0, l1] : {std::pair{f.leaf_to_spine(leaf, s, c), f.leaf_to_spine(leaf + 1, s, c)},
                                         std::pair{f.spine_to_leaf(s, leaf, c), f.spine_to_leaf(s, leaf + 1, c)}})
              resources.push_back(id(l0)), scale.push_back(id(l1) - id(l0));
            if (f.pods() == 1) continue;
            // The core cable of this leaf cable: its index among the pod's on spine s.
            const int k = (leaf - f.pod_of_leaf(leaf) * f.leaves_per_pod()) * f.spine_cables() + c;
            const int pod = f.pod_of_leaf(leaf);
            resources.push_back(id(f.spine_to_core(pod, s, k))), scale.push_back(static_cast<std::uint32_t>(f.spine_cables()));
            resources.push_back(id(f.core_to_spine(s, pod, k))), scale.push_back(static_cast<std::uint32_t>(f.spine_cables()));
          }
    }
  } else {
    const auto slots = static_cast<std::uint32_t>(2 * t.num_axes());  // Torus: chip * 2 * axes + axis * 2 + dir
    MESHSIM_ASSERT(links == t.num_link_slots(), "a torus's resources are its link slots");
    for (topology::ChipId c : *g.first)
      for (std::uint32_t k = 0; k < slots; ++k) resources.push_back(c * slots + k), scale.push_back(slots);
  }
  for (topology::ChipId c : *g.first) resources.push_back(links + c), scale.push_back(1);  // compute units

  sim::Reduced::Class cls;
  cls.copies = g.copies();
  cls.resources = resources;
  cls.replicas.reserve(g.offsets.size());
  for (topology::ChipId offset : g.offsets) {
    std::vector<std::uint32_t> replica(resources.size());
    for (std::size_t k = 0; k < resources.size(); ++k) {
      replica[k] = resources[k] + offset * scale[k];
      MESHSIM_ASSERT(replica[k] < ex.resources.size(), "a translated resource past the system");
    }
    cls.replicas.push_back(std::move(replica));
  }
  return cls;
}

}  // namespace meshsim::driver
