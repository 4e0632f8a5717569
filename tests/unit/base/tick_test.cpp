#include <catch2/catch.hpp>

#include "base/tick.hpp"

using meshsim::Tick;

TEST_CASE("Tick: serialization time is exact integer picoseconds, rounded up", "[base]") {
  // 1 MB at 45 GB/s (1e9-based) = 22.222... us -> 22222223 ps (ceil).
  CHECK(meshsim::serialization_time(1'000'000, 45'000'000'000).ps() == 22'222'223);
  // 45 bytes at 45 GB/s = exactly 1 ns.
  CHECK(meshsim::serialization_time(45, 45'000'000'000).ps() == 1000);
  CHECK(meshsim::serialization_time(1, 1'000'000'000'000'000).ps() == 1);  // never rounds to 0
  CHECK(meshsim::serialization_time(0, 45'000'000'000).ps() == 0);
}

TEST_CASE("Tick: huge transfers saturate at kMaxTick instead of overflowing", "[base]") {
  CHECK(meshsim::serialization_time(~std::uint64_t{0}, 1) == meshsim::kMaxTick);
}

TEST_CASE("Tick: conversions and formatting", "[base]") {
  CHECK(meshsim::tick_from_seconds(1e-6).ps() == 1'000'000);
  CHECK(meshsim::tick_from_seconds(0.0).ps() == 0);
  CHECK(meshsim::format_us(Tick::from_ps(1'234'567'890)) == "1234.567890");
  CHECK(meshsim::format_us(Tick::from_ps(5)) == "0.000005");
  CHECK(max(Tick::from_ps(3), Tick::from_ps(7)).ps() == 7);
}
