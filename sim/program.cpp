#include "sim/program.hpp"

#include "base/error.hpp"

namespace meshsim::sim {

std::size_t Program::memory_bytes() const {
  return tasks_.capacity() * sizeof(Task) + steps_.capacity() * 2 + offsets_.capacity() * 4 +
         successors_.capacity() * 4;
}

BigVector<std::uint32_t> Program::predecessor_counts() const {
  BigVector<std::uint32_t> counts(tasks_.size(), 0);
  count_predecessors([&](TaskId t) { ++counts[t]; });
  return counts;
}

TaskId ProgramBuilder::add(std::uint64_t amount, std::uint32_t resource, OpId op, TaskKind kind, std::uint16_t step) {
  MESHSIM_ASSERT(tasks_.size() < (std::size_t{1} << 31), "too many tasks");
  MESHSIM_ASSERT(op < num_ops_ && op < (1u << 30), "task of an unknown op");
  tasks_.push_back(Task{amount, resource, (op << 2) | static_cast<std::uint32_t>(kind)});
  steps_.push_back(step);
  return static_cast<TaskId>(tasks_.size() - 1);
}

TaskId ProgramBuilder::transfer(std::uint32_t link, std::uint64_t bytes, OpId op, std::uint16_t step) {
  MESHSIM_ASSERT(bytes > 0, "empty transfer");
  return add(bytes, link, op, TaskKind::Transfer, step);
}

TaskId ProgramBuilder::compute(std::uint32_t unit, Tick duration, OpId op) {
  MESHSIM_ASSERT(duration >= kZeroTick, "negative compute time");
  return add(static_cast<std::uint64_t>(duration.ps()), unit, op, TaskKind::Compute, 0);
}

TaskId ProgramBuilder::join(OpId op, Tick delay, std::uint32_t chip) {
  MESHSIM_ASSERT(delay >= kZeroTick, "negative join delay");
  return add(static_cast<std::uint64_t>(delay.ps()), chip, op, TaskKind::Join, 0);
}

TaskId ProgramBuilder::copy(const Task& task, std::uint32_t resource, std::uint16_t step, OpId op) {
  switch (task.kind()) {
    case TaskKind::Transfer:
      return transfer(resource, task.amount, op, step);
    case TaskKind::Compute:
      return compute(resource, Tick::from_ps(static_cast<std::int64_t>(task.amount)), op);
    case TaskKind::Join:
      break;
  }
  return join(op, Tick::from_ps(static_cast<std::int64_t>(task.amount)), resource);
}

void ProgramBuilder::depend(TaskId before, TaskId after, EdgeKind kind) {
  MESHSIM_ASSERT(before < tasks_.size() && after < tasks_.size(), "edge to an unknown task");
  MESHSIM_ASSERT(before != after, "self edge");
  if (kind == EdgeKind::Stream)
    MESHSIM_ASSERT(tasks_[before].kind() == TaskKind::Transfer && tasks_[after].kind() == TaskKind::Transfer,
                   "stream edges join transfers");
  edges_.push_back((std::uint64_t{before} << 32) | (std::uint64_t{after} << 1) |
                   (kind == EdgeKind::Stream ? 1u : 0u));
}

void ProgramBuilder::repeat(TaskId first, std::size_t first_edge, TaskId pivot, std::size_t times) {
  const std::size_t n = tasks_.size(), m = edges_.size();
  MESHSIM_ASSERT(pivot <= first && first < n && first_edge <= m, "a round to repeat that is not the last");
  const std::size_t round = n - first, round_edges = m - first_edge;
  MESHSIM_ASSERT(times < (std::size_t{1} << 31) / round && n + times * round < (std::size_t{1} << 31),
                 "too many tasks");
  tasks_.reserve(n + times * round);
  steps_.reserve(n + times * round);
  edges_.reserve(m + times * round_edges);
  for (std::size_t c = 1; c <= times; ++c) {
    for (std::size_t i = first; i < n; ++i) {
      tasks_.push_back(tasks_[i]);
      steps_.push_back(steps_[i]);
    }
    const auto shift = static_cast<std::uint32_t>(c * round);
    const auto moved = [&](std::uint64_t id) { return id >= pivot ? id + shift : id; };
    for (std::size_t k = first_edge; k < m; ++k) {
      const std::uint64_t e = edges_[k];
      edges_.push_back(moved(e >> 32) << 32 | moved((e & 0xffffffffu) >> 1) << 1 | (e & 1u));
    }
  }
}

void ProgramBuilder::reserve(std::size_t tasks, std::size_t edges) {
  tasks_.reserve(tasks);
  steps_.reserve(tasks);
  edges_.reserve(edges);
}

Program ProgramBuilder::finish() && {
  Program p;
  const std::size_t n = tasks_.size();
  p.offsets_.assign(n + 1, 0);
  for (std::uint64_t e : edges_) ++p.offsets_[(e >> 32) + 1];
  for (std::size_t i = 0; i < n; ++i) p.offsets_[i + 1] += p.offsets_[i];
  p.successors_.resize(edges_.size());
  // Counting sort by predecessor keeps insertion order among one task's
  // successors. offsets_[i] serves as task i's cursor, which leaves it at the
  // start of task i + 1; shifting back by one restores the starts.
  for (std::uint64_t e : edges_) {
    p.successors_[p.offsets_[e >> 32]++] = static_cast<std::uint32_t>(e & 0xffffffffu);
    p.stream_edges_ += e & 1u;
  }
  for (std::size_t i = n; i > 0; --i) p.offsets_[i] = p.offsets_[i - 1];
  p.offsets_[0] = 0;
  BigVector<std::uint64_t>().swap(edges_);
  p.tasks_ = std::move(tasks_);
  p.steps_ = std::move(steps_);
  p.num_ops_ = num_ops_;
  return p;
}

Program Program::renamed(std::span<const std::uint32_t> to) const {
  Program p = *this;
  for (Task& t : p.tasks_) {
    if (t.kind() == TaskKind::Join) continue;
    MESHSIM_ASSERT(t.resource < to.size() && to[t.resource] != ~std::uint32_t{0}, "a task on a resource not renamed");
    t.resource = to[t.resource];
  }
  return p;
}

}  // namespace meshsim::sim
