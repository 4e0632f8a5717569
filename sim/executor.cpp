#include "sim/executor.hpp"

#include "base/error.hpp"

namespace meshsim::sim {

namespace {
constexpr TaskId kNone = ~TaskId{0};
}

Executor::Executor(Engine& engine, const Program& program, std::span<const Resource> resources)
    : engine_(engine), program_(program), resources_(resources) {
  self_ = engine_.add_handler(*this);
  const std::size_t n = program_.num_tasks();
  pending_.resize(n);
  for (TaskId i = 0; i < n; ++i) pending_[i] = program_.num_predecessors(i);
  stream_ready_.assign(n, kZeroTick);
  stream_floor_.assign(n, kZeroTick);
  done_.assign(n, 0);
  next_in_queue_.assign(n, kNone);
  state_.assign(resources_.size(), ResourceState{});
  op_timings_.assign(program_.num_ops(), OpTiming{});
  for (TaskId i = 0; i < n; ++i) {
    const Task& t = program_.task(i);
    if (t.kind != TaskKind::Join) MESHSIM_ASSERT(t.resource < resources_.size(), "task on an unknown resource");
    if (t.kind == TaskKind::Transfer)
      MESHSIM_ASSERT(resources_[t.resource].bandwidth_bytes_per_s > 0, "transfer on a resource without bandwidth");
  }
}

void Executor::start() {
  const Tick now = engine_.now();
  for (TaskId i = 0; i < program_.num_tasks(); ++i)
    if (pending_[i] == 0) make_ready(i, now);
  drain(now);
}

void Executor::handle_event(std::uint64_t payload, Tick now) {
  const auto type = payload & 3u;
  const auto id = static_cast<std::uint32_t>(payload >> 2);
  switch (type) {
    case kReady:
      enqueue(id, now);
      break;
    case kArrival:
      release_full_successors(id, now);
      break;
    case kResourceFree: {
      ResourceState& r = state_[id];
      r.free_event_pending = false;
      const TaskId head = r.head;
      MESHSIM_ASSERT(head != kNone, "resource free event with an empty queue");
      r.head = next_in_queue_[head];
      if (r.head == kNone) r.tail = kNone;
      start_task(head, now);
      if (r.head != kNone) {
        r.free_event_pending = true;
        engine_.schedule(r.busy_until, self_, (std::uint64_t{id} << 2) | kResourceFree);
      }
      break;
    }
    default:
      MESHSIM_ASSERT(false, "unknown event type");
  }
  drain(now);
}

void Executor::resolve(TaskId id, Tick now) {
  MESHSIM_ASSERT(pending_[id] > 0, "dependency resolved twice");
  if (--pending_[id] == 0) make_ready(id, now);
}

void Executor::make_ready(TaskId id, Tick now) {
  const Tick at = max(now, stream_ready_[id]);
  if (at > now) {
    engine_.schedule(at, self_, (std::uint64_t{id} << 2) | kReady);
  } else {
    ready_now_.push_back(id);
  }
}

void Executor::drain(Tick now) {
  while (ready_head_ < ready_now_.size()) enqueue(ready_now_[ready_head_++], now);
  ready_now_.clear();
  ready_head_ = 0;
}

void Executor::enqueue(TaskId id, Tick now) {
  const Task& t = program_.task(id);
  if (t.kind == TaskKind::Join) {
    finish_instant(id, now);
    return;
  }
  ResourceState& r = state_[t.resource];
  if (r.head == kNone && r.busy_until <= now) {
    start_task(id, now);
    return;
  }
  if (r.tail == kNone) {
    r.head = r.tail = id;
  } else {
    next_in_queue_[r.tail] = id;
    r.tail = id;
  }
  if (!r.free_event_pending) {
    r.free_event_pending = true;
    engine_.schedule(max(r.busy_until, now), self_, (std::uint64_t{t.resource} << 2) | kResourceFree);
  }
}

void Executor::start_task(TaskId id, Tick now) {
  const Task& t = program_.task(id);
  const Resource& res = resources_[t.resource];
  ResourceState& r = state_[t.resource];
  MESHSIM_ASSERT(now >= r.busy_until, "a resource serves two tasks at once");
  MESHSIM_ASSERT(!done_[id], "task started twice");
  done_[id] = 1;
  ++completed_;

  Tick end;
  Tick first_chunk;  // when the first forwarding chunk has left (for stream successors)
  if (t.kind == TaskKind::Transfer) {
    const Tick service = serialization_time(t.amount, res.bandwidth_bytes_per_s);
    const std::uint64_t chunk = res.forward_chunk_bytes == 0 || res.forward_chunk_bytes > t.amount
                                    ? t.amount
                                    : res.forward_chunk_bytes;
    const Tick chunk_time = serialization_time(chunk, res.bandwidth_bytes_per_s);
    // Cut-through: the last chunk cannot leave before it has arrived from upstream.
    end = max(now + service, stream_floor_[id] + chunk_time);
    first_chunk = now + chunk_time;
    // Capacity: never more than bandwidth x elapsed time through one link direction.
    MESHSIM_ASSERT(end - now >= service, "link carried more than its bandwidth");
  } else {
    end = now + Tick::from_ps(static_cast<std::int64_t>(t.amount));
    first_chunk = end;
  }
  const Tick arrival = end + res.latency;
  r.busy_until = end;

  OpTiming& op = op_timings_[t.op];
  op.begin = min(op.begin, now);
  op.end = max(op.end, arrival);
  makespan_ = max(makespan_, arrival);
  if (!observers_.empty()) {
    const TaskTiming timing{now, now, end, arrival};
    for (ExecutionObserver* o : observers_) o->on_task(id, t, timing);
  }

  bool has_full = false;
  for (std::uint32_t s : program_.successors(id)) {
    if (s & 1u) {
      const TaskId succ = s >> 1;
      stream_ready_[succ] = max(stream_ready_[succ], first_chunk + res.latency);
      stream_floor_[succ] = max(stream_floor_[succ], arrival);
      resolve(succ, now);
    } else {
      has_full = true;
    }
  }
  if (has_full) engine_.schedule(arrival, self_, (std::uint64_t{id} << 2) | kArrival);
}

void Executor::finish_instant(TaskId id, Tick now) {
  MESHSIM_ASSERT(!done_[id], "join fired twice");
  done_[id] = 1;
  ++completed_;
  OpTiming& op = op_timings_[program_.task(id).op];
  op.begin = min(op.begin, now);
  op.end = max(op.end, now);
  makespan_ = max(makespan_, now);
  release_full_successors(id, now);
}

void Executor::release_full_successors(TaskId id, Tick now) {
  for (std::uint32_t s : program_.successors(id))
    if (!(s & 1u)) resolve(s >> 1, now);
}

std::vector<TaskId> Executor::unfinished_tasks() const {
  std::vector<TaskId> out;
  for (TaskId i = 0; i < done_.size(); ++i)
    if (!done_[i]) out.push_back(i);
  return out;
}

}  // namespace meshsim::sim
