#pragma once
// Executes a Program on the event engine. Every resource (a link direction or a
// compute unit) is a FIFO server: one task at a time, in the order tasks became
// ready. A transfer occupies its link for bytes / bandwidth (integer ps, rounded
// up) and arrives one hop latency after its last byte left. Nothing here knows
// what a chip, a torus or a collective is.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "base/tick.hpp"
#include "sim/engine.hpp"
#include "sim/program.hpp"

namespace meshsim::sim {

struct Resource {
  std::uint64_t bandwidth_bytes_per_s = 0;  // 0: a compute unit (tasks carry durations)
  Tick latency;                             // added after the last byte leaves
  std::uint64_t forward_chunk_bytes = 0;    // granularity of stream (cut-through) forwarding
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

  // Schedules the tasks without predecessors; then call engine.run().
  void start();

  Tick makespan() const { return makespan_; }
  const std::vector<OpTiming>& op_timings() const { return op_timings_; }
  std::size_t tasks_completed() const { return completed_; }
  // Tasks that never ran (a dependency cycle or a schedule bug): empty after a good run.
  std::vector<TaskId> unfinished_tasks() const;
  // Engine events this executor scheduled for `resource` (each is executed once;
  // their sum over resources is the engine's count when nothing else schedules).
  std::uint64_t events_on(std::uint32_t resource) const { return state_[resource].events; }
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
  // Per task: the max over its predecessors of when they allow it to start.
  BigVector<Tick> ready_at_;
  // Per task: when the last byte of its stream predecessors arrived. Empty when
  // the program has no stream edges (most torus collectives): 8 bytes a task
  // neither allocated nor touched.
  BigVector<Tick> stream_floor_;
  BigVector<std::uint32_t> pending_;  // unresolved predecessors; kStarted once started

  struct Waiting {
    Tick ready_at;
    std::uint64_t order;  // activation sequence << 32 | task
    bool operator>(const Waiting& o) const { return ready_at != o.ready_at ? ready_at > o.ready_at : order > o.order; }
  };
  // Tasks waiting for a resource, in (ready time, activation) order, in a ring
  // buffer (a power-of-two size) that starts inside the resource's own state
  // (most queues never hold more than two: no separate allocation to miss in
  // cache). They mostly arrive in that order, so an insertion from the back is
  // O(1) in practice, and a pop never moves the rest.
  class WaitQueue {
   public:
    bool empty() const { return count_ == 0; }
    const Waiting& front() const { return data()[head_]; }
    void push(const Waiting& w);
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
    std::uint64_t events = 0;      // wake-up events scheduled
  };
  std::vector<ResourceState> state_;
  std::uint64_t activations_ = 0;

  std::vector<TaskId> work_;  // tasks whose last predecessor just resolved, FIFO
  std::size_t work_head_ = 0;
  std::vector<OpTiming> op_timings_;
  Tick makespan_;
  std::size_t completed_ = 0;
  std::optional<TaskId> overflow_;
};

}  // namespace meshsim::sim
