#pragma once
// The lowered program: a DAG of tasks that every executor consumes (the native
// engine here, SimGrid and the hardware replay later). A task is
//  - a Transfer: `bytes` over one link direction (a resource),
//  - a Compute: a fixed duration on one compute unit (a resource),
//  - a Join: no resource; it completes when its predecessors do, or a fixed
//    delay after that (a collective's fixed cost before a chip's first transfer).
// Edges say when a task may start:
//  - Full: after the predecessor has completely arrived;
//  - Stream (transfer -> transfer only): the successor forwards data the predecessor
//    is still delivering. It may start once the first forwarding chunk has arrived
//    and cannot finish before the predecessor's last byte has arrived plus one chunk
//    (pipelined, cut-through forwarding). See docs/MODEL.md.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/huge_pages.hpp"
#include "base/tick.hpp"

namespace meshsim::sim {

using TaskId = std::uint32_t;
using OpId = std::uint32_t;
// A port of a chip that takes no part in an op (sim::OpPorts entries, see
// collectives/collective.hpp).
constexpr TaskId kNoTask = ~TaskId{0};

enum class TaskKind : std::uint8_t { Transfer, Compute, Join };
enum class EdgeKind : std::uint8_t { Full, Stream };

struct Task {
  std::uint64_t amount = 0;     // Transfer: bytes. Compute: duration in ps. Join: delay in ps.
  std::uint32_t resource = 0;   // Transfer: link id. Compute: compute unit id. Join: its chip (no resource).
  std::uint32_t op_kind = 0;    // op << 2 | kind (16 bytes a task: programs reach millions)
  OpId op() const { return op_kind >> 2; }
  TaskKind kind() const { return static_cast<TaskKind>(op_kind & 3u); }
};

class Program {
 public:
  std::size_t num_tasks() const { return tasks_.size(); }
  const Task& task(TaskId id) const { return tasks_[id]; }
  // Successors of `id`, each encoded as (successor << 1) | is_stream.
  std::span<const std::uint32_t> successors(TaskId id) const {
    return {successors_.data() + offsets_[id], successors_.data() + offsets_[id + 1]};
  }
  // Cache hints for an executor that knows which task starts soon (they change nothing):
  // where its successor list begins, then (that fetched) the list itself.
  void prefetch_offset(TaskId id) const { __builtin_prefetch(&offsets_[id]); }
  void prefetch_successors(TaskId id) const { __builtin_prefetch(successors_.data() + offsets_[id]); }
  // Per task, how many edges end at it (counted from the successor lists: the
  // program does not keep them, 4 bytes a task saved at scale).
  BigVector<std::uint32_t> predecessor_counts() const;
  // Calls count(task) once per edge that ends at `task`, for a caller that
  // keeps the counts in its own per-task state.
  template <class Count>
  void count_predecessors(Count&& count) const {
    for (std::uint32_t e : successors_) count(e >> 1);
  }
  // Algorithm step of a task (ring step, hop index), for traces.
  std::uint16_t step(TaskId id) const { return steps_[id]; }
  std::size_t num_edges() const { return successors_.size(); }
  std::size_t num_stream_edges() const { return stream_edges_; }
  std::uint32_t num_ops() const { return num_ops_; }
  std::size_t memory_bytes() const;
  // The same program with every transfer's and compute's resource r renamed
  // to[r] (a program that uses few of many resources, run on those alone).
  Program renamed(std::span<const std::uint32_t> to) const;

 private:
  friend class ProgramBuilder;
  BigVector<Task> tasks_;
  BigVector<std::uint32_t> offsets_;
  BigVector<std::uint32_t> successors_;
  BigVector<std::uint16_t> steps_;
  std::size_t stream_edges_ = 0;
  std::uint32_t num_ops_ = 0;
};

class ProgramBuilder {
 public:
  OpId add_op() { return num_ops_++; }
  TaskId transfer(std::uint32_t link, std::uint64_t bytes, OpId op, std::uint16_t step = 0);
  TaskId compute(std::uint32_t unit, Tick duration, OpId op);
  // A join that completes `delay` after its last predecessor arrived (no
  // resource). `chip`: the chip it belongs to, kept in Task::resource; nothing
  // runs on it (the translation quotient, driver/translations.hpp, maps joins by it).
  TaskId join(OpId op, Tick delay = kZeroTick, std::uint32_t chip = 0);
  // A task like `task` (its kind, amount and op) at algorithm step `step`, on
  // `resource` (a join: its chip): a program rebuilt from part of another.
  TaskId copy(const Task& task, std::uint32_t resource, std::uint16_t step) {
    return copy(task, resource, step, task.op());
  }
  // The same, of op `op`.
  TaskId copy(const Task& task, std::uint32_t resource, std::uint16_t step, OpId op);
  // `after` may not start before `before` (see EdgeKind).
  void depend(TaskId before, TaskId after, EdgeKind kind = EdgeKind::Full);
  std::size_t num_tasks() const { return tasks_.size(); }
  std::size_t num_edges() const { return edges_.size(); }
  const Task& task(TaskId id) const { return tasks_[id]; }
  // Every transfer from task `from` on carries f(its bytes) instead (a
  // protocol's lines around the data an algorithm moves).
  template <class F>
  void map_transfer_bytes(TaskId from, F f) {
    for (std::size_t i = from; i < tasks_.size(); ++i)
      if (tasks_[i].kind() == TaskKind::Transfer) tasks_[i].amount = f(tasks_[i].amount);
  }
  // Appends `times` more rounds of a loop whose rounds differ in their ids
  // alone: copies of the tasks from `first` on and of the edges from
  // `first_edge` on (the last round), copy c shifted by c rounds (the tasks
  // copied), and so is every edge's end at `pivot` or later (the loop's
  // rounds, which a round may wait for); ends before `pivot` (tasks every
  // round shares) stay. The same tasks and edges, in the same order, as
  // building each of those rounds would add, at the cost of a copy.
  void repeat(TaskId first, std::size_t first_edge, TaskId pivot, std::size_t times);
  // Whether a loop that could repeat() its rounds does; false: it builds every
  // round (the same program, which the tests check).
  bool copy_repeats = true;
  void reserve(std::size_t tasks, std::size_t edges);
  Program finish() &&;

 private:
  TaskId add(std::uint64_t amount, std::uint32_t resource, OpId op, TaskKind kind, std::uint16_t step);
  BigVector<Task> tasks_;
  BigVector<std::uint16_t> steps_;
  BigVector<std::uint64_t> edges_;  // before << 32 | after << 1 | stream
  std::uint32_t num_ops_ = 0;
};

}  // namespace meshsim::sim
