#include <catch2/catch.hpp>

#include "topology/graph_check.hpp"
#include "topology/preset.hpp"
#include "topology/torus.hpp"

using namespace meshsim;
using namespace meshsim::topology;

namespace {
LinkSpec link() { return {45'000'000'000, Tick::from_ps(1'000'000)}; }
}  // namespace

TEST_CASE("Torus: ids, coordinates and neighbours", "[topology]") {
  const Torus t({{4, true}, {3, false}}, link());
  REQUIRE(t.num_chips() == 12);
  CHECK(t.coords(7) == std::vector<int>{3, 1});  // axis 0 fastest
  const std::vector<int> c{3, 1};
  CHECK(t.chip(c) == 7);
  CHECK(t.neighbor(7, 0, Direction::Plus) == 4);   // wraps 3 -> 0 on x
  CHECK(t.neighbor(4, 0, Direction::Minus) == 7);
  CHECK(t.neighbor(7, 1, Direction::Plus) == 11);
  CHECK(t.neighbor(11, 1, Direction::Plus) == kNoChip);  // y has no wraparound
  CHECK(t.link(11, 1, Direction::Plus) == kNoLink);
  // One link per neighbour pair per direction: x ring 4 links x 2 dirs x 3 rows,
  // y line 2 links x 2 dirs x 4 columns.
  CHECK(t.num_links() == 24 + 16);
  CHECK(t.link_name(t.link(7, 0, Direction::Plus)) == "(3,1)+x");
}

TEST_CASE("Torus: shortest direction uses the wraparound, ties go +", "[topology]") {
  const Torus t({{8, true}}, link());
  CHECK(t.axis_hops(0, 0, 3).hops == 3);
  CHECK(t.axis_hops(0, 0, 6).hops == 2);
  CHECK(t.axis_hops(0, 0, 6).direction == Direction::Minus);
  CHECK(t.axis_hops(0, 0, 4).direction == Direction::Plus);
  CHECK(t.axis_hops(0, 5, 1).direction == Direction::Plus);
  const Torus line({{8, false}}, link());
  CHECK(line.axis_hops(0, 0, 7).hops == 7);
}

TEST_CASE("Torus: dimension-order routes equal BFS distances (Boost.Graph)", "[topology]") {
  const std::vector<std::vector<AxisSpec>> shapes = {
      {{8, true}},  {{16, true}}, {{8, false}}, {{4, true}, {4, true}}, {{4, false}, {6, true}},
      {{4, true}, {4, true}, {4, true}}, {{3, false}, {5, true}, {2, false}}, {{16, true}, {16, true}}};
  for (const auto& axes : shapes) {
    const Torus t(axes, link());
    const GraphCheck g = check_with_bfs(t, t.num_chips());
    INFO(t.shape_string());
    CHECK(g.connected);
    CHECK(g.pairs_checked == std::size_t{t.num_chips()} * t.num_chips());
    CHECK(g.route_mismatches == 0);
  }
}

TEST_CASE("Torus: routes in any axis order reach the destination", "[topology]") {
  const Torus t({{4, true}, {4, true}, {4, true}}, link());
  const std::vector<int> zyx{2, 1, 0};
  for (ChipId s = 0; s < t.num_chips(); s += 5)
    for (ChipId d = 0; d < t.num_chips(); d += 3) {
      const auto r = t.route(s, d, zyx);
      CHECK(static_cast<int>(r.size()) == t.hop_distance(s, d));
      if (!r.empty()) CHECK(t.link_info(r.back()).dst == d);
    }
}

TEST_CASE("Presets: public values and wraparound rules", "[topology]") {
  const Preset* v5e = find_preset("tpu-v5e");
  REQUIRE(v5e);
  CHECK(v5e->ici.bandwidth_bytes_per_s == 45'000'000'000);  // one-way per link
  CHECK(v5e->ici.latency.ps() == 1'000'000);
  CHECK(v5e->chip.bf16_flops_per_s == 1.97e14);
  CHECK(v5e->max_axes == 2);
  REQUIRE(find_preset("tpu-v5p"));
  CHECK(find_preset("tpu-v5p")->ici.bandwidth_bytes_per_s == 90'000'000'000);
  CHECK(find_preset("tpu-v4")->chip.hbm_bandwidth_bytes_per_s == 1.2e12);
  CHECK(find_preset("tpu-v6e")->chip.bf16_flops_per_s == 9.2e14);
  CHECK(find_preset("tpu-v9") == nullptr);

  const std::vector<int> s8x16{8, 16}, s16x16{16, 16}, s444{4, 4, 4}, s224{2, 2, 4}, s448{4, 4, 8};
  CHECK(default_wraparound(WrapRule::AxisOf16, s8x16) == std::vector<bool>{false, true});
  CHECK(default_wraparound(WrapRule::AxisOf16, s16x16) == std::vector<bool>{true, true});
  CHECK(default_wraparound(WrapRule::WholeCubes, s444) == std::vector<bool>{true, true, true});
  CHECK(default_wraparound(WrapRule::WholeCubes, s448) == std::vector<bool>{true, true, true});
  CHECK(default_wraparound(WrapRule::WholeCubes, s224) == std::vector<bool>{false, false, false});
}
