#include "driver/groups.hpp"

#include "base/error.hpp"

namespace meshsim::driver {

std::optional<TranslatedGroups> translated_groups(const workloads::Workload& w, const topology::Torus& t) {
  // A twisted wraparound lands shifted along other axes: its groups are not
  // translates of each other.
  if (w.training || t.twisted()) return std::nullopt;
  std::vector<bool> in_a(static_cast<std::size_t>(t.num_axes()), false);
  for (const workloads::Op& op : w.ops) {
    if (op.chips || op.kind == OpKind::Send) return std::nullopt;
    for (int a : op.hw_axes) in_a[static_cast<std::size_t>(a)] = true;
  }
  // On a GPU fabric only the NVLink domains are alike (rails and spines are
  // assigned by node number): collectives inside the node only.
  if (w.hardware.gpu)
    for (int a = 1; a < t.num_axes(); ++a)
      if (in_a[static_cast<std::size_t>(a)]) return std::nullopt;
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

sim::Reduced::Class translated_class(const TranslatedGroups& g, const workloads::Workload& w, const topology::Torus& t,
                                     const Expanded& ex) {
  // A chip's resources, as ids and how far they move per chip of offset.
  std::vector<std::uint32_t> resources;
  std::vector<std::uint32_t> scale;
  const auto links = static_cast<std::uint32_t>(ex.links);
  if (w.hardware.gpu) {
    // The fabric's per-GPU links come in four blocks of one per GPU (NVLink up,
    // down, NIC up, down: topology/fabric.hpp); an in-node group uses no spine.
    const std::uint32_t n = t.num_chips();
    for (topology::ChipId c : *g.first)
      for (std::uint32_t block = 0; block < 4; ++block) resources.push_back(block * n + c), scale.push_back(1);
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
