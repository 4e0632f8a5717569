// The SimGrid cross-check (docs/CROSSCHECK.md): the same programs on both engines.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include "driver/simulate.hpp"
#include "sim/collectives/schedule.hpp"
#include "workloads/workload.hpp"

using namespace meshsim;

namespace {

struct Both {
  Tick native, simgrid;
  double difference() const {
    return (static_cast<double>(simgrid.ps()) - static_cast<double>(native.ps())) / static_cast<double>(native.ps());
  }
};

// One collective on a wrapped torus of `shape` (v5e and v4 links: 45 GB/s one way,
// 1 us per hop).
Both run_both(const std::string& shape, const std::string& mesh, const std::string& kind, const std::string& axes,
              std::uint64_t bytes) {
  const std::string hardware = std::count(shape.begin(), shape.end(), ',') == 2 ? "tpu-v4" : "tpu-v5e";
  const std::string text = R"({"hardware": ")" + hardware + R"(", "topology": {"shape": [)" + shape +
                           R"(], "wraparound": true}, "mesh": {)" + mesh + R"(}, "ops": [{"name": "op", "kind": ")" +
                           kind + R"(", "bytes": )" + std::to_string(bytes) + R"(, "axes": [)" + axes + "]}]}";
  const workloads::Workload w = workloads::parse_workload(text, "t.json");
  driver::SimulateOptions options;
  const driver::RunResult native = driver::simulate(w, options);
  options.engine = driver::EngineKind::SimGrid;
  const driver::RunResult simgrid = driver::simulate(w, options);
  REQUIRE(simgrid.engine == "simgrid");
  return {native.ops.at(0).time(), simgrid.ops.at(0).time()};
}

constexpr std::uint64_t kV = 1'073'741'824;  // 1 GiB: bandwidth-bound on every topology below
constexpr double kHopLatencyPs = 1e6;

}  // namespace

TEST_CASE("neighbour-transfer collectives agree on both engines within 0.5 %") {
  struct Topology {
    const char* shape;
    const char* mesh;
    const char* axes;
  };
  const Topology topologies[] = {
      {"8", R"("X": 8)", R"("X")"},
      {"16", R"("X": 16)", R"("X")"},
      {"4, 4", R"("X": 4, "Y": 4)", R"("X")"},
      {"4, 4", R"("X": 4, "Y": 4)", R"("X", "Y")"},
      {"16, 16", R"("X": 16, "Y": 16)", R"("X", "Y")"},
      {"4, 4, 4", R"("X": 4, "Y": 4, "Z": 4)", R"("Z")"},
      {"4, 4, 4", R"("X": 4, "Y": 4, "Z": 4)", R"("X", "Y", "Z")"},
  };
  for (const Topology& t : topologies)
    for (const char* kind : {"all_gather", "reduce_scatter", "all_reduce"}) {
      const Both b = run_both(t.shape, t.mesh, kind, t.axes, kV);
      INFO(t.shape << " over " << t.axes << ", " << kind << ": native " << b.native.ps() << " ps, SimGrid "
                   << b.simgrid.ps() << " ps");
      CHECK(std::abs(b.difference()) < 0.005);
      // SimGrid stores and forwards each relay hop: never faster than cut-through.
      CHECK(b.simgrid >= b.native);
    }
}

TEST_CASE("the engines differ by the hop latency of store-and-forward relays") {
  // A ring phase over an axis of X relays each shard X/2 hops. meshsim forwards it
  // cut-through (one hop latency on the critical path); a flow-level model stores
  // and forwards, paying every hop's latency: X/2 - 1 more per phase.
  struct Case {
    const char* shape;
    const char* mesh;
    const char* kind;
    const char* axes;
    double extra_hops;
  };
  const Case cases[] = {
      {"4", R"("X": 4)", "all_gather", R"("X")", 1},
      {"8", R"("X": 8)", "all_gather", R"("X")", 3},
      {"16", R"("X": 16)", "all_gather", R"("X")", 7},
      {"16", R"("X": 16)", "all_reduce", R"("X")", 14},  // a reduce-scatter phase and an all-gather phase
      {"16, 16", R"("X": 16, "Y": 16)", "all_gather", R"("X", "Y")", 14},
  };
  for (const Case& c : cases) {
    const Both b = run_both(c.shape, c.mesh, c.kind, c.axes, kV);
    INFO(c.shape << " " << c.kind);
    CHECK(static_cast<double>(b.simgrid.ps() - b.native.ps()) == Approx(c.extra_hops * kHopLatencyPs).margin(1e4));
  }
}

TEST_CASE("balanced schedules: SimGrid pays at most the store-and-forward latency of every lock-step stage") {
  // The balanced schedule runs more stages than the equal split (5 on 4x4x8), each
  // with a barrier per chip: SimGrid relays each stage's longest phase store and
  // forward, at most (hops - 1) hop latencies more than cut-through per stage.
  struct Case {
    const char* shape;
    const char* mesh;
    std::vector<int> sizes;
  };
  // (docs/CROSSCHECK.md gives 4x4x12 and 4x8x8 too; one shape keeps the
  // sanitizer build's SimGrid runs short.)
  const Case cases[] = {
      {"4, 4, 8", R"("X": 4, "Y": 4, "Z": 8)", {4, 4, 8}},
  };
  for (const Case& c : cases) {
    std::vector<topology::AxisSpec> specs;
    for (int x : c.sizes) specs.push_back({x, true});
    const topology::Torus torus(specs, {45'000'000'000, Tick::from_ps(1'000'000)});
    collectives::PlanCache plans;
    const collectives::detail::OrderPlan& plan =
        plans.plan(torus, std::vector<int>{0, 1, 2}, kV, collectives::Schedule::Balanced);
    REQUIRE_FALSE(plan.equal);
    const double relay_ps = (plan.latency_hops - plan.stages) * kHopLatencyPs;
    for (const char* kind : {"all_gather", "reduce_scatter", "all_reduce"}) {
      const Both b = run_both(c.shape, c.mesh, kind, R"("X", "Y", "Z")", kV);
      INFO(c.shape << " " << kind << ": native " << b.native.ps() << " ps, SimGrid " << b.simgrid.ps() << " ps");
      CHECK(b.simgrid >= b.native);
      CHECK(static_cast<double>(b.simgrid.ps() - b.native.ps()) <=
            (std::string(kind) == "all_reduce" ? 2 : 1) * relay_ps + 1e4);
      CHECK(b.difference() < 0.007);
    }
  }
}

TEST_CASE("a twisted torus: all-to-all and all-reduce agree on both engines") {
  // The twisted 4x4x8: all-to-all pieces split over every shortest route, the
  // all-reduce over the twisted rings (docs/MODEL.md, "Twisted tori").
  const std::string text = R"({"hardware": "tpu-v4", "topology": {"shape": [4, 4, 8], "twisted": true},
    "mesh": {"X": 4, "Y": 4, "Z": 8}, "ops": [
      {"name": "a2a", "kind": "all_to_all", "bytes": 1073741824, "axes": ["X", "Z"]},
      {"name": "ar", "kind": "all_reduce", "bytes": 1073741824, "axes": ["X", "Y", "Z"], "after": ["a2a"]}]})";
  const workloads::Workload w = workloads::parse_workload(text, "t.json");
  driver::SimulateOptions options;
  const driver::RunResult native = driver::simulate(w, options);
  options.engine = driver::EngineKind::SimGrid;
  const driver::RunResult simgrid = driver::simulate(w, options);
  for (std::size_t i = 0; i < 2; ++i) {
    const Both b{native.ops.at(i).time(), simgrid.ops.at(i).time()};
    INFO(native.ops.at(i).name << ": native " << b.native.ps() << " ps, SimGrid " << b.simgrid.ps() << " ps");
    CHECK(std::abs(b.difference()) < 0.005);
  }
}

TEST_CASE("all-to-all on 4x4 and 8x8 tori: equal when bandwidth-bound, apart when latency-bound") {
  // Measured and explained in docs/CROSSCHECK.md: both engines keep the bottleneck
  // links busy, so large all-to-alls agree; small ones differ by how the models
  // spend hop latency (a flow waits its whole route's latency before moving a byte
  // and shares links by route latency; meshsim forwards hop by hop).
  for (const char* shape : {"4, 4", "8, 8"}) {
    const std::string n = shape[0] == '4' ? "4" : "8";
    const std::string mesh = R"("X": )" + n + R"(, "Y": )" + n;
    for (const char* axes : {R"("X")", R"("X", "Y")"}) {
      const Both large = run_both(shape, mesh, "all_to_all", axes, 1'073'741'824);
      INFO(shape << " over " << axes << " 1 GiB: native " << large.native.ps() << ", SimGrid " << large.simgrid.ps());
      CHECK(std::abs(large.difference()) < 0.001);
      const Both small = run_both(shape, mesh, "all_to_all", axes, 1'048'576);
      INFO(shape << " over " << axes << " 1 MiB: native " << small.native.ps() << ", SimGrid " << small.simgrid.ps());
      CHECK(std::abs(small.difference()) < 0.05);
    }
  }
  // The largest latency-bound gap: an 8-ring all-to-all of 1 MiB, SimGrid about 4 % slower.
  const Both ring = run_both("8, 8", R"("X": 8, "Y": 8)", "all_to_all", R"("X")", 1'048'576);
  CHECK(ring.difference() > 0.02);
}

TEST_CASE("contention: FIFO links and max-min sharing split the same work differently") {
  // Two all-gathers on the same links (examples/contention_v5e_8x8.json): meshsim's
  // FIFO links let the first finish earlier; SimGrid shares the links fairly so both
  // finish together. The work is the same: the makespans agree.
  const std::string text = R"({"hardware": "tpu-v5e", "topology": {"shape": [8, 8], "wraparound": true},
    "mesh": {"X": 8, "Y": 8}, "ops": [
      {"name": "a", "kind": "all_gather", "bytes": 134217728, "axes": ["X"]},
      {"name": "b", "kind": "all_gather", "bytes": 134217728, "axes": ["X"]}]})";
  const workloads::Workload w = workloads::parse_workload(text, "t.json");
  driver::SimulateOptions options;
  const driver::RunResult native = driver::simulate(w, options);
  options.engine = driver::EngineKind::SimGrid;
  const driver::RunResult simgrid = driver::simulate(w, options);
  CHECK(native.ops[0].end < native.ops[1].end);
  CHECK(simgrid.ops[0].end == simgrid.ops[1].end);
  const double makespans = static_cast<double>(simgrid.makespan.ps()) / static_cast<double>(native.makespan.ps());
  CHECK(std::abs(makespans - 1) < 0.005);
}
