#pragma once
// The discrete-event engine: a clock and a queue of events, nothing else. It knows
// nothing of chips, links or collectives. Events with equal time run in
// (priority, insertion sequence) order, so runs are repeatable bit for bit.
#include <cstdint>
#include <functional>
#include <vector>

#include "base/tick.hpp"

namespace meshsim::sim {

class EventHandler {
 public:
  virtual ~EventHandler() = default;
  virtual void handle_event(std::uint64_t payload, Tick now) = 0;
  // A hint that `payload` comes up `distance` events from now (1, 2 or 3): a
  // handler may prefetch the state it will touch, a step further at each
  // nearer distance. Must not change anything.
  virtual void upcoming(std::uint64_t /*payload*/, int /*distance*/) {}
};

class Engine {
 public:
  using HandlerId = std::uint32_t;

  HandlerId add_handler(EventHandler& handler);
  // Schedules `payload` for `handler` at time `at` (>= now). Lower priority runs first
  // among events of equal time; equal priorities run in scheduling order.
  void schedule(Tick at, HandlerId handler, std::uint64_t payload, std::uint8_t priority = 0);
  // Pops and executes events until none is left.
  void run();
  // Pops and executes the events before `end` (a window of a run on several
  // engines, sim::Executor::run): those at `end` and later stay queued.
  void run_until(Tick end);
  // The time of the next event (kNoEvent when none is queued).
  Tick next_time() const;
  static constexpr Tick kNoEvent = Tick::from_ps(INT64_MAX);
  // Calls `report(now)` after every `every` events during run() (progress lines);
  // never by default.
  void on_progress(std::uint64_t every, std::function<void(Tick)> report);

  Tick now() const { return now_; }
  std::uint64_t events_executed() const { return executed_; }
  std::size_t pending() const { return size_; }

 private:
  struct Event {
    Tick time;
    std::uint64_t order;  // priority << 56 | sequence
    std::uint64_t payload;
    HandlerId handler;
  };
  // A radix heap (times never decrease): bucket 0 holds the events at the time
  // last popped, sorted by order; bucket i > 0 holds the events whose time first
  // differs from it in bit i-1. Pushes are O(1); each event moves down at most 64
  // buckets in its life. Far cheaper than a binary heap of tens of thousands.
  static int bucket_of(std::int64_t time, std::int64_t last);
  void refill();
  void refill(int bucket, std::int64_t least);
  // The lowest nonempty bucket above 0 (one is), and its least time.
  int lowest_bucket(std::int64_t& least) const;
  // Executes the next event (one is queued).
  void step();
  std::vector<Event> buckets_[65];
  std::size_t head_ = 0;  // next event of bucket 0
  std::size_t size_ = 0;
  std::int64_t last_ = 0;
  std::vector<EventHandler*> handlers_;
  Tick now_;
  std::uint64_t sequence_ = 0;
  std::uint64_t executed_ = 0;
  std::uint64_t progress_every_ = 0;
  std::uint64_t next_progress_ = UINT64_MAX;
  std::function<void(Tick)> progress_;
};

}  // namespace meshsim::sim
