#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "topology/system.hpp"

using namespace meshsim;
using namespace meshsim::topology;

namespace {

const LinkSpec kIci{45'000'000'000, Tick::from_ps(1'000'000)};
const LinkSpec kNvlink{450'000'000'000, Tick::from_ps(1'000'000)};
const LinkSpec kNic{50'000'000'000, Tick::from_ps(2'000'000)};

}  // namespace

TEST_CASE("System: a TPU torus is its own grid and links", "[topology]") {
  const Torus torus({{4, true}, {3, false}}, kIci);
  const System s{Torus(torus)};
  CHECK_FALSE(s.switched());
  CHECK(s.fabric() == nullptr);
  CHECK(s.num_chips() == 12);
  REQUIRE(s.num_axes() == 2);
  CHECK(s.axis_name(0) == "x");
  CHECK(s.axis_name(1) == "y");
  // Chip 0 to chip (2, 2): two hops along x, two along y (no wraparound on y).
  const std::vector<LinkId> route = s.route(0, 2 + 4 * 2);
  CHECK(route.size() == 4);
  CHECK(route == torus.route(0, 2 + 4 * 2));
  for (LinkId l : route) CHECK(s.link_spec(l).bandwidth_bytes_per_s == kIci.bandwidth_bytes_per_s);
}

TEST_CASE("System: GPUs on a grid, linked by their fabric", "[topology]") {
  // Two nodes of 8 GPUs: GPU g of node n is chip g + 8 n on the grid (gpu, node).
  const Torus grid({{8, false, false, /*in_node=*/true}, {2, false}}, kNvlink);
  const System s(grid, Fabric(FabricSpec{8, 2, kNvlink, kNic, kNic, 1}), {"gpu", "node"});
  CHECK(s.switched());
  REQUIRE(s.fabric() != nullptr);
  CHECK(s.fabric()->num_gpus() == 16);
  CHECK(s.num_chips() == 16);
  CHECK(s.axis_name(0) == "gpu");
  CHECK(s.axis_name(1) == "node");
  // In a node: up into the NVLink switch and down, at the NVLink rate, whatever
  // the grid's own links would be.
  const std::vector<LinkId> inside = s.route(0, 5);
  REQUIRE(inside.size() == 2);
  for (LinkId l : inside) CHECK(s.link_spec(l).bandwidth_bytes_per_s == kNvlink.bandwidth_bytes_per_s);
  // Across the nodes on GPU 0's rail: its NIC up to the rail's leaf and down the
  // other GPU's NIC, at the NIC rate.
  const std::vector<LinkId> across = s.route(0, 8);
  CHECK(across == s.fabric()->route(0, 8));
  REQUIRE(!across.empty());
  CHECK(s.link_spec(across.front()).bandwidth_bytes_per_s == kNic.bandwidth_bytes_per_s);
  CHECK(s.link_spec(across.back()).bandwidth_bytes_per_s == kNic.bandwidth_bytes_per_s);
}
