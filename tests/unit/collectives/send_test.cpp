// Point-to-point sends: cut-through forwarding over one or several routes.
#include <catch2/catch.hpp>

#include "harness.hpp"

using namespace meshsim;
using namespace meshsim::test;

namespace {
double send_time(const Torus& t, topology::ChipId src, topology::ChipId dst, std::uint64_t bytes) {
  return run(t, 1, [&](sim::ProgramBuilder& b, const auto& p) { collectives::send(b, t, src, dst, bytes, p[0]); })
      .makespan.seconds();
}
}  // namespace

TEST_CASE("Send: one route, h hops: bytes/b + h latencies + (h-1) forwarding chunks", "[collectives]") {
  const Torus t = torus({{16, true}});
  const std::uint64_t bytes = 100'000'000;
  for (int h : {1, 3, 8}) {
    const double want = static_cast<double>(bytes) / kB + h * kAlpha + (h - 1) * static_cast<double>(kChunk) / kB;
    CHECK(send_time(t, 0, static_cast<topology::ChipId>(h), bytes) == Approx(want).epsilon(1e-6));
  }
}

TEST_CASE("Send: disjoint X-first and Y-first routes run at once", "[collectives]") {
  const Torus t = torus({{8, true}, {8, true}});
  const std::uint64_t bytes = 100'000'000;
  const std::vector<int> a{0, 0}, b{3, 2};
  const double two_routes = send_time(t, t.chip(a), t.chip(b), bytes);
  const double want = static_cast<double>(bytes) / 2 / kB + 5 * kAlpha + 4 * static_cast<double>(kChunk) / kB;
  CHECK(two_routes == Approx(want).epsilon(1e-6));
  // Twice as fast as a single route in the bandwidth regime.
  const std::vector<int> c{3, 0};
  CHECK(send_time(t, t.chip(a), t.chip(c), bytes) / two_routes == Approx(2.0).epsilon(0.01));
}

TEST_CASE("Send: three axes use three routes", "[collectives]") {
  const Torus t = torus({{4, true}, {4, true}, {4, true}});
  CHECK(collectives::send_paths(t, 0, t.chip(std::vector<int>{1, 1, 1})) == 3);
  CHECK(collectives::send_paths(t, 0, t.chip(std::vector<int>{0, 2, 0})) == 1);
}

namespace {
// Every chip sends `bytes` to the chip `shift` further along every axis, all at once.
Outcome permute(const Torus& t, const std::vector<int>& shift, std::uint64_t bytes) {
  std::vector<std::pair<topology::ChipId, topology::ChipId>> pairs;
  for (topology::ChipId c = 0; c < t.num_chips(); ++c) {
    std::vector<int> to = t.coords(c);
    for (std::size_t a = 0; a < to.size(); ++a) to[a] = (to[a] + shift[a]) % t.axis(static_cast<int>(a)).size;
    pairs.emplace_back(c, t.chip(to));
  }
  const Outcome o = run(t, 1, [&](sim::ProgramBuilder& b, const auto& p) {
    for (const auto& [src, dst] : pairs) collectives::send(b, t, src, dst, bytes, p[0]);
  });
  // The load counted from the routes is the load the run put on the links.
  const collectives::GroupLoad load = collectives::send_load(t, pairs, bytes);
  CHECK(load.busiest_bytes == o.max_link_bytes);
  CHECK(load.transfers * (bytes / static_cast<std::uint64_t>(std::max(1, collectives::send_paths(t, 0, pairs[0].second)))) ==
        o.link_bytes);
  return o;
}
}  // namespace

TEST_CASE("Send: a permute across the torus shares the links its routes cross", "[collectives]") {
  const std::uint64_t bytes = 100'000'000;
  const double b = static_cast<double>(bytes);
  // Ring of 8, every chip to the one opposite: half way round goes Plus
  // (dimension-order routing breaks the tie one way), so each Plus link lies
  // under 4 routes and the Minus links idle: 4 B / b.
  const Outcome half = permute(torus({{8, true}}), {4}, bytes);
  CHECK(half.makespan.seconds() == Approx(4 * b / kB).epsilon(0.005));
  CHECK(half.max_link_bytes == 4 * bytes);
  // Three steps along: 3 B / b.
  CHECK(permute(torus({{8, true}}), {3}, bytes).makespan.seconds() == Approx(3 * b / kB).epsilon(0.005));
  // 4x4, every chip to (x+2, y+2): half the bytes X-first, half Y-first; each
  // Plus link lies under two routes of each: 4 x B/2 = 2 B / b.
  const Outcome diagonal = permute(torus({{4, true}, {4, true}}), {2, 2}, bytes);
  CHECK(diagonal.makespan.seconds() == Approx(2 * b / kB).epsilon(0.005));
  CHECK(diagonal.max_link_bytes == 2 * bytes);
  // 4x4x4, every chip to (x+1, y+1, z+1): three routes of B/3, each link under
  // one route of each rotation that crosses its axis first, second or third: B / b.
  const Outcome corner = permute(torus({{4, true}, {4, true}, {4, true}}), {1, 1, 1}, 99'999'999);
  CHECK(corner.makespan.seconds() == Approx(b / kB).epsilon(0.005));
}
