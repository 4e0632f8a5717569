#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "sim/engine.hpp"
#include "sim/executor.hpp"
#include "sim/program.hpp"

using namespace meshsim;
using namespace meshsim::sim;

namespace {

// Two links of 1 GB/s (1 byte per ns) with 100 ns latency, no forwarding chunk
// (a stream successor may start once the predecessor's first byte... i.e. the
// whole transfer, since chunk = transfer), and one compute unit.
std::vector<Resource> resources(std::uint64_t chunk = 0) {
  const Resource link{1'000'000'000, Tick::from_ps(100'000), chunk};
  return {link, link, link, Resource{0, kZeroTick, 0}};
}

struct Timings : ExecutionObserver {
  std::vector<TaskTiming> by_task;
  explicit Timings(std::size_t n) : by_task(n) {}
  void on_task(TaskId id, const Task&, const TaskTiming& t) override { by_task[id] = t; }
};

struct Run {
  Program program;
  std::vector<Resource> res;
  Engine engine;
  std::unique_ptr<Executor> exec;
  std::unique_ptr<Timings> timings;
  std::vector<std::uint8_t> classes;
  Run(ProgramBuilder&& b, std::vector<Resource> r, std::vector<std::uint8_t> op_classes = {})
      : program(std::move(b).finish()), res(std::move(r)), classes(std::move(op_classes)) {
    exec = std::make_unique<Executor>(engine, program, res);
    if (!classes.empty()) exec->classify_ops(classes);
    timings = std::make_unique<Timings>(program.num_tasks());
    exec->add_observer(*timings);
    exec->start();
    engine.run();
  }
  const TaskTiming& t(TaskId id) const { return timings->by_task[id]; }
};

// Two ops, op i a cut-through chain of two 1000-byte hops: link i, then link 2.
void two_chains(ProgramBuilder& b, std::vector<TaskId>& first, std::vector<TaskId>& second) {
  for (int i = 0; i < 2; ++i) {
    const OpId op = b.add_op();
    first.push_back(b.transfer(static_cast<std::uint32_t>(i), 1000, op));
    second.push_back(b.transfer(2, 1000, op));
    b.depend(first.back(), second.back(), EdgeKind::Stream);
  }
}

}  // namespace

TEST_CASE("Executor: one transfer takes bytes / bandwidth plus latency", "[sim]") {
  ProgramBuilder b;
  const OpId op = b.add_op();
  b.transfer(0, 1000, op);  // 1000 bytes at 1 B/ns = 1 us
  Run r(std::move(b), resources());
  CHECK(r.t(0).start.ps() == 0);
  CHECK(r.t(0).end.ps() == 1'000'000);
  CHECK(r.t(0).arrival.ps() == 1'100'000);
  CHECK(r.exec->makespan().ps() == 1'100'000);
  CHECK(r.exec->op_timings()[0].end.ps() == 1'100'000);
}

TEST_CASE("Executor: a link serves transfers one at a time in FIFO order", "[sim]") {
  ProgramBuilder b;
  const OpId op = b.add_op();
  const TaskId a = b.transfer(0, 1000, op);
  const TaskId c = b.transfer(0, 500, op);
  const TaskId other = b.transfer(1, 1000, op);  // a different link runs concurrently
  Run r(std::move(b), resources());
  CHECK(r.t(a).start.ps() == 0);
  CHECK(r.t(c).start.ps() == 1'000'000);  // waits for the link, not for a's latency
  CHECK(r.t(c).arrival.ps() == 1'600'000);
  CHECK(r.t(other).start.ps() == 0);
  CHECK(r.exec->makespan().ps() == 1'600'000);
}

TEST_CASE("Executor: full edges wait for arrival, joins take no time", "[sim]") {
  ProgramBuilder b;
  const OpId op = b.add_op();
  const TaskId x = b.transfer(0, 1000, op);
  const TaskId j = b.join(op);
  const TaskId y = b.transfer(1, 1000, op);
  b.depend(x, j);
  b.depend(j, y);
  Run r(std::move(b), resources());
  CHECK(r.t(y).start.ps() == 1'100'000);
  CHECK(r.exec->makespan().ps() == 2'200'000);
  CHECK(r.exec->unfinished_tasks().empty());
}

TEST_CASE("Executor: stream edges pipeline a forwarded transfer (cut-through)", "[sim]") {
  ProgramBuilder b;
  const OpId op = b.add_op();
  const TaskId x = b.transfer(0, 1000, op);
  const TaskId y = b.transfer(1, 1000, op);
  b.depend(x, y, EdgeKind::Stream);
  SECTION("chunk of 100 bytes: y starts after the first chunk and its latency") {
    Run r(std::move(b), resources(100));
    CHECK(r.t(y).start.ps() == 100'000 + 100'000);
    // It cannot finish before x's last byte arrived (1.1 us) plus one chunk (0.1 us).
    CHECK(r.t(y).end.ps() == 1'200'000);
    CHECK(r.t(y).arrival.ps() == 1'300'000);
  }
  SECTION("no chunking: store and forward") {
    Run r(std::move(b), resources(0));
    CHECK(r.t(y).start.ps() == 1'100'000);
    CHECK(r.t(y).arrival.ps() == 2'200'000);
  }
}

TEST_CASE("Executor: an op of a class sees each resource's variant: its latency and chunk, the same bandwidth",
          "[sim]") {
  // Two ops, each a cut-through chain of two 1000-byte hops; op 1 is of class 2.
  ProgramBuilder b;
  std::vector<TaskId> first, second;
  two_chains(b, first, second);
  std::vector<Resource> res = resources(100);
  for (Resource& r : res) r.variants[1] = {Tick::from_ps(10'000), 50};
  Run r(std::move(b), res, {0, 2});
  // Op 0 as without classes: 1 us a hop, 100 ns latency, 100-byte chunks.
  CHECK(r.t(first[0]).arrival.ps() == 1'100'000);
  // Op 1: 10 ns latency; its second hop may start after one 50-byte chunk (50 ns).
  CHECK(r.t(first[1]).arrival.ps() == 1'010'000);
  // Both second hops share link 2 (FIFO by ready time): op 1's is ready at
  // 60 ns, op 0's at 200 ns; op 1's ends no earlier than its last byte's arrival
  // plus one chunk.
  CHECK(r.t(second[1]).start.ps() == 60'000);
  CHECK(r.t(second[1]).end.ps() == 1'060'000);
  CHECK(r.t(second[1]).arrival.ps() == 1'070'000);
  CHECK(r.t(second[0]).start.ps() == 1'060'000);
  CHECK(r.t(second[0]).arrival.ps() == 2'160'000);
}

TEST_CASE("Executor: a variant's own bandwidth, where it has one, serves its class's bytes and chunks", "[sim]") {
  // The same chains for op 0 (class 0) and op 1 (class 1); class 1 sees link 1
  // at 0.5 B/ns.
  ProgramBuilder b;
  std::vector<TaskId> first, second;
  two_chains(b, first, second);
  std::vector<Resource> res = resources(100);
  for (Resource& r : res) r.variants[0] = {Tick::from_ps(100'000), 100};
  res[1].variants[0].bandwidth_bytes_per_s = 500'000'000;
  Run r(std::move(b), res, {0, 1});
  CHECK(r.t(first[0]).end.ps() == 1'000'000);
  // Twice as long at half the rate, and so is its first chunk (200 ns).
  CHECK(r.t(first[1]).end.ps() == 2'000'000);
  CHECK(r.t(first[1]).arrival.ps() == 2'100'000);
  // Link 2 at its own rate for both: op 0's hop ready at 200 ns, op 1's at 300 ns
  // (after op 0's, 1.2 us), ending no earlier than its last byte plus a chunk.
  CHECK(r.t(second[0]).start.ps() == 200'000);
  CHECK(r.t(second[1]).start.ps() == 1'200'000);
  CHECK(r.t(second[1]).end.ps() == 2'200'000);
}

TEST_CASE("Executor: compute tasks occupy their unit for their duration", "[sim]") {
  ProgramBuilder b;
  const OpId op = b.add_op();
  const TaskId c1 = b.compute(3, Tick::from_ps(5000), op);
  const TaskId c2 = b.compute(3, Tick::from_ps(7000), op);
  Run r(std::move(b), resources());
  CHECK(r.t(c1).end.ps() == 5000);
  CHECK(r.t(c2).start.ps() == 5000);
  CHECK(r.exec->makespan().ps() == 12000);
}

TEST_CASE("Executor: a dependency cycle leaves tasks unfinished instead of hanging", "[sim]") {
  ProgramBuilder b;
  const OpId op = b.add_op();
  const TaskId x = b.transfer(0, 10, op);
  const TaskId y = b.transfer(1, 10, op);
  const TaskId z = b.transfer(2, 10, op);
  b.depend(x, y);
  b.depend(y, x);
  (void)z;
  Run r(std::move(b), resources());
  CHECK(r.exec->unfinished_tasks() == std::vector<TaskId>{x, y});
  CHECK(r.exec->tasks_completed() == 1);
}

TEST_CASE("Executor: identical programs give identical timings", "[sim]") {
  auto build = [] {
    ProgramBuilder b;
    const OpId op = b.add_op();
    for (int i = 0; i < 50; ++i) {
      const TaskId t = b.transfer(static_cast<std::uint32_t>(i % 3), 100 + static_cast<std::uint64_t>(i) * 7, op);
      if (i >= 3) b.depend(t - 3, t, i % 2 ? EdgeKind::Stream : EdgeKind::Full);
    }
    return b;
  };
  Run r1(build(), resources(64));
  Run r2(build(), resources(64));
  for (TaskId i = 0; i < 50; ++i) {
    CHECK(r1.t(i).start == r2.t(i).start);
    CHECK(r1.t(i).arrival == r2.t(i).arrival);
  }
}

TEST_CASE("Executor: a queue of many waiting tasks serves them by ready time, then activation", "[sim]") {
  // Send i on link 0 is ready when compute i (on a unit of its own) ends, after
  // ready_ns[i]; a long first transfer holds the link while they all wait. Ready
  // times out of activation order, ties, and more tasks than the queue's inline
  // room: the queue grows, wraps and inserts from the back.
  const std::vector<int> ready_ns{5, 3, 9, 3, 1, 7, 7, 2, 8, 4, 6, 1};
  ProgramBuilder b;
  const OpId op = b.add_op();
  b.transfer(0, 100'000, op);  // 100 us
  std::vector<Resource> res{resources()[0]};
  std::vector<TaskId> sends;
  for (std::size_t i = 0; i < ready_ns.size(); ++i) {
    res.push_back(Resource{0, kZeroTick, 0});
    const TaskId c = b.compute(static_cast<std::uint32_t>(i + 1), Tick::from_ps(ready_ns[i] * 1000), op);
    const TaskId x = b.transfer(0, 1000, op);  // 1 us each
    b.depend(c, x);
    sends.push_back(x);
  }
  Run r(std::move(b), res);
  // The computes start together in task order, so sends activate in index order:
  // served by ready time, equal ready times by index, one per microsecond.
  std::vector<std::size_t> order(ready_ns.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return ready_ns[x] < ready_ns[y]; });
  for (std::size_t k = 0; k < order.size(); ++k)
    CHECK(r.t(sends[order[k]]).start.ps() == 100'000'000 + static_cast<std::int64_t>(k) * 1'000'000);
}

// Ties between tasks ready at the same time on one link: by activation order,
// or with keys by (activation time, key). Two transfers on link 1 are released
// together by one transfer on link 0 (its successors in the order b.depend
// listed them) and become ready together.
TEST_CASE("Executor: ties by activation order, or by activation time then key", "[sim]") {
  // `ids`: every task's id as its key (order_ties_by_ids).
  const auto run = [](std::span<const std::uint32_t> keys, bool ids = false) {
    ProgramBuilder b;
    const OpId op = b.add_op();
    const TaskId first = b.transfer(0, 1000, op);
    const TaskId x = b.transfer(1, 1000, op);
    const TaskId y = b.transfer(1, 1000, op);
    b.depend(first, y);  // y is released first
    b.depend(first, x);
    Program p = std::move(b).finish();
    const std::vector<Resource> res = resources();
    Engine e;
    Executor exec(e, p, res);
    Timings t(p.num_tasks());
    exec.add_observer(t);
    if (!keys.empty()) exec.order_ties_by(keys);
    if (ids) exec.order_ties_by_ids();
    exec.start();
    e.run();
    // Both woke up; the first transfer started as it was activated (without keys).
    CHECK(exec.woken_on(1) == 2);
    CHECK(exec.woken_on(0) == (keys.empty() && !ids ? 0u : 1u));
    return std::pair{t.by_task[x].start.ps(), t.by_task[y].start.ps()};
  };
  // Activation order: y first.
  CHECK(run({}) == std::pair<std::int64_t, std::int64_t>{2'100'000, 1'100'000});
  // Keys: x (key 1) before y (key 2), whatever the release order.
  const std::vector<std::uint32_t> keys = {0, 1, 2};
  CHECK(run(keys) == std::pair<std::int64_t, std::int64_t>{1'100'000, 2'100'000});
  // Ids as keys: the same, with no array; keys against the ids: y first again.
  CHECK(run({}, true) == std::pair<std::int64_t, std::int64_t>{1'100'000, 2'100'000});
  const std::vector<std::uint32_t> reversed = {2, 1, 0};
  CHECK(run(reversed) == std::pair<std::int64_t, std::int64_t>{2'100'000, 1'100'000});
}

TEST_CASE("Executor: tasks ready as activated, together, after the start, are reported", "[sim]") {
  // A zero-duration compute releases two transfers on link 0 at time 0 after
  // the start: both are ready the moment they are activated.
  const auto first_zero_lag = [](bool after_start) {
    ProgramBuilder b;
    const OpId op = b.add_op();
    const TaskId x = b.transfer(0, 1000, op);
    const TaskId y = b.transfer(0, 1000, op);
    if (after_start) {
      const TaskId c = b.compute(3, kZeroTick, op);
      b.depend(c, x);
      b.depend(c, y);
    }
    Program p = std::move(b).finish();
    const std::vector<Resource> res = resources();
    std::vector<std::uint32_t> distinct(p.num_tasks());
    for (std::uint32_t i = 0; i < distinct.size(); ++i) distinct[i] = i;
    Engine e;
    Executor exec(e, p, res);
    exec.order_ties_by(distinct);
    exec.watch_zero_lag();
    exec.start();
    e.run();
    CHECK(exec.tasks_completed() == p.num_tasks());
    return exec.first_zero_lag();
  };
  // The start's tasks all wait for one wake-up that chooses among them.
  CHECK_FALSE(first_zero_lag(false).has_value());
  // Two released together later: the second is reported.
  CHECK(first_zero_lag(true) == std::optional<TaskId>{1});
}

namespace {

// Every task's timing, on either thread of a split run.
struct SplitTimings final : ExecutionObserver {
  std::vector<TaskTiming> by_task;
  std::vector<Tick> joins;
  explicit SplitTimings(std::size_t n) : by_task(n), joins(n, Tick::from_ps(-1)) {}
  void on_task(TaskId id, const Task&, const TaskTiming& t) override { by_task[id] = t; }
  void on_join(TaskId id, const Task&, Tick at) override { joins[id] = at; }
  std::unique_ptr<ExecutionObserver> split() const override { return std::make_unique<SplitTimings>(by_task.size()); }
  void merge(const ExecutionObserver& part) override {
    const auto& o = dynamic_cast<const SplitTimings&>(part);
    for (std::size_t i = 0; i < by_task.size(); ++i) {
      if (o.by_task[i].end > kZeroTick) by_task[i] = o.by_task[i];
      if (o.joins[i] >= kZeroTick) joins[i] = o.joins[i];
    }
  }
};

// A random program on `chips` chips, each with a link of 100 ns latency, a
// network link of 1 us and a compute unit: transfers, computes and joins
// (with delays) of the chip, waiting for the chip's own earlier tasks or for
// network transfers from any chip (the edges a split may cut). Sizes from a
// few values, so that many tasks become ready at the same time.
// With `cycle`, halfway: two network transfers of chips 0 and 3 that wait for
// each other, which later tasks may wait for too (a deadlock).
Program random_program(std::uint32_t seed, std::uint32_t chips, std::size_t n, bool cycle = false) {
  std::mt19937 engine(seed);
  const auto rng = [&] { return static_cast<std::uint32_t>(engine()); };
  ProgramBuilder b;
  const OpId ops[2] = {b.add_op(), b.add_op()};
  std::vector<std::vector<TaskId>> own(chips);
  std::vector<TaskId> network;
  std::vector<bool> is_transfer;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t c = rng() % chips;
    const OpId op = ops[rng() % 2];
    const std::uint32_t kind = rng() % 10;
    TaskId t = 0;
    if (kind < 5)
      t = b.transfer(c, 1000 * (1 + rng() % 3), op);
    else if (kind < 8)
      t = b.transfer(chips + c, 500 * (1 + rng() % 2), op);
    else if (kind < 9)
      t = b.compute(2 * chips + c, Tick::from_ps(std::int64_t{1000} * (1 + rng() % 4)), op);
    else
      t = b.join(op, Tick::from_ps(700), c);
    is_transfer.push_back(kind < 8);
    const std::uint32_t preds = rng() % 3;
    for (std::uint32_t k = 0; k < preds; ++k) {
      const bool remote = !network.empty() && rng() % 3 == 0;
      const std::vector<TaskId>& from = remote ? network : own[c];
      if (from.empty()) continue;
      const TaskId p = from[from.size() - 1 - rng() % std::min<std::size_t>(from.size(), 6)];
      const bool stream = is_transfer[p] && is_transfer[t] && rng() % 2 == 0;
      b.depend(p, t, stream ? EdgeKind::Stream : EdgeKind::Full);
    }
    own[c].push_back(t);
    if (kind >= 5 && kind < 8) network.push_back(t);
    if (cycle && i == n / 2) {
      const TaskId x = b.transfer(chips + 0, 500, ops[0]), y = b.transfer(chips + 3, 500, ops[0]);
      b.depend(x, y);
      b.depend(y, x);
      network.insert(network.end(), {x, y});
      is_transfer.insert(is_transfer.end(), {true, true});
    }
  }
  return std::move(b).finish();
}

}  // namespace

TEST_CASE("Executor: a program split over two threads runs as on one, task by task", "[sim]") {
  // Op 1 of the odd seeds sees the resources' variant (another protocol: its
  // own latencies, forwarding chunk and a slower network).
  const std::vector<Resource> res = [] {
    std::vector<Resource> r;
    Resource link{1'000'000'000, Tick::from_ps(100'000), 250};
    link.variants[0] = {Tick::from_ps(150'000), 100, 0};
    Resource network{2'000'000'000, Tick::from_ps(1'000'000), 0};
    network.variants[0] = {Tick::from_ps(1'500'000), 0, 1'000'000'000};
    for (int i = 0; i < 6; ++i) r.push_back(link);
    for (int i = 0; i < 6; ++i) r.push_back(network);
    for (int i = 0; i < 6; ++i) r.push_back(Resource{0, kZeroTick, 0});
    return r;
  }();
  // (Seed 495 caught a task whose last predecessor, a join, completed at a
  // window's end after another predecessor of the task had started later in
  // the window: the task must be activated as of the later start.)
  std::size_t split_runs = 0;
  for (std::uint32_t seed = 1; seed <= 600; ++seed) {
    CAPTURE(seed);
    const Program p = random_program(seed, 6, 3000);
    const std::vector<std::uint8_t> classes = {0, static_cast<std::uint8_t>(seed % 2)};
    const auto run = [&](unsigned threads, SplitTimings& t) {
      Engine e;
      Executor exec(e, p, res);
      exec.classify_ops(classes);
      exec.add_observer(t);
      exec.order_ties_by_ids();
      exec.run(threads, 0);
      CHECK(exec.unfinished_tasks().empty());
      std::vector<std::uint64_t> woken;
      for (std::uint32_t r = 0; r < res.size(); ++r) woken.push_back(exec.woken_on(r));
      return std::tuple{exec.threads_used(), exec.makespan(), exec.op_timings(), exec.tasks_woken(), woken,
                        exec.tasks_completed(), exec.first_zero_lag().has_value(), exec.windows(), exec.lookahead()};
    };
    SplitTimings one(p.num_tasks()), two(p.num_tasks());
    const auto a = run(1, one);
    const auto b = run(2, two);
    CHECK(std::get<0>(a) == 1);
    CHECK_FALSE(std::get<6>(b));  // no task ready as activated: the schedule is one of times and keys
    if (std::get<0>(b) != 2) continue;
    ++split_runs;
    CHECK(std::get<7>(b) > 10);  // many windows of 1 us
    // The largest lookahead that cuts: the network's 1 us (with the variant's
    // 1.5 us the network's own edges would join every chip).
    CHECK(std::get<8>(b) == Tick::from_ps(1'000'000));
    CHECK(std::get<1>(a) == std::get<1>(b));
    CHECK(std::get<2>(a) == std::get<2>(b));
    CHECK(std::get<3>(a) == std::get<3>(b));
    CHECK(std::get<4>(a) == std::get<4>(b));
    CHECK(std::get<5>(b) == p.num_tasks());
    std::size_t same = 0;
    for (TaskId i = 0; i < p.num_tasks(); ++i) {
      const TaskTiming& x = one.by_task[i];
      const TaskTiming& y = two.by_task[i];
      const bool eq = x.ready == y.ready && x.start == y.start && x.end == y.end && x.arrival == y.arrival &&
              one.joins[i] == two.joins[i];
      same += eq;
    }
    CHECK(same == p.num_tasks());
  }
  CHECK(split_runs >= 450);  // most programs split (both parts 40 to 60 % of the tasks)
}

TEST_CASE("Executor: a split run of a program that deadlocks ends, with the tasks unfinished that one thread leaves",
          "[sim]") {
  std::vector<Resource> res(18, Resource{1'000'000'000, Tick::from_ps(100'000), 0});
  for (int i = 6; i < 12; ++i) res[static_cast<std::size_t>(i)].latency = Tick::from_ps(1'000'000);
  for (int i = 12; i < 18; ++i) res[static_cast<std::size_t>(i)] = Resource{0, kZeroTick, 0};
  std::size_t split_runs = 0;
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    CAPTURE(seed);
    const Program p = random_program(seed, 6, 3000, true);
    const auto run = [&](unsigned threads, SplitTimings& t) {
      Engine e;
      Executor exec(e, p, res);
      exec.add_observer(t);
      exec.order_ties_by_ids();
      exec.run(threads, 0);
      CHECK(exec.finished() == exec.unfinished_tasks().empty());
      return std::tuple{exec.threads_used(), exec.unfinished_tasks(), exec.tasks_completed(), exec.op_timings()};
    };
    SplitTimings one(p.num_tasks()), two(p.num_tasks());
    const auto a = run(1, one);
    const auto b = run(2, two);
    CHECK(std::get<1>(a).size() >= 2);  // the cycle at least
    if (std::get<0>(b) != 2) continue;
    ++split_runs;
    CHECK(std::get<1>(a) == std::get<1>(b));
    CHECK(std::get<2>(a) == std::get<2>(b));
    CHECK(std::get<3>(a) == std::get<3>(b));
    for (TaskId i = 0; i < p.num_tasks(); ++i) {
      CAPTURE(i);
      CHECK(one.by_task[i].start == two.by_task[i].start);
    }
  }
  CHECK(split_runs >= 10);
}

TEST_CASE("Executor: a run stays on one thread without keys, observers that split or a lookahead", "[sim]") {
  const Program p = random_program(7, 6, 500);
  std::vector<Resource> res(18, Resource{1'000'000'000, Tick::from_ps(100'000), 0});
  for (int i = 12; i < 18; ++i) res[static_cast<std::size_t>(i)] = Resource{0, kZeroTick, 0};
  const auto threads = [&](bool keyed, bool splitting, Tick latency) {
    std::vector<Resource> r = res;
    for (int i = 0; i < 12; ++i) r[static_cast<std::size_t>(i)].latency = latency;
    Engine e;
    Executor exec(e, p, r);
    SplitTimings s(p.num_tasks());
    Timings plain(p.num_tasks());
    if (splitting)
      exec.add_observer(s);
    else
      exec.add_observer(plain);
    if (keyed) exec.order_ties_by_ids();
    exec.run(2, 0);
    CHECK(exec.unfinished_tasks().empty());
    return exec.threads_used();
  };
  CHECK(threads(true, true, Tick::from_ps(100'000)) == 2);
  CHECK(threads(false, true, Tick::from_ps(100'000)) == 1);
  CHECK(threads(true, false, Tick::from_ps(100'000)) == 1);
  // No latency: a task's successor may start at once, whatever part it is in.
  CHECK(threads(true, true, kZeroTick) == 1);
}
