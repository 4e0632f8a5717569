#pragma once
// Executes a Program on the event engine. Every resource (a link direction or a
// compute unit) is a FIFO server: one task at a time, in the order tasks became
// ready. A transfer occupies its link for bytes / bandwidth (integer ps, rounded
// up) and arrives one hop latency after its last byte left. Nothing here knows
// what a chip, a torus or a collective is.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "base/tick.hpp"
#include "sim/engine.hpp"
#include "sim/program.hpp"

namespace meshsim::sim {

// How a task's op sees a resource: op classes (Executor::classify_ops) above 0
// see a variant of it, with their own latency and forwarding chunk and at most
// its bandwidth (NCCL's protocols: the same link, other per-hop latencies and
// steps, and for LL the rate at which a GPU copies its lines).
struct ResourceVariant {
  Tick latency;
  std::uint64_t forward_chunk_bytes = 0;
  std::uint64_t bandwidth_bytes_per_s = 0;  // 0: the resource's (LL's copy rate caps it below)
  bool operator==(const ResourceVariant&) const = default;
};
inline constexpr std::size_t kOpClasses = 3;  // class 0 (the resource itself) and two variants

struct Resource {
  std::uint64_t bandwidth_bytes_per_s = 0;  // 0: a compute unit (tasks carry durations)
  Tick latency;                             // added after the last byte leaves
  std::uint64_t forward_chunk_bytes = 0;    // granularity of stream (cut-through) forwarding
  std::array<ResourceVariant, kOpClasses - 1> variants{};  // what op classes 1, 2 see instead
  bool operator==(const Resource&) const = default;
};

struct TaskTiming {
  Tick ready;    // all dependencies satisfied
  Tick start;    // the resource began serving it
  Tick end;      // the resource is free again (last byte left)
  Tick arrival;  // last byte arrived at the far end (end + latency)
};

// Observers see every task when it starts (its whole timing is known then). The
// executor calls them only when some are registered: tracing off costs one branch.
class ExecutionObserver {
 public:
  virtual ~ExecutionObserver() = default;
  virtual void on_task(TaskId id, const Task& task, const TaskTiming& timing) = 0;
  // A join completed at `at` (the arrival of its last predecessor).
  virtual void on_join(TaskId /*id*/, const Task& /*task*/, Tick /*at*/) {}
};

struct OpTiming {
  Tick begin = kMaxTick;  // first task of the op started (or its first join fired)
  Tick end = kZeroTick;   // last byte of the op arrived
  bool ran() const { return begin != kMaxTick; }
};

class Executor final : public EventHandler {
 public:
  Executor(Engine& engine, const Program& program, std::span<const Resource> resources);
  void add_observer(ExecutionObserver& observer) { observers_.push_back(&observer); }
  // Every op's class (indexed by op, each below kOpClasses; call before start();
  // `op_class` must outlive the run): the tasks of an op of class c > 0 see
  // every resource's variant c (Resource::variants[c - 1]). Without it every op
  // is of class 0.
  void classify_ops(std::span<const std::uint8_t> op_class);

  // Schedules the tasks without predecessors; then call engine.run().
  void start();

  Tick makespan() const { return makespan_; }
  const std::vector<OpTiming>& op_timings() const { return op_timings_; }
  std::size_t tasks_completed() const { return completed_; }
  // Tasks that never ran (a dependency cycle or a schedule bug): empty after a good run.
  std::vector<TaskId> unfinished_tasks() const;
  // Tasks on `resource` that a wake-up event started (the others started the
  // moment they became ready). Unlike the engine's count of events, which also
  // counts wake-ups that an earlier one superseded, this depends only on the schedule (when no two
  // tasks of a resource are ready at the same time, or ties go by keys, below),
  // not on the order of simultaneous events: it is what runs report.
  std::uint64_t woken_on(std::uint32_t resource) const { return state_[resource].woken; }
  std::uint64_t tasks_woken() const { return woken_; }
  // Break ties between tasks ready at the same time on one resource by
  // activation time, then keys[task] (distinct among one resource's tasks),
  // instead of by activation order (call before start(); `keys` must outlive
  // the run). Then, when every task becomes ready strictly after it is
  // activated, the schedule is a function of times and keys alone, whatever
  // order simultaneous events ran in: a resource free at t starts the least
  // (ready, activation time, key) of its tasks ready by t, all of which were
  // activated before t. Tasks ready the moment they are activated (at time 0,
  // an op without a fixed cost) keep that property when they are the tasks
  // start() activates, which all wait for a wake-up at time 0 that chooses
  // among them, or when no other such task of their resource is activated at
  // the same moment. A quotient run needs it (driver/translations.hpp).
  void order_ties_by(std::span<const std::uint32_t> keys) {
    keys_ = keys;
    keyed_ = true;
  }
  // The same with every task's own id as its key (a program listed in key
  // order: no array).
  void order_ties_by_ids() {
    keys_ = {};
    keyed_ = true;
  }
  // Record the first task ready the moment it was activated, after start(),
  // beside another of its resource activated so at the same moment (call
  // before start()).
  void watch_zero_lag() { zero_lag_at_.assign(resources_.size(), Tick::from_ps(-1)); }
  std::optional<TaskId> first_zero_lag() const { return zero_lag_; }
  // The first task whose arrival would pass kMaxTick (the run stopped there), if any.
  std::optional<TaskId> overflowed_task() const { return overflow_; }

  void handle_event(std::uint64_t payload, Tick now) override;
  void upcoming(std::uint64_t payload, int distance) override;

 private:
  // Every time a task's start depends on is known as soon as its predecessors
  // have STARTED (a started task's end and arrival are fixed), so dependencies are
  // resolved then. Joins take no time and need no resource: they complete (at the
  // time their last predecessor arrives) without an event. Each resource keeps
  // its waiting tasks ordered by (ready time, activation order), which is FIFO
  // service in the order tasks became ready, and holds at most one live wake-up
  // event: about one event per task.
  void release(TaskId id);
  void activate(TaskId id, Tick now);
  void start_task(TaskId id, Tick now);
  void complete_join(TaskId id);
  void drain(Tick now);
  void schedule_wake(std::uint32_t resource, Tick now);

  Engine& engine_;
  const Program& program_;
  std::span<const Resource> resources_;
  Engine::HandlerId self_ = 0;
  std::vector<ExecutionObserver*> observers_;

  static constexpr std::uint32_t kStarted = ~std::uint32_t{0};
  // Per task: the max over its predecessors of when they allow it to start,
  // and its unresolved predecessors (kStarted once started), side by side in
  // 12 bytes: resolving a dependency touches one cache line, not two (at scale
  // every one is a miss).
  class TaskState {
   public:
    Tick ready_at() const {
      return Tick::from_ps(static_cast<std::int64_t>(std::uint64_t{ready_hi_} << 32 | ready_lo_));
    }
    void raise_ready_at(Tick t) {
      if (t <= ready_at()) return;
      const auto ps = static_cast<std::uint64_t>(t.ps());
      ready_lo_ = static_cast<std::uint32_t>(ps);
      ready_hi_ = static_cast<std::uint32_t>(ps >> 32);
    }
    std::uint32_t pending = 0;

   private:
    std::uint32_t ready_lo_ = 0;  // ready_at's picoseconds (never negative), low and high halves
    std::uint32_t ready_hi_ = 0;
  };
  static_assert(sizeof(TaskState) == 12);
  BigVector<TaskState> tasks_;
  // Per task: when the last byte of its stream predecessors arrived. Empty when
  // the program has no stream edges (most torus collectives): 8 bytes a task
  // neither allocated nor touched.
  BigVector<Tick> stream_floor_;

  struct Waiting {
    Tick ready_at;
    // activation sequence << 32 | task; with keys, the activation time's rank
    // among the run's activation times << 32 | task.
    std::uint64_t order;
  };
  // Whether `a` goes after `b`.
  bool later(const Waiting& a, const Waiting& b) const {
    if (a.ready_at != b.ready_at) return a.ready_at > b.ready_at;
    // (With ids as keys, the low half of the order is the key.)
    if ((a.order >> 32) != (b.order >> 32) || keys_.empty()) return a.order > b.order;
    return keys_[a.order & 0xffffffffu] > keys_[b.order & 0xffffffffu];
  }
  // Tasks waiting for a resource, in (ready time, activation) order, in a ring
  // buffer (a power-of-two size) that starts inside the resource's own state
  // (most queues never hold more than two: no separate allocation to miss in
  // cache). They mostly arrive in that order, so an insertion from the back is
  // O(1) in practice, and a pop never moves the rest.
  class WaitQueue {
   public:
    bool empty() const { return count_ == 0; }
    const Waiting& front() const { return data()[head_]; }
    void push(const Waiting& w, const Executor& by);
    Waiting pop();

   private:
    static constexpr std::uint32_t kInline = 2;
    Waiting* data() { return heap_ ? heap_.get() : inline_; }
    const Waiting* data() const { return heap_ ? heap_.get() : inline_; }
    std::unique_ptr<Waiting[]> heap_;
    std::uint32_t capacity_ = kInline;
    std::uint32_t head_ = 0;
    std::uint32_t count_ = 0;
    Waiting inline_[kInline];
  };
  struct ResourceState {
    Tick busy_until;
    WaitQueue waiting;
    Tick wake_at;                  // time of the live wake-up event, if any
    std::uint32_t generation = 0;  // wake-up events of older generations are stale
    bool wake_pending = false;
    Tick chunk_time;               // serialization time of one forwarding chunk
    std::uint64_t woken = 0;       // tasks a wake-up started
  };
  std::vector<ResourceState> state_;
  std::uint64_t activations_ = 0;
  std::uint64_t woken_ = 0;
  std::span<const std::uint32_t> keys_;
  std::span<const std::uint8_t> op_class_;  // empty: every op of class 0
  bool keyed_ = false;  // order_ties_by or order_ties_by_ids was called
  Tick last_activation_ = Tick::from_ps(-1);  // with keys: the latest activation time, and its rank
  std::uint64_t activation_rank_ = 0;
  std::vector<Tick> zero_lag_at_;  // with watch_zero_lag: per resource, when a task last became ready as activated
  std::optional<TaskId> zero_lag_;
  bool running_ = false;  // start() has activated the tasks without predecessors

  std::vector<TaskId> work_;  // tasks whose last predecessor just resolved, FIFO
  std::size_t work_head_ = 0;
  std::vector<OpTiming> op_timings_;
  Tick makespan_;
  std::size_t completed_ = 0;
  std::optional<TaskId> overflow_;
};

}  // namespace meshsim::sim
