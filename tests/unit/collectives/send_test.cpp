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
