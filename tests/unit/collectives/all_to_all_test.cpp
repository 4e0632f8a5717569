// AllToAll: every piece routed over the torus, hop by hop.
#include <catch2/catch.hpp>

#include "harness.hpp"
#include "sim/collectives/closed_form.hpp"

using namespace meshsim;
using namespace meshsim::test;

namespace {
constexpr std::uint64_t kV = 3ull << 27;

}  // namespace

TEST_CASE("AllToAll: link loads equal the closed form and the time follows the busiest link", "[collectives]") {
  // 2D tori: pieces go X first then Y. Per link direction on axis k the load is
  // X_k * V / (8 P) bytes (even sizes), so T = max_k X_k V / (4 W P).
  for (int x : {4, 8}) {
    const Torus t = torus({{x, true}, {x, true}});
    const Outcome o = run(t, 1, [&](sim::ProgramBuilder& b, const auto& p) { collectives::all_to_all(b, t, std::vector<int>{0, 1}, kV, p[0]); });
    const double p = x * x;
    INFO(x << "x" << x);
    CHECK(static_cast<double>(o.max_link_bytes) == Approx(x * static_cast<double>(kV) / (8 * p)).epsilon(0.001));
    // Contended multi-hop forwarding: the busiest link bounds the time from below;
    // the tail above it is measured and reported in docs/MODEL.md.
    CHECK(o.makespan.seconds() >= static_cast<double>(o.max_link_bytes) / kB);
    CHECK(o.makespan.seconds() == Approx(cheat(Kind::AllToAll, {x, x}, static_cast<double>(kV))).epsilon(0.05));
    CHECK(o.capacity_respected);
  }
}

TEST_CASE("AllToAll: odd rings carry (X^2-1)/X^2 of V/8 per direction", "[collectives]") {
  const Torus t = torus({{5, true}});
  const Outcome o = run(t, 1, [&](sim::ProgramBuilder& b, const auto& p) { collectives::all_to_all(b, t, std::vector<int>{0}, kV, p[0]); });
  CHECK(static_cast<double>(o.max_link_bytes) == Approx(24.0 / 25.0 * static_cast<double>(kV) / 8).epsilon(0.001));
}
