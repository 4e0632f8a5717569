#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "sim/engine.hpp"

using namespace meshsim;
using namespace meshsim::sim;

namespace {
struct Recorder : EventHandler {
  Engine* engine = nullptr;
  std::vector<std::pair<std::int64_t, std::uint64_t>> seen;
  void handle_event(std::uint64_t payload, Tick now) override {
    seen.emplace_back(now.ps(), payload);
    // Payload 100 schedules a follow-up at the same time: it runs after the
    // events already queued for that time.
    if (payload == 100) engine->schedule(now, 0, 101);
  }
};
}  // namespace

TEST_CASE("Engine: time order, then priority, then insertion order", "[sim]") {
  Engine e;
  Recorder r;
  r.engine = &e;
  e.add_handler(r);
  e.schedule(Tick::from_ps(20), 0, 1);
  e.schedule(Tick::from_ps(10), 0, 2);
  e.schedule(Tick::from_ps(10), 0, 3);
  e.schedule(Tick::from_ps(10), 0, 4, /*priority=*/0);
  e.schedule(Tick::from_ps(10), 0, 5, /*priority=*/1);
  e.schedule(Tick::from_ps(5), 0, 100);
  e.schedule(Tick::from_ps(5), 0, 6);
  e.run();
  const std::vector<std::pair<std::int64_t, std::uint64_t>> want = {
      {5, 100}, {5, 6}, {5, 101}, {10, 2}, {10, 3}, {10, 4}, {10, 5}, {20, 1}};
  CHECK(r.seen == want);
  CHECK(e.now().ps() == 20);
  CHECK(e.events_executed() == 8);
  CHECK(e.pending() == 0);
}

namespace {
// Records the hints it gets and checks each one against the events that really
// come next.
struct Hinted : EventHandler {
  std::vector<std::uint64_t> ran;
  std::vector<std::pair<std::size_t, std::uint64_t>> hints;  // (index of the event hinted, payload)
  void handle_event(std::uint64_t payload, Tick) override { ran.push_back(payload); }
  void upcoming(std::uint64_t payload, int distance) override {
    // Called while event ran.size() is being popped, before it runs.
    hints.emplace_back(ran.size() + static_cast<std::size_t>(distance), payload);
  }
};
}  // namespace

TEST_CASE("Engine: hints name the events one and two places ahead at the same time, and change nothing", "[sim]") {
  Engine e;
  Hinted h;
  e.add_handler(h);
  for (std::uint64_t p = 1; p <= 4; ++p) e.schedule(Tick::from_ps(7), 0, p);
  e.schedule(Tick::from_ps(9), 0, 5);
  e.run();
  CHECK(h.ran == std::vector<std::uint64_t>{1, 2, 3, 4, 5});
  REQUIRE(!h.hints.empty());
  for (const auto& [at, payload] : h.hints) {
    REQUIRE(at < h.ran.size());
    CHECK(h.ran[at] == payload);
  }
  // Events 1 and 2 of the four at 7 ps were hinted at distance 1 and 2.
  CHECK(std::count_if(h.hints.begin(), h.hints.end(), [](const auto& x) { return x.first == 2; }) == 2);
}
