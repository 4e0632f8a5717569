#pragma once
// Executes a Program on the event engine. Every resource (a link direction or a
// compute unit) is a FIFO server: one task at a time, in the order tasks became
// ready. A transfer occupies its link for bytes / bandwidth (integer ps, rounded
// up) and arrives one hop latency after its last byte left. Nothing here knows
// what a chip, a torus or a collective is.
#include <cstdint>
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

  void handle_event(std::uint64_t payload, Tick now) override;

 private:
  enum EventType : std::uint64_t { kReady = 0, kArrival = 1, kResourceFree = 2 };
  void resolve(TaskId id, Tick now);
  void make_ready(TaskId id, Tick now);
  void enqueue(TaskId id, Tick now);
  void start_task(TaskId id, Tick now);
  void finish_instant(TaskId id, Tick now);
  void release_full_successors(TaskId id, Tick now);
  void drain(Tick now);

  Engine& engine_;
  const Program& program_;
  std::span<const Resource> resources_;
  Engine::HandlerId self_ = 0;
  std::vector<ExecutionObserver*> observers_;

  std::vector<std::uint32_t> pending_;   // unresolved predecessors per task
  std::vector<Tick> stream_ready_;       // earliest start allowed by stream predecessors
  std::vector<Tick> stream_floor_;       // last byte of stream predecessors arrived
  std::vector<std::uint8_t> done_;       // started (or fired, for joins)
  std::vector<TaskId> next_in_queue_;    // intrusive FIFO per resource

  struct ResourceState {
    Tick busy_until;
    TaskId head = ~TaskId{0};
    TaskId tail = ~TaskId{0};
    bool free_event_pending = false;
  };
  std::vector<ResourceState> state_;

  std::vector<TaskId> ready_now_;  // tasks that became ready at the current time, FIFO
  std::size_t ready_head_ = 0;
  std::vector<OpTiming> op_timings_;
  Tick makespan_;
  std::size_t completed_ = 0;
};

}  // namespace meshsim::sim
