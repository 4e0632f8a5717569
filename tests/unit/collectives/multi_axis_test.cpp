// Bandwidth regime, several axes at once: the data is split into one part per
// axis and every axis's links work in every phase (the cheat sheet's N_axes).
#include <catch2/catch.hpp>

#include "harness.hpp"
#include "sim/collectives/closed_form.hpp"

using namespace meshsim;
using namespace meshsim::test;

namespace {
constexpr std::uint64_t kV = 3ull << 27;

}  // namespace

TEST_CASE("Multi-axis collectives: exact closed form within 0.5%", "[collectives]") {
  struct Case {
    std::vector<AxisSpec> axes;
    std::vector<int> over;
  };
  const std::vector<Case> cases = {
      {{{4, true}, {4, true}}, {0, 1}},
      {{{16, true}, {16, true}}, {0, 1}},
      {{{4, true}, {4, true}, {4, true}}, {0, 1, 2}},
      {{{4, true}, {4, true}, {4, true}}, {0, 2}},
  };
  for (const Case& c : cases) {
    const Torus t = torus(c.axes);
    std::vector<int> sizes;
    for (int a : c.over) sizes.push_back(t.axis(a).size);
    const double v = static_cast<double>(kV);
    INFO(t.shape_string() << " over " << c.over.size() << " axes");
    CHECK(simulate(t, Kind::AllGather, c.over, kV) == Approx(exact_gather(sizes, true, v)).epsilon(0.005));
    CHECK(simulate(t, Kind::ReduceScatter, c.over, kV) == Approx(exact_reduce(sizes, true, v)).epsilon(0.005));
    CHECK(simulate(t, Kind::AllReduce, c.over, kV) ==
          Approx(exact_reduce(sizes, true, v) + exact_gather(sizes, true, v)).epsilon(0.005));
  }
}

TEST_CASE("Multi-axis collectives: axes of 16 are within 2% of V/(W N_axes) and 2V/(W N_axes)", "[collectives]") {
  const Torus t = torus({{16, true}, {16, true}});
  const std::vector<int> both{0, 1}, sizes{16, 16};
  CHECK(simulate(t, Kind::AllGather, both, kV) == Approx(cheat(Kind::AllGather, sizes, static_cast<double>(kV))).epsilon(0.02));
  CHECK(simulate(t, Kind::ReduceScatter, both, kV) == Approx(cheat(Kind::ReduceScatter, sizes, static_cast<double>(kV))).epsilon(0.02));
  CHECK(simulate(t, Kind::AllReduce, both, kV) == Approx(cheat(Kind::AllReduce, sizes, static_cast<double>(kV))).epsilon(0.02));
}

TEST_CASE("Multi-axis collectives: two axes are about twice as fast as one", "[collectives]") {
  const Torus t = torus({{16, true}, {16, true}});
  const double one = simulate(t, Kind::AllGather, {0}, kV);
  const double two = simulate(t, Kind::AllGather, {0, 1}, kV);
  // Both hold V at the end; over two axes the same bytes use twice the links.
  CHECK(one / two == Approx(2.0 * 15.0 / 16.0 / (15.0 / 16.0 * 17.0 / 16.0)).epsilon(0.01));
}

TEST_CASE("Multi-axis collectives: a logical axis spanning two hardware axes", "[collectives]") {
  // X = 16 chips laid out as 4x4 on a 4x4x4 torus: a two-axis collective.
  const Torus t = torus({{4, true}, {4, true}, {4, true}});
  const double v = static_cast<double>(kV);
  CHECK(simulate(t, Kind::AllGather, {0, 1}, kV) == Approx(exact_gather({4, 4}, true, v)).epsilon(0.005));
}
