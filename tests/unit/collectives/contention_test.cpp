// Contention: collectives that share links at the same time slow each other;
// no link direction ever carries more than bandwidth x elapsed time.
#include <catch2/catch.hpp>

#include "harness.hpp"

using namespace meshsim;
using namespace meshsim::test;

namespace {
constexpr std::uint64_t kV = 1ull << 27;
}

TEST_CASE("Contention: two AllGathers on the same links take longer than either alone", "[collectives]") {
  const Torus t = torus({{8, true}, {8, true}});
  const double alone = simulate(t, Kind::AllGather, {0}, kV);
  const Outcome both = run(t, 2, [&](sim::ProgramBuilder& b, const auto& p) {
    collectives::all_gather(b, t, std::vector<int>{0}, kV, p[0]);
    collectives::all_gather(b, t, std::vector<int>{0}, kV, p[1]);
  });
  CHECK(both.capacity_respected);
  CHECK(both.makespan.seconds() > 1.9 * alone);  // they share every x link
  CHECK(both.makespan.seconds() < 2.1 * alone);
  // Each op alone in the time window of the pair took longer than alone.
  CHECK((both.ops[0].end - both.ops[0].begin).seconds() > alone);
  CHECK((both.ops[1].end - both.ops[1].begin).seconds() > alone);
}

TEST_CASE("Contention: collectives on different axes do not interfere", "[collectives]") {
  const Torus t = torus({{8, true}, {8, true}});
  const double alone = simulate(t, Kind::AllGather, {0}, kV);
  const Outcome both = run(t, 2, [&](sim::ProgramBuilder& b, const auto& p) {
    collectives::all_gather(b, t, std::vector<int>{0}, kV, p[0]);
    collectives::all_gather(b, t, std::vector<int>{1}, kV, p[1]);
  });
  CHECK(both.makespan.seconds() == Approx(alone).epsilon(1e-9));
}

TEST_CASE("Contention: an AllToAll and a send crossing it respect link capacity", "[collectives]") {
  const Torus t = torus({{4, true}, {4, true}});
  const Outcome o = run(t, 3, [&](sim::ProgramBuilder& b, const auto& p) {
    collectives::all_to_all(b, t, std::vector<int>{0, 1}, kV, p[0]);
    collectives::send(b, t, 0, 10, kV, p[1]);
    collectives::all_reduce(b, t, std::vector<int>{0}, kV, p[2]);
  });
  CHECK(o.capacity_respected);
  // Sequential dependencies: op 1 after op 0 finishes on each chip.
  const Outcome seq = run(
      t, 2,
      [&](sim::ProgramBuilder& b, const auto& p) {
        collectives::all_gather(b, t, std::vector<int>{0}, kV, p[0]);
        collectives::all_gather(b, t, std::vector<int>{0}, kV, p[1]);
      },
      kChunk, {{0, 1}});
  CHECK(seq.ops[1].begin >= seq.ops[0].end - tick_from_seconds(kAlpha));
  CHECK(seq.makespan.seconds() == Approx(2 * simulate(t, Kind::AllGather, {0}, kV)).epsilon(0.01));
}
