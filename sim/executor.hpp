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
  // For a run on two threads (Executor::run): a fresh observer of the same
  // kind for the second thread's tasks, and the merge of what it saw into this
  // one after the run. Null (the default): the run stays on one thread.
  virtual std::unique_ptr<ExecutionObserver> split() const { return nullptr; }
  virtual void merge(const ExecutionObserver& /*part*/) {}
};

struct OpTiming {
  Tick begin = kMaxTick;  // first task of the op started (or its first join fired)
  Tick end = kZeroTick;   // last byte of the op arrived
  bool ran() const { return begin != kMaxTick; }
  bool operator==(const OpTiming&) const = default;
};

class Executor final {
 public:
  Executor(Engine& engine, const Program& program, std::span<const Resource> resources);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;
  void add_observer(ExecutionObserver& observer);
  // Every op's class (indexed by op, each below kOpClasses; call before start();
  // `op_class` must outlive the run): the tasks of an op of class c > 0 see
  // every resource's variant c (Resource::variants[c - 1]). Without it every op
  // is of class 0.
  void classify_ops(std::span<const std::uint8_t> op_class);

  // Schedules the tasks without predecessors; then call engine.run(), or
  // call run() instead of both.
  void start();
  // start(), then the run to its end: on `threads` threads (at most 2) when the
  // run can be split (below), else on the engine alone. The results are the
  // same either way, byte for byte.
  //
  // A split run needs ties ordered by keys (order_ties_by or
  // order_ties_by_ids), observers that split (ExecutionObserver::split) and a
  // lookahead: the program's resources and joins are cut in two parts, each
  // with its own engine and thread, so that every edge between the parts
  // leaves a transfer whose hop latency is at least L > 0 (a join's or a
  // compute's successors stay in its part). A task's start time then depends
  // only on the other part's tasks that started at least L earlier, so both
  // parts simulate a window [t, t + L) at once, then exchange the edges that
  // crossed (conservative parallel simulation, as Chandy and Misra's and
  // SST's; the lookahead is the link latency). With keys the schedule is a
  // function of times and keys alone, not of the order of simultaneous events
  // (order_ties_by), which is what makes both runs agree. A run expected to
  // have fewer than `min_tasks_per_window` tasks a window (its busiest
  // resource's work over L windows) stays on one thread: the threads meet
  // once a window.
  static constexpr double kMinTasksPerWindow = 4096;
  void run(unsigned threads = 1, double min_tasks_per_window = kMinTasksPerWindow);
  // A split run watches for tasks ready the moment they were activated
  // (watch_zero_lag): where first_zero_lag() has one, run the program again on
  // one thread for the schedule that the order of simultaneous events gives.
  //
  // The threads the last run() used (1 or 2), and its windows.
  unsigned threads_used() const { return parallel_ ? 2u : 1u; }
  std::uint64_t windows() const { return windows_; }
  Tick lookahead() const { return lookahead_; }

  Tick makespan() const;
  const std::vector<OpTiming>& op_timings() const;
  std::size_t tasks_completed() const;
  // Tasks that never ran (a dependency cycle or a schedule bug): empty after a good run.
  std::vector<TaskId> unfinished_tasks() const;
  // Whether every task ran (unfinished_tasks() is empty), without a pass over them.
  bool finished() const { return tasks_completed() == program_.num_tasks(); }
  // Tasks on `resource` that a wake-up event started (the others started the
  // moment they became ready). Unlike the engine's count of events, which also
  // counts wake-ups that an earlier one superseded, this depends only on the schedule (when no two
  // tasks of a resource are ready at the same time, or ties go by keys, below),
  // not on the order of simultaneous events: it is what runs report.
  std::uint64_t woken_on(std::uint32_t resource) const { return state_[resource].woken; }
  std::uint64_t tasks_woken() const;
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
  std::optional<TaskId> first_zero_lag() const;
  // The first task whose arrival would pass kMaxTick (the run stopped there), if
  // any. (After a split run that overflowed: one such task; run again on one
  // thread for the first.)
  std::optional<TaskId> overflowed_task() const;

 private:
  struct Lane;
  // Every time a task's start depends on is known as soon as its predecessors
  // have STARTED (a started task's end and arrival are fixed), so dependencies are
  // resolved then. Joins take no time and need no resource: they complete (at the
  // time their last predecessor arrives) without an event. Each resource keeps
  // its waiting tasks ordered by (ready time, activation order), which is FIFO
  // service in the order tasks became ready, and holds at most one live wake-up
  // event: about one event per task.
  void handle_event(Lane& l, std::uint64_t payload, Tick now);
  void upcoming(std::uint64_t payload, int distance);
  // `noted`: (id, now) is already among the lane's latest starts (a message
  // being taken).
  void release(Lane& l, TaskId id, Tick now, bool noted = false);
  void activate(Lane& l, TaskId id, Tick now);
  void start_task(Lane& l, TaskId id, Tick now);
  void complete_join(Lane& l, TaskId id, Tick now);
  void resolve(Lane& l, TaskId succ, bool stream, Tick ready, Tick floor, Tick now);
  void drain(Lane& l, Tick now);
  void schedule_wake(Lane& l, std::uint32_t resource, Tick now);
  // The cut in two parts (run's rules), if the program has one: flags_, lookahead_.
  bool split(double min_tasks_per_window);
  void run_split();
  void take_messages(Lane& l, Lane& from);
  // An op's class (0 without classify_ops), and what that class sees of a
  // resource: its hop latency and bandwidth.
  std::uint8_t op_class_of(const Task& t) const { return op_class_.empty() ? 0 : op_class_[t.op()]; }
  static Tick latency_of(const Resource& r, std::uint8_t c) { return c == 0 ? r.latency : r.variants[c - 1].latency; }
  static std::uint64_t bandwidth_of(const Resource& r, std::uint8_t c) {
    const std::uint64_t own = c == 0 ? 0 : r.variants[c - 1].bandwidth_bytes_per_s;
    return own > 0 ? own : r.bandwidth_bytes_per_s;
  }

  Engine& engine_;
  const Program& program_;
  std::span<const Resource> resources_;

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
    // With keys, the activation time (ps); else the activation sequence (unique).
    std::uint64_t order;
    TaskId id;
  };
  // Whether `a` goes after `b`.
  bool later(const Waiting& a, const Waiting& b) const {
    if (a.ready_at != b.ready_at) return a.ready_at > b.ready_at;
    if (a.order != b.order || !keyed_) return a.order > b.order;
    return keys_.empty() ? a.id > b.id : keys_[a.id] > keys_[b.id];
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
    // The last transfer's bytes and op class (0 bytes: none yet), and its time on the link.
    std::uint64_t served_bytes = 0;
    std::uint8_t served_class = 0;
    Tick service;
  };
  std::vector<ResourceState> state_;
  std::span<const std::uint32_t> keys_;
  std::span<const std::uint8_t> op_class_;  // empty: every op of class 0
  bool keyed_ = false;  // order_ties_by or order_ties_by_ids was called
  std::vector<Tick> zero_lag_at_;  // with watch_zero_lag: per resource, when a task last became ready as activated
  bool running_ = false;  // start() has activated the tasks without predecessors
  // The tasks' state: sized, their predecessors counted, the program checked
  // against the resources (by start(), or by run() beside split()).
  void prepare();
  bool prepared_ = false;

  // What one thread runs: its engine and the state only it writes. A run on
  // one thread has lane 0 alone, on the caller's engine.
  std::vector<std::unique_ptr<Lane>> lanes_;
  // A split run: per task, its part (bit 0) and whether a predecessor is in
  // the other part (bit 1); empty on one thread.
  BigVector<std::uint8_t> flags_;
  std::vector<std::uint8_t> part_of_resource_;
  Tick lookahead_;
  bool parallel_ = false;
  std::uint64_t windows_ = 0;
};

}  // namespace meshsim::sim
