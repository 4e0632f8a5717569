#include "sim/executor.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <exception>
#include <thread>

#include "base/error.hpp"

namespace meshsim::sim {

namespace {

// Two threads meet here between the phases of a split run's window.
class SpinBarrier {
 public:
  void wait() {
    const std::uint32_t phase = phase_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) == 1) {
      arrived_.store(0, std::memory_order_relaxed);
      phase_.store(phase + 1, std::memory_order_release);
      return;
    }
    // Spin a while (a window is short), then give the core away (a machine
    // with other work on it).
    for (std::uint32_t spins = 0; phase_.load(std::memory_order_acquire) == phase; ++spins) {
      if (spins < 4096) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      } else {
        std::this_thread::yield();
      }
    }
  }

 private:
  std::atomic<std::uint32_t> arrived_{0};
  std::atomic<std::uint32_t> phase_{0};
};

// f(begin, end) over [0, n / 2) on this thread and [n / 2, n) on another
// (f must not throw).
template <class F>
void in_halves(TaskId n, F f) {
  std::thread other([&] { f(n / 2, n); });
  f(0, n / 2);
  other.join();
}

// Disjoint sets of a split's vertices (resources, then joins' chips).
class Components {
 public:
  explicit Components(std::size_t n) : up_(n) {
    for (std::size_t i = 0; i < n; ++i) up_[i] = static_cast<std::uint32_t>(i);
  }
  std::uint32_t root(std::uint32_t v) {
    while (up_[v] != v) v = up_[v] = up_[up_[v]];
    return v;
  }
  void unite(std::uint32_t a, std::uint32_t b) {
    a = root(a), b = root(b);
    if (a != b) up_[std::max(a, b)] = std::min(a, b);
  }

 private:
  std::vector<std::uint32_t> up_;
};

// Per task, the latest start of one of its predecessors in a window of a
// split run: an open-addressing table (linear probing, a power-of-two size at
// most half full) emptied at the window's end slot by slot used.
class LatestStarts {
 public:
  void note(TaskId task, Tick at) {
    if (2 * (used_.size() + 1) > slots_.size()) grow();
    std::size_t i = find(task);
    if (slots_[i].task == kEmpty) {
      slots_[i] = {task, at};
      used_.push_back(i);
    } else {
      slots_[i].at = max(slots_[i].at, at);
    }
  }
  // The latest start noted for `task`, or `otherwise` if later (or none).
  Tick get(TaskId task, Tick otherwise) const {
    if (used_.empty()) return otherwise;
    const Slot& s = slots_[find(task)];
    return s.task == task ? max(s.at, otherwise) : otherwise;
  }
  void clear() {
    for (std::size_t i : used_) slots_[i].task = kEmpty;
    used_.clear();
  }

 private:
  static constexpr TaskId kEmpty = ~TaskId{0};  // no task has this id (fewer than 2^31)
  struct Slot {
    TaskId task = kEmpty;
    Tick at;
  };
  // The slot of `task`, or the empty one where it would go.
  std::size_t find(TaskId task) const {
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = static_cast<std::size_t>((std::uint64_t{task} * 0x9E3779B97F4A7C15ull) >> 32) & mask;
    while (slots_[i].task != kEmpty && slots_[i].task != task) i = (i + 1) & mask;
    return i;
  }
  void grow() {
    std::vector<Slot> kept;
    for (std::size_t i : used_) kept.push_back(slots_[i]);
    slots_.assign(std::max<std::size_t>(64, 2 * slots_.size()), Slot{});
    used_.clear();
    for (const Slot& s : kept) {
      const std::size_t i = find(s.task);
      slots_[i] = s;
      used_.push_back(i);
    }
  }
  std::vector<Slot> slots_;
  std::vector<std::size_t> used_;
};

}  // namespace

// What one thread runs (see Executor::lanes_).
struct alignas(64) Executor::Lane final : EventHandler {
  // An edge to a task of the other lane, resolved when the window ends: what
  // its predecessor, which started at `at`, allows.
  struct Message {
    TaskId task;
    bool stream;
    Tick ready;
    Tick floor;
    Tick at;
  };
  // On `e`, or (null) on an engine of its own.
  Lane(Executor& x, Engine* e, std::uint8_t i)
      : executor(x), owned(e ? nullptr : std::make_unique<Engine>()), engine(e ? *e : *owned), index(i) {
    self = engine.add_handler(*this);
  }
  void handle_event(std::uint64_t payload, Tick now) override { executor.handle_event(*this, payload, now); }
  void upcoming(std::uint64_t payload, int distance) override { executor.upcoming(payload, distance); }
  void count_completed() { completed.store(completed.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }

  Executor& executor;
  std::unique_ptr<Engine> owned;
  Engine& engine;
  std::uint8_t index;
  Engine::HandlerId self = 0;
  std::vector<ExecutionObserver*> observers;
  std::vector<std::unique_ptr<ExecutionObserver>> parts;  // lane 1's: split from lane 0's
  std::vector<TaskId> work;  // tasks whose last predecessor just resolved, FIFO
  std::size_t work_head = 0;
  std::vector<OpTiming> op_timings;
  Tick makespan;
  std::atomic<std::size_t> completed{0};  // read by progress reports from the other thread
  std::uint64_t woken = 0;
  std::uint64_t activations = 0;
  std::optional<TaskId> zero_lag;
  std::optional<TaskId> overflow;
  // A split run: the end of the window being simulated; the edges to the
  // other lane's tasks, in two outboxes that windows alternate (the other
  // lane takes one while this one fills the other), each with the least ready
  // time of its messages; and per task with predecessors in both lanes the
  // latest start of one of them in this window.
  Tick window_end = kMaxTick;
  std::size_t parity = 0;  // the outbox being filled
  std::array<std::vector<Message>, 2> outbox;
  std::array<Tick, 2> least_ready{Engine::kNoEvent, Engine::kNoEvent};
  LatestStarts latest;
  bool taking = false;        // taking the other lane's messages (take_messages)
};

Executor::~Executor() = default;

Executor::Executor(Engine& engine, const Program& program, std::span<const Resource> resources)
    : engine_(engine), program_(program), resources_(resources) {
  state_ = std::vector<ResourceState>(resources_.size());
  for (std::size_t i = 0; i < resources_.size(); ++i)
    if (resources_[i].bandwidth_bytes_per_s > 0)
      state_[i].chunk_time = serialization_time(resources_[i].forward_chunk_bytes, resources_[i].bandwidth_bytes_per_s);
  lanes_.push_back(std::make_unique<Lane>(*this, &engine_, std::uint8_t{0}));
  lanes_[0]->op_timings.assign(program_.num_ops(), OpTiming{});
}

void Executor::prepare() {
  if (prepared_) return;
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
  prepared_ = true;
}

void Executor::classify_ops(std::span<const std::uint8_t> op_class) {
  MESHSIM_ASSERT(!running_, "ops classified after the run started");
  MESHSIM_ASSERT(op_class.size() >= program_.num_ops(), "an op without a class");
  for (std::uint8_t c : op_class) MESHSIM_ASSERT(c < kOpClasses, "an op class without a resource variant");
  op_class_ = op_class;
}

void Executor::add_observer(ExecutionObserver& observer) { lanes_[0]->observers.push_back(&observer); }

Tick Executor::makespan() const { return lanes_[0]->makespan; }

const std::vector<OpTiming>& Executor::op_timings() const { return lanes_[0]->op_timings; }

std::size_t Executor::tasks_completed() const {
  std::size_t n = 0;
  for (const auto& l : lanes_) n += l->completed.load(std::memory_order_relaxed);
  return n;
}

std::uint64_t Executor::tasks_woken() const {
  std::uint64_t n = 0;
  for (const auto& l : lanes_) n += l->woken;
  return n;
}

std::optional<TaskId> Executor::first_zero_lag() const {
  for (const auto& l : lanes_)
    if (l->zero_lag) return l->zero_lag;
  return std::nullopt;
}

std::optional<TaskId> Executor::overflowed_task() const {
  for (const auto& l : lanes_)
    if (l->overflow) return l->overflow;
  return std::nullopt;
}

void Executor::start() {
  prepare();
  const Tick now = engine_.now();
  for (TaskId i = 0; i < program_.num_tasks(); ++i)
    if (tasks_[i].pending == 0) lanes_[parallel_ ? flags_[i] & 1u : 0]->work.push_back(i);
  for (const auto& l : lanes_) drain(*l, now);
  running_ = true;
}

void Executor::run(unsigned threads, double min_tasks_per_window) {
  MESHSIM_ASSERT(!running_, "run() after start()");
  if (threads >= 2 && keyed_) {
    // The tasks' state (their predecessors counted) on a second thread while
    // this one looks for a cut: both only read the program.
    std::exception_ptr failed;
    std::thread second([&] {
      try {
        prepare();
      } catch (...) {
        failed = std::current_exception();
      }
    });
    try {
      parallel_ = split(min_tasks_per_window);
    } catch (...) {
      second.join();
      throw;
    }
    second.join();
    if (failed) std::rethrow_exception(failed);
  }
  // Two tasks of one resource ready the moment they were activated, at once,
  // go in the order of their events, which the two threads do not keep: the
  // caller runs such a program again on one thread (first_zero_lag).
  if (parallel_ && zero_lag_at_.empty()) watch_zero_lag();
  start();
  if (parallel_)
    run_split();
  else
    engine_.run();
}

void Executor::handle_event(Lane& l, std::uint64_t payload, Tick now) {
  if (l.overflow) return;  // the run was stopped: time would leave the Tick range
  const auto resource = static_cast<std::uint32_t>(payload & 0xffffffffu);
  ResourceState& r = state_[resource];
  if (!r.wake_pending || static_cast<std::uint32_t>(payload >> 32) != r.generation) return;  // stale or moved
  r.wake_pending = false;
  MESHSIM_ASSERT(!r.waiting.empty() && r.busy_until <= now && r.waiting.front().ready_at <= now,
                 "resource woke up with nothing to start");
  const TaskId id = r.waiting.pop().id;
  ++r.woken;
  ++l.woken;
  start_task(l, id, now);
  schedule_wake(l, resource, now);
  drain(l, now);
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
  const TaskId id = r.waiting.front().id;
  if (distance == 1) {
    program_.prefetch_successors(id);
    return;
  }
  __builtin_prefetch(&program_.task(id));
  __builtin_prefetch(&tasks_[id]);
  if (!stream_floor_.empty()) __builtin_prefetch(&stream_floor_[id]);
  program_.prefetch_offset(id);
}

void Executor::schedule_wake(Lane& l, std::uint32_t resource, Tick now) {
  ResourceState& r = state_[resource];
  if (r.waiting.empty()) return;
  const Tick at = max(max(r.busy_until, r.waiting.front().ready_at), now);
  if (r.wake_pending && r.wake_at <= at) return;
  r.wake_pending = true;
  r.wake_at = at;
  ++r.generation;
  l.engine.schedule(at, l.self, (std::uint64_t{r.generation} << 32) | resource);
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

void Executor::release(Lane& l, TaskId id, Tick now, bool noted) {
  std::uint32_t& pending = tasks_[id].pending;
  MESHSIM_ASSERT(pending > 0 && pending != kStarted, "dependency resolved twice");
  if (--pending == 0) {
    if (l.taking)  // at a window's end: as of its latest predecessor's start
      activate(l, id, l.latest.get(id, now));
    else
      l.work.push_back(id);
  } else if (parallel_ && (flags_[id] & 2u) && !noted) {
    // Its last predecessor may be resolved at this window's end (from the
    // other lane, or through joins from there): the task is activated then as
    // of its latest predecessor's start.
    l.latest.note(id, now);
  }
}

void Executor::resolve(Lane& l, TaskId succ, bool stream, Tick ready, Tick floor, Tick now) {
  if (parallel_ && (flags_[succ] & 1u) != l.index) {
    // (Between windows, as take_messages completes joins, window_end is past
    // every time: their successors are in their own part.)
    MESHSIM_ASSERT(ready >= l.window_end && l.window_end != kMaxTick,
                   "an edge between a split run's parts shorter than its lookahead");
    l.outbox[l.parity].push_back({succ, stream, ready, floor, now});
    l.least_ready[l.parity] = min(l.least_ready[l.parity], ready);
    return;
  }
  tasks_[succ].raise_ready_at(ready);
  if (stream) stream_floor_[succ] = max(stream_floor_[succ], floor);
  release(l, succ, now);
}

void Executor::drain(Lane& l, Tick now) {
  while (l.work_head < l.work.size()) activate(l, l.work[l.work_head++], now);
  l.work.clear();
  l.work_head = 0;
}

void Executor::activate(Lane& l, TaskId id, Tick now) {
  const Task& t = program_.task(id);
  if (t.kind() == TaskKind::Join) {
    complete_join(l, id, now);
    return;
  }
  ResourceState& r = state_[t.resource];
  const Tick ready = tasks_[id].ready_at();
  if (ready <= now && !zero_lag_at_.empty()) {
    if (running_ && zero_lag_at_[t.resource] == now && !l.zero_lag) l.zero_lag = id;
    zero_lag_at_[t.resource] = now;
  }
  // With keys the activation time orders ties (a function of the schedule,
  // whichever lane activates the task), else the activation sequence.
  std::uint64_t order = 0;
  if (keyed_) {
    order = static_cast<std::uint64_t>(now.ps());
  } else {
    order = l.activations++;
  }
  const Waiting w{ready, order, id};
  // With keys, the tasks ready at the start all wait for a wake-up, which
  // chooses among all of them.
  const bool may_start = running_ || !keyed_;
  if (may_start && ready <= now && r.busy_until <= now && (r.waiting.empty() || later(r.waiting.front(), w))) {
    // An idle resource and nothing ahead in line: no event needed. (Whatever
    // waits is ready later; its wake-up, if now too early, is moved.) Whether a
    // task starts this way depends only on the times, not on which of the
    // events at `now` ran first: a task ready before it was activated before now.
    start_task(l, id, now);
    if (!r.waiting.empty()) {
      if (r.wake_pending && r.wake_at < max(r.busy_until, r.waiting.front().ready_at)) r.wake_pending = false;
      schedule_wake(l, t.resource, now);
    }
    return;
  }
  r.waiting.push(w, *this);
  schedule_wake(l, t.resource, now);
}

void Executor::complete_join(Lane& l, TaskId id, Tick now) {
  tasks_[id].pending = kStarted;
  l.count_completed();
  // The last predecessor's arrival, plus the join's delay.
  const Tick at = tasks_[id].ready_at() + Tick::from_ps(static_cast<std::int64_t>(program_.task(id).amount));
  OpTiming& op = l.op_timings[program_.task(id).op()];
  op.begin = min(op.begin, at);
  op.end = max(op.end, at);
  l.makespan = max(l.makespan, at);
  for (ExecutionObserver* o : l.observers) o->on_join(id, program_.task(id), at);
  for (std::uint32_t e : program_.successors(id)) resolve(l, e >> 1, false, at, at, now);
}

void Executor::start_task(Lane& l, TaskId id, Tick now) {
  const Task& t = program_.task(id);
  const Resource& res = resources_[t.resource];
  ResourceState& r = state_[t.resource];
  TaskState& state = tasks_[id];
  const Tick ready = state.ready_at();
  MESHSIM_ASSERT(now >= r.busy_until, "a resource serves two tasks at once");
  MESHSIM_ASSERT(state.pending == 0, "task started twice or too early");
  MESHSIM_ASSERT(now >= ready, "task started before its dependencies allow");
  state.pending = kStarted;
  l.count_completed();

  // The op's view of the resource: its own latency and chunk, or its class's.
  const std::uint8_t op_class = op_class_of(t);
  const ResourceVariant* variant = op_class == 0 ? nullptr : &res.variants[op_class - 1];
  const Tick latency = latency_of(res, op_class);
  Tick end;
  Tick first_chunk;  // when the first forwarding chunk has left (for stream successors)
  if (t.kind() == TaskKind::Transfer) {
    const std::uint64_t bandwidth = bandwidth_of(res, op_class);
    // (Most of a resource's transfers are of one size and class: a division saved.)
    if (t.amount != r.served_bytes || op_class != r.served_class) {
      r.served_bytes = t.amount;
      r.served_class = op_class;
      r.service = serialization_time(t.amount, bandwidth);
    }
    const Tick service = r.service;
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
    if (!l.overflow) l.overflow = id;
    return;
  }

  OpTiming& op = l.op_timings[t.op()];
  op.begin = min(op.begin, now);
  op.end = max(op.end, arrival);
  l.makespan = max(l.makespan, arrival);
  if (!l.observers.empty()) {
    const TaskTiming timing{ready, now, end, arrival};
    for (ExecutionObserver* o : l.observers) o->on_task(id, t, timing);
  }

  const std::span<const std::uint32_t> successors = program_.successors(id);
  for (std::uint32_t e : successors) {  // their misses at once
    __builtin_prefetch(&tasks_[e >> 1]);
    if (e & 1u) __builtin_prefetch(&stream_floor_[e >> 1]);  // a stream edge raises its floor
    if (parallel_) __builtin_prefetch(&flags_[e >> 1]);
  }
  for (std::uint32_t e : successors) {
    if (e & 1u)
      resolve(l, e >> 1, true, first_chunk + latency, arrival, now);
    else
      resolve(l, e >> 1, false, arrival, arrival, now);
  }
}

std::vector<TaskId> Executor::unfinished_tasks() const {
  std::vector<TaskId> out;
  for (TaskId i = 0; i < program_.num_tasks(); ++i)
    if (!prepared_ || tasks_[i].pending != kStarted) out.push_back(i);
  return out;
}

bool Executor::split(double min_tasks_per_window) {
  if (!keyed_ || lanes_.size() != 1 || resources_.empty()) return false;
  std::vector<std::unique_ptr<ExecutionObserver>> parts;
  for (const ExecutionObserver* o : lanes_[0]->observers) {
    parts.push_back(o->split());
    if (!parts.back()) return false;
  }
  const std::size_t n = program_.num_tasks();
  if (n < 2) return false;
  // Vertices: the resources, then the chips that joins belong to.
  const auto resources = static_cast<std::uint32_t>(resources_.size());
  std::vector<Tick> latencies;  // of the transfers, as their ops see them
  const auto latency = [&](const Task& t) { return latency_of(resources_[t.resource], op_class_of(t)); };
  std::vector<std::uint64_t> tasks_on(resources, 0);  // per vertex
  // Per resource and op class: the bytes it carries or the time it computes
  // (the busiest one bounds the run's length from below).
  std::vector<std::array<std::uint64_t, kOpClasses>> load(resources);
  for (TaskId i = 0; i < n; ++i) {
    const Task& t = program_.task(i);
    if (t.kind() == TaskKind::Join) {
      const std::size_t v = std::size_t{resources} + t.resource;  // its chip's vertex
      if (v >= tasks_on.size()) tasks_on.resize(v + 1, 0);
      ++tasks_on[v];
      continue;
    }
    ++tasks_on[t.resource];
    std::uint64_t& carried = load[t.resource][op_class_of(t)];
    carried = t.amount > UINT64_MAX - carried ? UINT64_MAX : carried + t.amount;
    if (t.kind() == TaskKind::Transfer) {
      const Tick lat = latency(t);
      if (std::find(latencies.begin(), latencies.end(), lat) == latencies.end()) {
        if (latencies.size() == 16) return false;  // too varied to try every one
        latencies.push_back(lat);
      }
    }
  }
  const auto vertex = [&](const Task& t) { return t.kind() == TaskKind::Join ? resources + t.resource : t.resource; };
  std::sort(latencies.rbegin(), latencies.rend());
  // The run lasts at least as long as its busiest resource works (ps; an
  // estimate for the choice below, not a result).
  double busiest = 0;
  for (std::uint32_t r = 0; r < resources; ++r) {
    const Resource& res = resources_[r];
    double busy = 0;
    for (std::size_t c = 0; c < kOpClasses; ++c) {
      const std::uint64_t bandwidth = bandwidth_of(res, static_cast<std::uint8_t>(c));
      const auto amount = static_cast<double>(load[r][c]);
      busy += bandwidth == 0 ? amount : amount * 1e12 / static_cast<double>(bandwidth);
    }
    busiest = std::max(busiest, busy);
  }
  // The largest lookahead first: edges that leave a transfer of a shorter
  // latency, a join or a compute keep their ends together; the components
  // then go to part 0 in the order of their first vertex (neighbouring
  // resources mostly share a part).
  for (const Tick lookahead : latencies) {
    if (lookahead <= kZeroTick) break;
    // A window costs the threads a meeting: with few tasks a window (a long
    // run of few tasks, as a training step's computes make it), the meetings
    // cost more than the second thread saves. (The estimate: the
    // busiest resource's work over the lookahead.)
    if (static_cast<double>(n) < min_tasks_per_window * busiest / static_cast<double>(lookahead.ps())) continue;
    // (Each half of the tasks on a thread of its own, then one into the
    // other: a component's root is its least vertex either way.)
    Components together(tasks_on.size()), second(tasks_on.size());
    in_halves(static_cast<TaskId>(n), [&](TaskId begin, TaskId end) {
      Components& c = begin == 0 ? together : second;
      for (TaskId i = begin; i < end; ++i) {
        const Task& t = program_.task(i);
        const bool short_edges = t.kind() != TaskKind::Transfer || latency(t) < lookahead;
        if (!short_edges) continue;
        for (std::uint32_t e : program_.successors(i)) c.unite(vertex(t), vertex(program_.task(e >> 1)));
      }
    });
    for (std::uint32_t v = 0; v < tasks_on.size(); ++v) together.unite(v, second.root(v));
    std::vector<std::uint64_t> size(tasks_on.size(), 0);  // per component (its root)
    for (std::uint32_t v = 0; v < size.size(); ++v) size[together.root(v)] += tasks_on[v];
    // Part 0: the components up to the one that brings it nearest half the tasks.
    std::uint64_t first = 0, best = 0;
    std::uint32_t last = 0;  // part 0's last component (its root)
    for (std::uint32_t v = 0; v < size.size(); ++v) {
      if (together.root(v) != v) continue;
      first += size[v];
      const auto gap = [n](std::uint64_t k) { return k > n - k ? k - (n - k) : (n - k) - k; };
      if (gap(first) < gap(best)) best = first, last = v;
    }
    // Both parts at least 40 % of the tasks, or the threads would mostly wait.
    if (5 * best > 3 * n || 5 * best < 2 * n) continue;
    std::vector<std::uint8_t> part(size.size(), 0);
    for (std::uint32_t v = 0; v < size.size(); ++v) part[v] = together.root(v) <= last ? 0 : 1;
    flags_.assign(n, 0);
    in_halves(static_cast<TaskId>(n), [&](TaskId begin, TaskId end) {
      for (TaskId i = begin; i < end; ++i) flags_[i] = part[vertex(program_.task(i))];
    });
    // Bit 1: a task whose last predecessor may be resolved at a window's end,
    // from the other part or through joins completed there (their successors
    // are in their own part). (Each half's edges on a thread of its own: a
    // task's flags may be set from both, atomically.)
    in_halves(static_cast<TaskId>(n), [&](TaskId begin, TaskId end) {
      const auto flag = [&](TaskId i) { return std::atomic_ref<std::uint8_t>(flags_[i]); };
      for (TaskId i = begin; i < end; ++i) {
        const unsigned own = flag(i).load(std::memory_order_relaxed) & 1u;
        for (std::uint32_t e : program_.successors(i))
          if ((flag(e >> 1).load(std::memory_order_relaxed) & 1u) != own)
            flag(e >> 1).fetch_or(2u, std::memory_order_relaxed);
      }
    });
    std::vector<TaskId> joins;
    for (TaskId i = 0; i < n; ++i)
      if ((flags_[i] & 2u) && program_.task(i).kind() == TaskKind::Join) joins.push_back(i);
    while (!joins.empty()) {
      const TaskId j = joins.back();
      joins.pop_back();
      for (std::uint32_t e : program_.successors(j)) {
        const TaskId succ = e >> 1;
        if (flags_[succ] & 2u) continue;
        flags_[succ] |= 2u;
        if (program_.task(succ).kind() == TaskKind::Join) joins.push_back(succ);
      }
    }
    lookahead_ = lookahead;
    auto lane = std::make_unique<Lane>(*this, nullptr, std::uint8_t{1});
    lane->op_timings.assign(program_.num_ops(), OpTiming{});
    for (auto& p : parts) lane->observers.push_back(p.get());
    lane->parts = std::move(parts);
    lanes_.push_back(std::move(lane));
    return true;
  }
  return false;
}

void Executor::take_messages(Lane& l, Lane& from) {
  l.window_end = kMaxTick;  // resolve(): no edge to the other lane from here
  std::vector<Lane::Message>& outbox = from.outbox[l.parity];
  // A task is activated as of its latest predecessor's start, in either lane:
  // this window's starts of the predecessors of the tasks that may be
  // activated here.
  for (const Lane::Message& m : outbox) l.latest.note(m.task, m.at);
  l.taking = true;
  for (const Lane::Message& m : outbox) {
    tasks_[m.task].raise_ready_at(m.ready);
    if (m.stream) stream_floor_[m.task] = max(stream_floor_[m.task], m.floor);
    release(l, m.task, m.at, true);
  }
  l.taking = false;
  outbox.clear();
  l.latest.clear();
}

void Executor::run_split() {
  Lane& a = *lanes_[0];
  Lane& b = *lanes_[1];
  // Per window parity, each lane's next event after its window (before it
  // takes the other's messages).
  std::array<std::array<Tick, 2>, 2> next{};
  SpinBarrier barrier;
  // Each thread: simulate the window [t, t + lookahead), publish its next
  // event and its messages, meet the other, take the other's messages; then
  // the next window at once, from the earliest of both lanes' next events and
  // both outboxes' ready times. Nothing the messages start comes earlier (a
  // message's task is ready at its ready time, a join's successors at the
  // join's), so the windows cover every event in time order, and the lanes
  // meet once a window: the one still taking its messages writes only its own
  // state, the outbox the other fills is the other one (an edge from a join
  // that completes there stays in its lane), and what it read of the window
  // (the other's next event, least ready time, outbox) is not written again
  // until both have met once more.
  const Tick first = min(a.engine.next_time(), b.engine.next_time());
  const auto simulate = [&](Lane& l, Lane& other) {
    Tick t = first;
    while (t != Engine::kNoEvent) {
      const std::size_t p = l.parity;
      l.least_ready[p] = Engine::kNoEvent;
      // (Saturated: past kMaxTick nothing crosses, every arrival there overflows.)
      l.window_end = t.ps() > Engine::kNoEvent.ps() - lookahead_.ps() ? Engine::kNoEvent : t + lookahead_;
      l.engine.run_until(l.window_end);
      next[p][l.index] = l.engine.next_time();
      barrier.wait();
      t = min(min(next[p][0], next[p][1]), min(a.least_ready[p], b.least_ready[p]));
      take_messages(l, other);
      if (l.index == 0) ++windows_;
      l.parity = p ^ 1u;
    }
  };
  std::thread second([&] { simulate(b, a); });
  simulate(a, b);
  second.join();
  // Lane 0 reports for both.
  for (std::size_t i = 0; i < a.op_timings.size(); ++i) {
    a.op_timings[i].begin = min(a.op_timings[i].begin, b.op_timings[i].begin);
    a.op_timings[i].end = max(a.op_timings[i].end, b.op_timings[i].end);
  }
  a.makespan = max(a.makespan, b.makespan);
  for (std::size_t i = 0; i < a.observers.size(); ++i) a.observers[i]->merge(*b.parts[i]);
}

}  // namespace meshsim::sim
