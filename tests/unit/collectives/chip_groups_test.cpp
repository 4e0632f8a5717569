// Collectives over explicit groups of chips (group_collective): strided groups on
// a ring and on a 4x4x4, diagonal pairs on a 2x2, against their closed forms in the
// bandwidth regime (docs/MODEL.md "Collectives over any group of chips"), the
// link bytes counted exactly, and a group that is a whole axis against the axis ring.
#include <catch2/catch.hpp>

#include "harness.hpp"

using namespace meshsim;
using namespace meshsim::test;

namespace {

constexpr std::uint64_t kV = 3ull << 27;  // 402,653,184 bytes: every share below divides it
using Groups = std::vector<std::vector<topology::ChipId>>;

Outcome run_groups(const Torus& t, Kind kind, const Groups& groups, std::uint64_t v = kV) {
  return run(t, 1, [&](sim::ProgramBuilder& b, const auto& p) { collectives::group_collective(b, t, kind, groups, v, p[0]); });
}

// Groups of every chip and the chips `stride` apart from it along `axis`
// (group members in increasing coordinate, each group listed once).
Groups strided(const Torus& t, int axis, int stride) {
  Groups out;
  for (topology::ChipId c = 0; c < t.num_chips(); ++c) {
    if (t.coord(c, axis) >= stride) continue;
    std::vector<topology::ChipId> g;
    for (int x = t.coord(c, axis); x < t.axis(axis).size; x += stride) g.push_back(t.with_coord(c, axis, x));
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace

TEST_CASE("Group collectives: stride s on a ring of N, every link shared by s ring edges", "[collectives]") {
  // n = N/s members per group, each step s hops (s < N/2: one route). Every ring
  // edge carries (n-1)/2 shards of V/n each way; each link lies under s edges.
  const double v = static_cast<double>(kV);
  for (auto [ring, s] : {std::pair{8u, 2u}, std::pair{12u, 3u}, std::pair{16u, 4u}}) {
    const Torus t = torus({{static_cast<int>(ring), true}});
    const Groups g = strided(t, 0, static_cast<int>(s));
    const std::uint64_t n = ring / s;
    INFO("ring of " << ring << ", stride " << s);
    const double gather = static_cast<double>(s * (n - 1)) / 2.0 * (v / static_cast<double>(n)) / kB;
    const Outcome ag = run_groups(t, Kind::AllGather, g);
    CHECK(ag.makespan.seconds() == Approx(gather).epsilon(0.005));
    CHECK(ag.capacity_respected);
    // Every chip: (n-1) shard-equivalents out (n/2 steps each way, the last
    // halved when n is even), each step over s links.
    CHECK(ag.link_bytes == ring * (n - 1) * (kV / n) * s);
    CHECK(ag.max_link_bytes * 2 * n == s * (n - 1) * kV);
    CHECK(run_groups(t, Kind::ReduceScatter, g).makespan.seconds() == Approx(gather).epsilon(0.005));
    CHECK(run_groups(t, Kind::AllReduce, g).makespan.seconds() == Approx(2 * gather).epsilon(0.005));
  }
  // AllToAll, ring of 8, stride 2: pieces of V/16 to the members one step away
  // (2 hops) and halves to the antipodal member (4 hops, both ways round):
  // 2 x V/16 + 4 x V/32 = V/4 on every link.
  const Torus t = torus({{8, true}});
  const Outcome a2a = run_groups(t, Kind::AllToAll, strided(t, 0, 2));
  CHECK(a2a.makespan.seconds() == Approx(v / 4 / kB).epsilon(0.005));
  CHECK(a2a.max_link_bytes == kV / 4);
}

TEST_CASE("Group collectives: {{0,2},{1,3}} on a ring of 4 goes both ways round", "[collectives]") {
  // Each pair is half the ring apart: every step takes both routes. Each chip's
  // shard V/2 crosses 2 links; the 8 links carry 4 x V/2 x 2 / 8 = V/2 each.
  const Torus t = torus({{4, true}});
  const Groups g{{0, 2}, {1, 3}};
  const double v = static_cast<double>(kV);
  const Outcome ag = run_groups(t, Kind::AllGather, g);
  CHECK(ag.makespan.seconds() == Approx(v / 2 / kB).epsilon(0.005));
  CHECK(ag.max_link_bytes == kV / 2);
  CHECK(ag.link_bytes == 4 * kV);
  CHECK(run_groups(t, Kind::ReduceScatter, g).makespan.seconds() == Approx(v / 2 / kB).epsilon(0.005));
  CHECK(run_groups(t, Kind::AllReduce, g).makespan.seconds() == Approx(v / kB).epsilon(0.005));
  // AllToAll: a piece of V/4 to the partner, half each way: V/4 per link.
  CHECK(run_groups(t, Kind::AllToAll, g).makespan.seconds() == Approx(v / 4 / kB).epsilon(0.005));
}

TEST_CASE("Group collectives: diagonal pairs on a 2x2 use the X-first and the Y-first route", "[collectives]") {
  // (0,0)-(1,1) and (1,0)-(0,1): each chip's V/2 over two 2-hop routes; the 8
  // links carry V/2 each; AllToAll V/4 each.
  const Torus t = torus({{2, false}, {2, false}});
  const Groups g{{0, 3}, {1, 2}};
  const double v = static_cast<double>(kV);
  const Outcome ag = run_groups(t, Kind::AllGather, g);
  CHECK(ag.makespan.seconds() == Approx(v / 2 / kB).epsilon(0.005));
  CHECK(ag.max_link_bytes == kV / 2);
  CHECK(ag.link_bytes == 4 * kV);
  CHECK(run_groups(t, Kind::AllReduce, g).makespan.seconds() == Approx(v / kB).epsilon(0.005));
  CHECK(run_groups(t, Kind::AllToAll, g).makespan.seconds() == Approx(v / 4 / kB).epsilon(0.005));
}

TEST_CASE("Group collectives: strided groups on a 4x4x4", "[collectives]") {
  const Torus t = torus({{4, true}, {4, true}, {4, true}});
  const double v = static_cast<double>(kV);
  SECTION("pairs 2 apart along x: every x-ring as the ring of 4 above") {
    const Groups g = strided(t, 0, 2);
    CHECK(g.size() == 32);
    const Outcome ag = run_groups(t, Kind::AllGather, g);
    CHECK(ag.makespan.seconds() == Approx(v / 2 / kB).epsilon(0.005));
    CHECK(ag.max_link_bytes == kV / 2);
    CHECK(run_groups(t, Kind::AllReduce, g).makespan.seconds() == Approx(v / kB).epsilon(0.005));
    CHECK(run_groups(t, Kind::AllToAll, g).makespan.seconds() == Approx(v / 4 / kB).epsilon(0.005));
  }
  SECTION("pairs (x,y,z)-(x+2,y+2,z): 8 four-hop routes each, every x and y link loaded alike") {
    Groups g;
    for (topology::ChipId c = 0; c < t.num_chips(); ++c)
      if (t.coord(c, 1) < 2) g.push_back({c, t.with_coord(t.with_coord(c, 0, (t.coord(c, 0) + 2) % 4), 1, t.coord(c, 1) + 2)});
    CHECK(g.size() == 32);
    // 64 chips x V/2 x 4 hops over the 256 x and y links: V/2 each.
    const Outcome ag = run_groups(t, Kind::AllGather, g);
    CHECK(ag.link_bytes == 128 * kV);
    CHECK(ag.max_link_bytes == kV / 2);
    CHECK(ag.makespan.seconds() == Approx(v / 2 / kB).epsilon(0.005));
    CHECK(ag.capacity_respected);
  }
}

TEST_CASE("Group collectives: a group that is a whole ring runs as the axis ring", "[collectives]") {
  // One-hop steps, both ways round, the same bytes: the axis ring's schedule.
  for (int x : {5, 8}) {
    const Torus t = torus({{x, true}, {2, false}});
    const Groups g = strided(t, 0, 1);
    INFO("ring of " << x);
    for (Kind kind : {Kind::AllGather, Kind::ReduceScatter, Kind::AllReduce}) {
      const std::vector<int> axes{0};
      const Outcome axis = run(t, 1, [&](sim::ProgramBuilder& b, const auto& p) { collectives::build(b, t, kind, axes, kV, p[0]); });
      const Outcome group = run_groups(t, kind, g);
      CHECK(group.makespan == axis.makespan);
      CHECK(group.link_bytes == axis.link_bytes);
    }
  }
}

TEST_CASE("Group collectives: groups of one chip move nothing; counting matches building", "[collectives]") {
  const Torus t = torus({{4, true}, {4, true}});
  CHECK(run_groups(t, Kind::AllReduce, {{0}, {5}}).link_bytes == 0);
  const Groups g{{0, 5, 10, 15}, {1, 6, 11, 12}};
  for (Kind kind : {Kind::AllGather, Kind::ReduceScatter, Kind::AllReduce, Kind::AllToAll}) {
    sim::ProgramBuilder b;
    const sim::OpId id = b.add_op();
    std::vector<sim::TaskId> entry, exit;
    for (std::uint32_t c = 0; c < t.num_chips(); ++c) entry.push_back(b.join(id));
    for (std::uint32_t c = 0; c < t.num_chips(); ++c) exit.push_back(b.join(id));
    const std::size_t before = b.num_tasks();
    collectives::group_collective(b, t, kind, g, kV, {id, entry, exit});
    std::size_t transfers = 0;
    for (std::size_t i = before; i < b.num_tasks(); ++i)
      transfers += b.task(static_cast<sim::TaskId>(i)).kind() == sim::TaskKind::Transfer ? 1u : 0u;
    const collectives::GroupLoad load = collectives::group_load(t, kind, g, kV);
    CHECK(load.transfers == transfers);
    // The busiest link's bytes as counted equal the bytes it carried when run.
    CHECK(load.busiest_bytes == run_groups(t, kind, g).max_link_bytes);
  }
}
