#include <catch2/catch.hpp>

#include <algorithm>

#include "topology/fabric.hpp"

using namespace meshsim;
using namespace meshsim::topology;

namespace {
FabricSpec spec(int gpus, int nodes, int spines) {
  const LinkSpec l{450'000'000'000, Tick::from_ps(1'000'000)};
  return FabricSpec{gpus, nodes, l, {50'000'000'000, Tick::from_ps(2'000'000)}, {50'000'000'000, Tick::from_ps(2'000'000)},
                    spines};
}
}  // namespace

TEST_CASE("Fabric: GPUs, NVLink domains and rails", "[topology]") {
  const Fabric f(spec(8, 4, 2));
  REQUIRE(f.num_gpus() == 32);
  CHECK(f.node_of(13) == 1);
  CHECK(f.local_rank(13) == 5);
  CHECK(f.gpu(1, 5) == 13);
  CHECK(f.num_links() == 4 * 32 + 2 * 8 * 2);
  CHECK(f.gpu_name(13) == "n1.g5");
  CHECK(f.link_name(f.nvlink_up(13)) == "n1.g5 nvlink up");
  CHECK(f.link_name(f.leaf_to_spine(3, 1)) == "rail 3 -> spine 1");
  CHECK(f.link_name(f.spine_to_leaf(1, 3)) == "spine 1 -> rail 3");
  CHECK(f.link(f.nic_down(7)).spec.bandwidth_bytes_per_s == 50'000'000'000);
}

TEST_CASE("Fabric: routes stay in the NVLink domain, on the rail, or cross one spine", "[topology]") {
  const Fabric f(spec(8, 4, 2));
  CHECK(f.route(3, 3).empty());
  CHECK(f.route(1, 6) == std::vector<LinkId>{f.nvlink_up(1), f.nvlink_down(6)});
  CHECK(f.route(f.gpu(0, 2), f.gpu(3, 2)) == std::vector<LinkId>{f.nic_up(f.gpu(0, 2)), f.nic_down(f.gpu(3, 2))});
  const std::vector<LinkId> cross = f.route(f.gpu(0, 2), f.gpu(3, 5));
  CHECK(cross == std::vector<LinkId>{f.nic_up(f.gpu(0, 2)), f.leaf_to_spine(2, 1), f.spine_to_leaf(1, 5),
                                     f.nic_down(f.gpu(3, 5))});
}

TEST_CASE("Fabric: every GPU reaches every other (Boost.Graph BFS)", "[topology]") {
  CHECK(check_fabric_with_bfs(Fabric(spec(8, 1, 1))));
  CHECK(check_fabric_with_bfs(Fabric(spec(8, 4, 2))));
  CHECK(check_fabric_with_bfs(Fabric(spec(72, 2, 4))));
}

namespace {
// 8 GPUs per node; units of `leaf` nodes, pods of `pod` nodes.
FabricSpec tiers(int nodes, int leaf, int pod, int spines, int spine_cables, int core_cables) {
  FabricSpec s = spec(8, nodes, spines);
  s.spine_cables = spine_cables;
  s.leaf_nodes = leaf;
  s.pod_nodes = pod;
  s.core_cables = core_cables;
  return s;
}
}  // namespace

TEST_CASE("Fabric: three tiers: leaves per unit, spines per pod, a core", "[topology]") {
  // 16 nodes, units of 4 nodes (4 leaves per rail), pods of 8 nodes (2 pods), 2
  // spines per pod with 2 cables from each leaf (full bisection), 16 core cables.
  const Fabric f(tiers(16, 4, 8, 2, 2, 16));
  CHECK(f.leaves() == 4 * 8);
  CHECK(f.pods() == 2);
  CHECK(f.leaf_of(f.gpu(5, 3)) == 1 * 8 + 3);
  CHECK(f.pod_of_leaf(f.leaf_of(f.gpu(9, 0))) == 1);
  CHECK(f.num_links() == 4 * 128 + 2 * 32 * 2 * 2 + 2 * 2 * 2 * 16);
  CHECK(f.link_name(f.leaf_to_spine(11, 1, 1)) == "unit 1 rail 3 -> pod 0 spine 1, cable 1");
  CHECK(f.link_name(f.leaf_to_spine(19, 0)) == "unit 2 rail 3 -> pod 1 spine 0, cable 0");
  CHECK(f.link_name(f.spine_to_core(1, 0, 3)) == "pod 1 spine 0 -> core 0, cable 3");
  CHECK(f.link_name(f.core_to_spine(1, 0, 3)) == "core 1 -> pod 0 spine 1, cable 3");
  // Same unit and rail: the leaf only.
  CHECK(f.route(f.gpu(0, 2), f.gpu(3, 2)) == std::vector<LinkId>{f.nic_up(f.gpu(0, 2)), f.nic_down(f.gpu(3, 2))});
  // Same rail, next unit of the pod: up to spine (dst node 5 mod 2 = 1), cable of
  // source node 0 (0 mod 2), down cable of destination index 1 in its unit (1 / 2 mod 2 = 0).
  CHECK(f.route(f.gpu(0, 2), f.gpu(5, 2)) == std::vector<LinkId>{f.nic_up(f.gpu(0, 2)), f.leaf_to_spine(2, 1, 0),
                                                                f.spine_to_leaf(1, 8 + 2, 0), f.nic_down(f.gpu(5, 2))});
  // Other pod: node 3 (index 3: cable 1) to node 14 (unit 3, index 2, spine 0, down cable 1).
  // Core cables: the source leaf (rail 2 of unit 0) is leaf 2 of its pod: (2 * 2 + 1) mod 16;
  // the destination leaf (unit 3 rail 6) is leaf 8 + 6 of pod 1: (14 * 2 + 1) mod 16.
  CHECK(f.route(f.gpu(3, 2), f.gpu(14, 6)) ==
        std::vector<LinkId>{f.nic_up(f.gpu(3, 2)), f.leaf_to_spine(2, 0, 1), f.spine_to_core(0, 0, 5),
                            f.core_to_spine(0, 1, 13), f.spine_to_leaf(0, 3 * 8 + 6, 1), f.nic_down(f.gpu(14, 6))});
  CHECK(f.vertex_name(f.link_ends(f.spine_to_core(1, 1, 0)).first) == "pod 1 spine 1");
  CHECK(f.vertex_name(f.link_ends(f.spine_to_core(1, 1, 0)).second) == "core 1");
  CHECK(f.vertex_name(f.link_ends(f.nic_up(f.gpu(5, 3))).second) == "unit 1 rail 3 leaf");
  CHECK(check_fabric_with_bfs(f));
}

TEST_CASE("Fabric: one unit and one pod is the two-tier fabric, link for link", "[topology]") {
  FabricSpec two = spec(8, 6, 2);
  two.spine_cables = 3;
  FabricSpec three = two;
  three.leaf_nodes = 6;
  three.pod_nodes = 6;
  const Fabric a(two), b(three);
  REQUIRE(a.num_links() == b.num_links());
  for (LinkId l = 0; l < a.num_links(); ++l) CHECK(a.link_name(l) == b.link_name(l));
  for (ChipId s = 0; s < a.num_gpus(); ++s)
    for (ChipId d = 0; d < a.num_gpus(); ++d) CHECK(a.route(s, d) == b.route(s, d));
}

TEST_CASE("Fabric: full-bisection tiers give any permutation its own cables", "[topology]") {
  // One spine, a cable per node of the unit, a core cable per leaf cable: every
  // shift permutation between nodes uses each cable at most once.
  const Fabric f(tiers(32, 4, 16, 1, 4, 4 * 8 * 4));
  CHECK(check_fabric_with_bfs(f));
  for (int shift = 1; shift < 32; ++shift) {
    std::vector<int> used(f.num_links(), 0);
    for (int n = 0; n < 32; ++n)
      for (int g = 0; g < 8; ++g)
        for (LinkId l : f.route(f.gpu(n, g), f.gpu((n + shift) % 32, (g + 1) % 8))) ++used[l];
    int worst = 0;
    for (LinkId l = 4 * f.num_gpus(); l < f.num_links(); ++l) worst = std::max(worst, used[l]);
    CHECK(worst == 1);
  }
  // Twice oversubscribed leaves: half the cables, so some cable carries two flows.
  const Fabric over(tiers(32, 4, 16, 1, 2, 4 * 8 * 2));
  std::vector<int> used(over.num_links(), 0);
  for (int n = 0; n < 32; ++n)
    for (LinkId l : over.route(over.gpu(n, 0), over.gpu((n + 4) % 32, 0))) ++used[l];
  CHECK(*std::max_element(used.begin() + 4 * over.num_gpus(), used.end()) == 2);
}

TEST_CASE("Fabric: a shift of whole blocks of the cable period carries every route onto a route", "[topology]") {
  // Every route against its image under every shift of the nodes by a
  // multiple of cable_period(), each cable mapped as Translations maps it
  // (the same cable of its owner's image unit or pod, cable_block).
  struct Case {
    int nodes, spines, spine_cables, leaf_nodes, pod_nodes, core_cables, period;
  };
  for (const Case& c : {Case{8, 1, 2, 2, 0, 1, 2}, Case{8, 2, 1, 2, 0, 1, 2}, Case{12, 3, 2, 2, 0, 1, 6},
                        Case{8, 2, 2, 2, 4, 2, 4}, Case{16, 1, 1, 2, 8, 3, 8}, Case{6, 1, 1, 4, 0, 1, 0}}) {
    INFO("nodes " << c.nodes << ", spines " << c.spines << ", leaf_nodes " << c.leaf_nodes << ", pod_nodes "
                  << c.pod_nodes);
    FabricSpec s = spec(2, c.nodes, c.spines);
    s.spine_cables = c.spine_cables;
    s.leaf_nodes = c.leaf_nodes;
    s.pod_nodes = c.pod_nodes;
    s.core_cables = c.core_cables;
    const Fabric f(s);
    REQUIRE(f.cable_period() == c.period);
    if (c.period == 0) continue;  // a partial unit: no such shift
    const std::uint32_t g = 2;
    const auto image = [&](LinkId l, int shift) -> LinkId {
      if (l < 4 * f.num_gpus()) {  // a GPU's: the same link of the shifted GPU
        const ChipId gpu = l % f.num_gpus();
        const ChipId to = (gpu + static_cast<ChipId>(shift) * g) % f.num_gpus();
        return l - gpu + to;
      }
      const Fabric::CableBlock b = f.cable_block(l);
      const std::uint32_t owner = b.owner / g;  // its node
      const std::uint32_t to = (owner + static_cast<std::uint32_t>(shift)) % static_cast<std::uint32_t>(c.nodes);
      return l + (to / b.nodes - owner / b.nodes) * b.id_stride;  // unsigned: wraps back into range
    };
    for (int shift = c.period; shift < c.nodes; shift += c.period)
      for (ChipId src = 0; src < f.num_gpus(); ++src)
        for (ChipId dst = 0; dst < f.num_gpus(); ++dst) {
          const auto moved = [&](ChipId x) { return (x + static_cast<ChipId>(shift) * g) % f.num_gpus(); };
          std::vector<LinkId> want;
          for (LinkId l : f.route(src, dst)) want.push_back(image(l, shift));
          CHECK(f.route(moved(src), moved(dst)) == want);
        }
  }
}
