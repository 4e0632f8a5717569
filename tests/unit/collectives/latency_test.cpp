// The latency floor and the knee of the cheat sheet's T = max(T_min * X/2, V/W).
#include <catch2/catch.hpp>

#include <cmath>

#include "harness.hpp"

using namespace meshsim;
using namespace meshsim::test;

TEST_CASE("Latency floor: at <= 1 kB per shard the time is hops x per-hop latency", "[collectives]") {
  struct Case {
    std::vector<AxisSpec> axes;
    std::vector<int> over;
    int hops;  // floor(X/2) per wrapped axis, X-1 per line, summed over axes
  };
  const std::vector<Case> cases = {
      {{{16, true}}, {0}, 8}, {{{8, true}}, {0}, 4},   {{{7, true}}, {0}, 3},
      {{{8, false}}, {0}, 7}, {{{16, true}, {16, true}}, {0, 1}, 16},
      {{{4, true}, {4, true}, {4, true}}, {0, 1, 2}, 6},
  };
  for (const Case& c : cases) {
    const Torus t = torus(c.axes);
    // `shard`: the largest message a chip sends in any phase (the last phase's,
    // which carries everything gathered before it).
    const auto last = static_cast<std::uint64_t>(t.axis(c.over.back()).size);
    for (std::uint64_t shard : {1ull, 64ull, 1024ull}) {
      const std::uint64_t v = shard * last * c.over.size();
      INFO(t.shape_string() << " shard " << shard);
      const double ag = simulate(t, Kind::AllGather, c.over, v);
      CHECK(std::fabs(ag - c.hops * kAlpha) <= kAlpha);
      const double rs = simulate(t, Kind::ReduceScatter, c.over, v);
      CHECK(std::fabs(rs - c.hops * kAlpha) <= kAlpha);
      // An AllReduce is a ReduceScatter then an AllGather: twice the hops, within
      // one hop latency for each.
      const double ar = simulate(t, Kind::AllReduce, c.over, v);
      CHECK(std::fabs(ar - 2 * c.hops * kAlpha) <= 2 * kAlpha);
    }
  }
}

TEST_CASE("Latency floor: the knee of a v5e axis of 16 sits where shard / bandwidth = hop latency", "[collectives]") {
  // Sweep 1 kB .. 1 GB per shard. The schedule's own terms are the latency term
  // floor(X/2) * T_min = 8 us and the bandwidth term (X-1)/X * V/W; the simulated
  // time lies between their max and their sum, and is farthest above the max
  // (relative to it) at the knee, shard / (45 GB/s) ~ 1 us, i.e. ~45 kB.
  const Torus t = torus({{16, true}});
  double worst_excess = 0, knee_shard = 0;
  for (double shard = 1e3; shard <= 1.0001e9; shard *= std::sqrt(2.0)) {
    const auto s = static_cast<std::uint64_t>(shard);
    const double v = static_cast<double>(s) * 16;
    const double sim = simulate(t, Kind::AllGather, {0}, s * 16);
    const double latency = 8 * kAlpha;
    const double bandwidth = 15.0 / 16.0 * v / (2 * kB);
    INFO("shard " << s << " bytes: simulated " << sim << " s");
    CHECK(sim >= std::max(latency, bandwidth) * (1 - 1e-9));
    CHECK(sim <= (latency + bandwidth) * (1 + 1e-9) + 2 * static_cast<double>(kChunk) / kB);
    const double excess = sim / std::max(latency, bandwidth);
    if (excess > worst_excess) {
      worst_excess = excess;
      knee_shard = shard;
    }
  }
  CHECK(knee_shard >= 22.5e3);
  CHECK(knee_shard <= 90e3);
  CHECK(worst_excess > 1.1);  // a visible knee: ~1.2 above the max there
}
