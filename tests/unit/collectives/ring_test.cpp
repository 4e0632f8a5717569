// Bandwidth regime, one axis: every collective on rings of 8 and 16 and along
// one axis of 4x4, 16x16 and 4x4x4 tori, against the exact closed form of the
// schedule (docs/MODEL.md) and the cheat sheet.
#include <catch2/catch.hpp>

#include "harness.hpp"
#include "sim/collectives/closed_form.hpp"

using namespace meshsim;
using namespace meshsim::test;

namespace {
constexpr std::uint64_t kV = 3ull << 27;  // 402,653,184 bytes (>= 100 MB), divisible by 3 * 2^k


struct Shape {
  std::vector<AxisSpec> axes;
  int axis;  // the axis the collective runs over
};
}  // namespace

TEST_CASE("Ring collectives: one axis, bandwidth regime, exact closed form within 0.5%", "[collectives]") {
  const std::vector<Shape> shapes = {
      {{{8, true}}, 0},
      {{{16, true}}, 0},
      {{{4, true}, {4, true}}, 1},
      {{{16, true}, {16, true}}, 0},
      {{{4, true}, {4, true}, {4, true}}, 2},
  };
  for (const Shape& sh : shapes) {
    const Torus t = torus(sh.axes);
    const int x = t.axis(sh.axis).size;
    const std::vector<int> axes{sh.axis}, sizes{x};
    const double v = static_cast<double>(kV);
    INFO(t.shape_string() << " over axis " << t.axis_name(sh.axis));

    const double ag = simulate(t, Kind::AllGather, axes, kV);
    CHECK(ag == Approx(exact_gather(sizes, true, v)).epsilon(0.005));
    // (X-1)/X * V/W: the cheat sheet's V/W without its (X-1)/X simplification.
    CHECK(ag == Approx(cheat(Kind::AllGather, sizes, v) * (x - 1) / x).epsilon(0.01));

    const double rs = simulate(t, Kind::ReduceScatter, axes, kV);
    CHECK(rs == Approx(exact_reduce(sizes, true, v)).epsilon(0.005));
    CHECK(rs == Approx(cheat(Kind::ReduceScatter, sizes, v) * (x - 1) / x).epsilon(0.01));

    const double ar = simulate(t, Kind::AllReduce, axes, kV);
    CHECK(ar == Approx(exact_reduce(sizes, true, v) + exact_gather(sizes, true, v)).epsilon(0.005));
    CHECK(ar == Approx(cheat(Kind::AllReduce, sizes, v) * (x - 1) / x).epsilon(0.01));
  }
}

TEST_CASE("Ring collectives: AllToAll on a bidirectional ring is V/(4W)", "[collectives]") {
  for (int x : {8, 16}) {
    const Torus t = torus({{x, true}});
    const double a2a = simulate(t, Kind::AllToAll, {0}, kV);
    INFO("ring of " << x);
    // Even ring, antipodal pieces split: each direction carries exactly V/8.
    CHECK(a2a == Approx(static_cast<double>(kV) / (4 * 2 * kB)).epsilon(0.01));
    CHECK(a2a == Approx(cheat(Kind::AllToAll, {x}, static_cast<double>(kV))).epsilon(0.02));
  }
  // Along one axis of a 4x4x4 torus every ring works at once on its own links.
  const Torus cube = torus({{4, true}, {4, true}, {4, true}});
  CHECK(simulate(cube, Kind::AllToAll, {1}, kV) == Approx(static_cast<double>(kV) / (8 * kB)).epsilon(0.01));
}

TEST_CASE("Ring collectives: axes of 16 against the cheat sheet", "[collectives]") {
  // Single axis of 16: AllGather/ReduceScatter/AllReduce are 15/16 of V/W, 2V/W
  // (the cheat sheet rounds (X-1)/X up to 1); AllToAll is V/(4W) exactly.
  const Torus t = torus({{16, true}, {16, true}});
  const double v = static_cast<double>(kV);
  CHECK(simulate(t, Kind::AllGather, {0}, kV) / cheat(Kind::AllGather, {16}, v) == Approx(15.0 / 16).epsilon(0.01));
  CHECK(simulate(t, Kind::AllReduce, {0}, kV) / cheat(Kind::AllReduce, {16}, v) == Approx(15.0 / 16).epsilon(0.01));
  CHECK(simulate(t, Kind::AllToAll, {0}, kV) / cheat(Kind::AllToAll, {16}, v) == Approx(1.0).epsilon(0.02));
}

TEST_CASE("Ring collectives: an axis without wraparound takes twice as long", "[collectives]") {
  for (int x : {8, 16}) {
    const Torus ring = torus({{x, true}});
    const Torus line = torus({{x, false}});
    const std::vector<int> sizes{x};
    const double v = static_cast<double>(kV);
    INFO("axis of " << x);
    const double ag_ring = simulate(ring, Kind::AllGather, {0}, kV);
    const double ag_line = simulate(line, Kind::AllGather, {0}, kV);
    // The line: (X-1)/X * V/(W/2).
    CHECK(ag_line == Approx((x - 1.0) / x * v / kB).epsilon(0.01));
    CHECK(ag_line == Approx(exact_gather(sizes, false, v)).epsilon(0.005));
    CHECK(ag_line / ag_ring == Approx(2.0).epsilon(0.02));
    const double rs_line = simulate(line, Kind::ReduceScatter, {0}, kV);
    CHECK(rs_line == Approx(exact_reduce(sizes, false, v)).epsilon(0.005));
    CHECK(simulate(line, Kind::AllReduce, {0}, kV) ==
          Approx(exact_reduce(sizes, false, v) + exact_gather(sizes, false, v)).epsilon(0.005));
  }
}

TEST_CASE("Ring collectives: odd rings and rings of two", "[collectives]") {
  const double v = 5.0 * 7 * 3 * (1 << 20);
  for (int x : {2, 3, 5, 7}) {
    const Torus t = torus({{x, true}});
    INFO("ring of " << x);
    CHECK(simulate(t, Kind::AllGather, {0}, static_cast<std::uint64_t>(v)) ==
          Approx(exact_gather({x}, true, v)).epsilon(0.005));
    CHECK(simulate(t, Kind::ReduceScatter, {0}, static_cast<std::uint64_t>(v)) ==
          Approx(exact_reduce({x}, true, v)).epsilon(0.005));
  }
}
