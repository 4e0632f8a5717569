// Twisted tori (TPU v4, docs/WORKLOAD.md "topology"): the wiring, shortest routes
// against a breadth-first search over the link graph, and which shapes twist.
#include <catch2/catch.hpp>

#include <set>

#include "topology/graph_check.hpp"
#include "topology/torus.hpp"

using namespace meshsim;
using topology::AxisSpec;
using topology::ChipId;
using topology::Direction;
using topology::Torus;

namespace {

Torus twisted(std::vector<int> shape) {
  std::vector<AxisSpec> axes;
  for (int s : shape) axes.push_back({s, true});
  return Torus(axes, {45'000'000'000, Tick::from_ps(1'000'000)}, true);
}

// Breadth-first hop distances from `src` over the torus's links.
std::vector<int> bfs(const Torus& t, ChipId src) {
  std::vector<int> dist(t.num_chips(), -1);
  std::vector<ChipId> queue{src};
  dist[src] = 0;
  for (std::size_t i = 0; i < queue.size(); ++i)
    for (int a = 0; a < t.num_axes(); ++a)
      for (Direction d : {Direction::Plus, Direction::Minus}) {
        const ChipId n = t.neighbor(queue[i], a, d);
        if (n != topology::kNoChip && dist[n] < 0) dist[n] = dist[queue[i]] + 1, queue.push_back(n);
      }
  return dist;
}

}  // namespace

TEST_CASE("Twisted torus: the short axes' wraparounds land shifted by k along the long axes", "[topology][twisted]") {
  const Torus t = twisted({4, 4, 8});
  CHECK(t.twisted());
  CHECK(t.twisted_axis(0));
  CHECK(t.twisted_axis(1));
  CHECK_FALSE(t.twisted_axis(2));
  const std::vector<int> from{3, 1, 6}, to{0, 1, 2};  // (3,1,6) +x -> (0,1,(6+4) mod 8)
  CHECK(t.neighbor(t.chip(from), 0, Direction::Plus) == t.chip(to));
  CHECK(t.neighbor(t.chip(to), 0, Direction::Minus) == t.chip(from));
  // Not at the wrap: an ordinary neighbour.
  const std::vector<int> a{1, 1, 6}, b{2, 1, 6};
  CHECK(t.neighbor(t.chip(a), 0, Direction::Plus) == t.chip(b));
  // k x 2k x 2k: the short axis shifts both long ones.
  const Torus u = twisted({8, 4, 8});
  CHECK(u.twist(1, 0) == 4);
  CHECK(u.twist(1, 2) == 4);
  CHECK(u.twist(0, 2) == 0);
  const std::vector<int> c{5, 3, 1}, d{1, 0, 5};
  CHECK(u.neighbor(u.chip(c), 1, Direction::Plus) == u.chip(d));
  // Every chip still has one link per axis and direction, and they pair up.
  CHECK(t.num_links() == 128 * 6);
  for (std::uint32_t l = 0; l < t.num_link_slots(); ++l) {
    const topology::Link& link = t.link_info(l);
    const ChipId back = t.neighbor(link.dst, link.axis, link.direction == Direction::Plus ? Direction::Minus : Direction::Plus);
    CHECK(back == link.src);
  }
}

TEST_CASE("Twisted torus: routes are shortest paths (BFS over the links) and follow the links", "[topology][twisted]") {
  for (const std::vector<int>& shape : {std::vector<int>{4, 4, 8}, std::vector<int>{4, 8, 8}, std::vector<int>{8, 4, 8},
                                        std::vector<int>{8, 8, 4}, std::vector<int>{8, 16, 16}}) {
    const Torus t = twisted(shape);
    INFO(t.shape_string());
    const topology::GraphCheck g = topology::check_with_bfs(t, 16);
    CHECK(g.connected);
    CHECK(g.pairs_checked > 0);
    CHECK(g.route_mismatches == 0);
    const std::vector<int> order{0, 1, 2}, rotated{2, 0, 1};
    for (ChipId src : {ChipId{0}, t.num_chips() / 3, t.num_chips() - 1}) {
      const std::vector<int> dist = bfs(t, src);
      for (ChipId dst = 0; dst < t.num_chips(); ++dst) {
        REQUIRE(t.hop_distance(src, dst) == dist[dst]);
        for (const auto& axes : {order, rotated}) {
          const auto routes = t.shortest_routes(src, dst, axes);
          REQUIRE_FALSE(routes.empty());
          CHECK(routes.front() == t.route(src, dst, axes));
          std::set<std::vector<topology::LinkId>> distinct(routes.begin(), routes.end());
          CHECK(distinct.size() == routes.size());
          for (const auto& r : routes) {
            REQUIRE(static_cast<int>(r.size()) == dist[dst]);
            ChipId at = src;
            for (topology::LinkId l : r) {
              REQUIRE(t.link_info(l).src == at);
              at = t.link_info(l).dst;
            }
            CHECK(at == dst);
          }
        }
      }
    }
  }
}

TEST_CASE("Twisted torus: the twist halves the 4x4x8 diameter's long leg; untwisted routes are unchanged",
          "[topology][twisted]") {
  const Torus t = twisted({4, 4, 8});
  const Torus plain({{4, true}, {4, true}, {8, true}}, {45'000'000'000, Tick::from_ps(1'000'000)});
  int max_twisted = 0, max_plain = 0;
  long sum_twisted = 0, sum_plain = 0;
  for (ChipId d = 0; d < t.num_chips(); ++d) {
    max_twisted = std::max(max_twisted, t.hop_distance(0, d));
    max_plain = std::max(max_plain, plain.hop_distance(0, d));
    sum_twisted += t.hop_distance(0, d);
    sum_plain += plain.hop_distance(0, d);
  }
  CHECK(max_plain == 8);
  CHECK(max_twisted < max_plain);
  CHECK(sum_twisted < sum_plain);
  // An untwisted torus's shortest routes: dimension order, both ways at an antipode.
  const std::vector<int> order{0, 1, 2};
  const std::vector<int> antipode{2, 2, 4};
  CHECK(plain.shortest_routes(0, plain.chip(antipode), order).size() == 8);
  CHECK(plain.shortest_routes(0, plain.chip(antipode), order).front() == plain.route(0, plain.chip(antipode), order));
}

TEST_CASE("Twisted torus: which shapes twist", "[topology][twisted]") {
  const auto err = [](std::vector<AxisSpec> axes) { return Torus::twist_error(axes); };
  CHECK(err({{4, true}, {4, true}, {8, true}}).empty());
  CHECK(err({{8, true}, {4, true}, {8, true}}).empty());
  CHECK(err({{12, true}, {12, true}, {24, true}}).empty());
  CHECK(err({{8, true}, {16, true}, {16, true}}).empty());
  CHECK_FALSE(err({{4, true}, {4, true}, {4, true}}).empty());
  CHECK_FALSE(err({{4, true}, {8, true}, {16, true}}).empty());
  CHECK_FALSE(err({{2, true}, {2, true}, {4, true}}).empty());
  CHECK_FALSE(err({{4, true}, {8, true}}).empty());
  CHECK(err({{4, true}, {4, false}, {8, true}}) == "a twisted torus wraps every axis");
}
