#include <catch2/catch.hpp>

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
