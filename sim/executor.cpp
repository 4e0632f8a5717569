#include "sim/executor.hpp"

#include <algorithm>

#include "base/error.hpp"

namespace meshsim::sim {

Executor::Executor(Engine& engine, const Program& program, std::span<const Resource> resources)
    : engine_(engine), program_(program), resources_(resources) {
  self_ = engine_.add_handler(*this);
  const std::size_t n = program_.num_tasks();
  tasks_.resize(n);
  if (program_.num_stream_edges() > 0) stream_floor_.resize(n);
  program_.count_predecessors([&](TaskId t) { ++tasks_[t].pending; });
  for (TaskId i = 0; i < n; ++i) {
    const Task& t = program_.task(i);
    if (t.kind() != TaskKind::Join) MESHSIM_ASSERT(t.resource < resources_.size(), "task on an unknown resource");
    if (t.kind() == TaskKind::Transfer)
      MESHSIM_ASSERT(resources_[t.resource].bandwidth_bytes_per_s > 0, "transfer on a resource without bandwidth");
  }
  state_ = std::vector<ResourceState>(resources_.size());
  for (std::size_t i = 0; i < resources_.size(); ++i)
    if (resources_[i].bandwidth_bytes_per_s > 0)
      state_[i].chunk_time = serialization_time(resources_[i].forward_chunk_bytes, resources_[i].bandwidth_bytes_per_s);
  op_timings_.assign(program_.num_ops(), OpTiming{});
}

void Executor::classify_ops(std::span<const std::uint8_t> op_class) {
  MESHSIM_ASSERT(!running_, "ops classified after the run started");
  MESHSIM_ASSERT(op_class.size() >= program_.num_ops(), "an op without a class");
  for (std::uint8_t c : op_class) MESHSIM_ASSERT(c < kOpClasses, "an op class without a resource variant");
  op_class_ = op_class;
}

void Executor::start() {
  const Tick now = engine_.now();
  for (TaskId i = 0; i < program_.num_tasks(); ++i)
    if (tasks_[i].pending == 0) work_.push_back(i);
  drain(now);
  running_ = true;
}

void Executor::handle_event(std::uint64_t payload, Tick now) {
  if (overflow_) return;  // the run was stopped: time would leave the Tick range
  const auto resource = static_cast<std::uint32_t>(payload & 0xffffffffu);
  ResourceState& r = state_[resource];
  if (!r.wake_pending || static_cast<std::uint32_t>(payload >> 32) != r.generation) return;  // stale or moved
  r.wake_pending = false;
  MESHSIM_ASSERT(!r.waiting.empty() && r.busy_until <= now && r.waiting.front().ready_at <= now,
                 "resource woke up with nothing to start");
  const auto id = static_cast<TaskId>(r.waiting.pop().order & 0xffffffffu);
  ++r.woken;
  ++woken_;
  start_task(id, now);
  schedule_wake(resource, now);
  drain(now);
}

void Executor::upcoming(std::uint64_t payload, int distance) {
  const ResourceState& r = state_[payload & 0xffffffffu];
  if (distance == 3) {
    __builtin_prefetch(&r);
    return;
  }
  // Two events ahead the resource's state has had time to arrive: fetch what
  // starting its first waiting task reads; one event ahead, its successor list.
  if (r.waiting.empty()) return;
  const auto id = static_cast<TaskId>(r.waiting.front().order & 0xffffffffu);
  if (distance == 1) {
    program_.prefetch_successors(id);
    return;
  }
  __builtin_prefetch(&program_.task(id));
  __builtin_prefetch(&tasks_[id]);
  if (!stream_floor_.empty()) __builtin_prefetch(&stream_floor_[id]);
  program_.prefetch_offset(id);
}

void Executor::schedule_wake(std::uint32_t resource, Tick now) {
  ResourceState& r = state_[resource];
  if (r.waiting.empty()) return;
  const Tick at = max(max(r.busy_until, r.waiting.front().ready_at), now);
  if (r.wake_pending && r.wake_at <= at) return;
  r.wake_pending = true;
  r.wake_at = at;
  ++r.generation;
  engine_.schedule(at, self_, (std::uint64_t{r.generation} << 32) | resource);
}

void Executor::WaitQueue::push(const Waiting& w, const Executor& by) {
  if (count_ == capacity_) {  // full: double, the oldest first
    MESHSIM_ASSERT(capacity_ < (std::uint32_t{1} << 31), "too many tasks waiting for one resource");
    auto bigger = std::make_unique<Waiting[]>(2 * std::size_t{capacity_});
    const Waiting* old = data();
    for (std::uint32_t i = 0; i < count_; ++i) bigger[i] = old[(head_ + i) & (capacity_ - 1)];
    heap_ = std::move(bigger);
    capacity_ *= 2;
    head_ = 0;
  }
  Waiting* items = data();
  const std::uint32_t mask = capacity_ - 1;
  // From the back: move later items up one place until w fits.
  std::uint32_t at = count_++;
  for (; at > 0; --at) {
    const Waiting& before = items[(head_ + at - 1) & mask];
    if (!by.later(before, w)) break;
    items[(head_ + at) & mask] = before;
  }
  items[(head_ + at) & mask] = w;
}

Executor::Waiting Executor::WaitQueue::pop() {
  const Waiting w = data()[head_];
  head_ = (head_ + 1) & (capacity_ - 1);
  --count_;
  return w;
}

void Executor::release(TaskId id) {
  std::uint32_t& pending = tasks_[id].pending;
  MESHSIM_ASSERT(pending > 0 && pending != kStarted, "dependency resolved twice");
  if (--pending == 0) work_.push_back(id);
}

void Executor::drain(Tick now) {
  while (work_head_ < work_.size()) activate(work_[work_head_++], now);
  work_.clear();
  work_head_ = 0;
}

void Executor::activate(TaskId id, Tick now) {
  const Task& t = program_.task(id);
  if (t.kind() == TaskKind::Join) {
    complete_join(id);
    return;
  }
  ResourceState& r = state_[t.resource];
  const Tick ready = tasks_[id].ready_at();
  if (ready <= now && !zero_lag_at_.empty()) {
    if (running_ && zero_lag_at_[t.resource] == now && !zero_lag_) zero_lag_ = id;
    zero_lag_at_[t.resource] = now;
  }
  std::uint64_t order = 0;
  if (!keyed_) {
    MESHSIM_ASSERT(activations_ < (std::uint64_t{1} << 32), "too many activations");
    order = (activations_++ << 32) | id;
  } else {
    if (now != last_activation_) last_activation_ = now, ++activation_rank_;
    MESHSIM_ASSERT(activation_rank_ < (std::uint64_t{1} << 32), "too many activation times");
    order = (activation_rank_ << 32) | id;
  }
  const Waiting w{ready, order};
  // With keys, the tasks ready at the start all wait for a wake-up, which
  // chooses among all of them.
  const bool may_start = running_ || !keyed_;
  if (may_start && ready <= now && r.busy_until <= now && (r.waiting.empty() || later(r.waiting.front(), w))) {
    // An idle resource and nothing ahead in line: no event needed. (Whatever
    // waits is ready later; its wake-up, if now too early, is moved.) Whether a
    // task starts this way depends only on the times, not on which of the
    // events at `now` ran first: a task ready before it was activated before now.
    start_task(id, now);
    if (!r.waiting.empty()) {
      if (r.wake_pending && r.wake_at < max(r.busy_until, r.waiting.front().ready_at)) r.wake_pending = false;
      schedule_wake(t.resource, now);
    }
    return;
  }
  r.waiting.push(w, *this);
  schedule_wake(t.resource, now);
}

void Executor::complete_join(TaskId id) {
  tasks_[id].pending = kStarted;
  ++completed_;
  // The last predecessor's arrival, plus the join's delay.
  const Tick at = tasks_[id].ready_at() + Tick::from_ps(static_cast<std::int64_t>(program_.task(id).amount));
  OpTiming& op = op_timings_[program_.task(id).op()];
  op.begin = min(op.begin, at);
  op.end = max(op.end, at);
  makespan_ = max(makespan_, at);
  for (ExecutionObserver* o : observers_) o->on_join(id, program_.task(id), at);
  for (std::uint32_t e : program_.successors(id)) {
    const TaskId succ = e >> 1;
    tasks_[succ].raise_ready_at(at);
    release(succ);
  }
}

void Executor::start_task(TaskId id, Tick now) {
  const Task& t = program_.task(id);
  const Resource& res = resources_[t.resource];
  ResourceState& r = state_[t.resource];
  TaskState& state = tasks_[id];
  const Tick ready = state.ready_at();
  MESHSIM_ASSERT(now >= r.busy_until, "a resource serves two tasks at once");
  MESHSIM_ASSERT(state.pending == 0, "task started twice or too early");
  MESHSIM_ASSERT(now >= ready, "task started before its dependencies allow");
  state.pending = kStarted;
  ++completed_;

  // The op's view of the resource: its own latency and chunk, or its class's.
  const std::uint8_t op_class = op_class_.empty() ? 0 : op_class_[t.op()];
  const ResourceVariant* variant = op_class == 0 ? nullptr : &res.variants[op_class - 1];
  const Tick latency = variant ? variant->latency : res.latency;
  Tick end;
  Tick first_chunk;  // when the first forwarding chunk has left (for stream successors)
  if (t.kind() == TaskKind::Transfer) {
    const std::uint64_t bandwidth = variant && variant->bandwidth_bytes_per_s > 0 ? variant->bandwidth_bytes_per_s
                                                                                 : res.bandwidth_bytes_per_s;
    const Tick service = serialization_time(t.amount, bandwidth);
    const std::uint64_t chunk = variant ? variant->forward_chunk_bytes : res.forward_chunk_bytes;
    // The forwarding chunk, or the whole transfer when it is smaller (or no chunking).
    const Tick chunk_time = chunk == 0 || chunk > t.amount ? service
                            : !variant                     ? r.chunk_time
                                                           : serialization_time(chunk, bandwidth);
    // Cut-through: the last chunk cannot leave before it has arrived from upstream.
    end = stream_floor_.empty() ? now + service : max(now + service, stream_floor_[id] + chunk_time);
    first_chunk = now + chunk_time;
    // Capacity: never more than bandwidth x elapsed time through one link direction.
    MESHSIM_ASSERT(end - now >= service, "link carried more than its bandwidth");
  } else {
    end = now + Tick::from_ps(static_cast<std::int64_t>(t.amount));
    first_chunk = end;
  }
  const Tick arrival = end + latency;
  r.busy_until = end;
  if (arrival > kMaxTick) {  // inputs too large for the time type: stop, report
    if (!overflow_) overflow_ = id;
    return;
  }

  OpTiming& op = op_timings_[t.op()];
  op.begin = min(op.begin, now);
  op.end = max(op.end, arrival);
  makespan_ = max(makespan_, arrival);
  if (!observers_.empty()) {
    const TaskTiming timing{ready, now, end, arrival};
    for (ExecutionObserver* o : observers_) o->on_task(id, t, timing);
  }

  const std::span<const std::uint32_t> successors = program_.successors(id);
  for (std::uint32_t e : successors) __builtin_prefetch(&tasks_[e >> 1]);  // their misses at once
  for (std::uint32_t e : successors) {
    const TaskId succ = e >> 1;
    if (e & 1u) {
      tasks_[succ].raise_ready_at(first_chunk + latency);
      stream_floor_[succ] = max(stream_floor_[succ], arrival);
    } else {
      tasks_[succ].raise_ready_at(arrival);
    }
    release(e >> 1);
  }
}

std::vector<TaskId> Executor::unfinished_tasks() const {
  std::vector<TaskId> out;
  for (TaskId i = 0; i < tasks_.size(); ++i)
    if (tasks_[i].pending != kStarted) out.push_back(i);
  return out;
}

}  // namespace meshsim::sim
