#include <catch2/catch.hpp>

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
