// The calibration terms in the engine (docs/CALIBRATION.md): a level's links at a
// fraction of their peak bandwidth, and a fixed cost per collective paid on every
// chip before its first transfer. Checked against the uncalibrated run exactly,
// through the dependencies of a second op, with and without exact reductions,
// and on SimGrid.
#include <catch2/catch.hpp>

#include <string>

#include "base/tick.hpp"
#include "driver/simulate.hpp"
#include "workloads/workload.hpp"

using namespace meshsim;

namespace {

std::string workload(const std::string& hardware, const std::string& ops, const std::string& mesh = R"({"X": 16})") {
  return R"({"hardware": )" + hardware + R"(, "mesh": )" + mesh + R"(, "ops": [)" + ops + "]}";
}

driver::RunResult run(const std::string& text, driver::SimulateOptions options = {}) {
  return driver::simulate(workloads::parse_workload(text, "t.json"), options);
}

const std::string kGather = R"({"name": "g", "kind": "all_gather", "bytes": 16777216, "axes": ["X"]})";
const std::string kReduce = R"({"name": "r", "kind": "all_reduce", "bytes": 1048576, "axes": ["X"], "after": ["g"]})";

}  // namespace

TEST_CASE("fabric terms: a fixed cost adds exactly to every collective of its kind and level", "[fabric_terms]") {
  const driver::RunResult plain = run(workload(R"("tpu-v5e")", kGather + ", " + kReduce));
  const driver::RunResult fixed = run(workload(
      R"({"preset": "tpu-v5e", "collective_fixed_cost_s": {"ici": {"all_gather": 5e-6, "all_reduce": 8e-6}}})",
      kGather + ", " + kReduce));
  REQUIRE(fixed.ops.size() == 2);
  CHECK(fixed.ops[0].time() == plain.ops[0].time() + Tick::from_ps(5'000'000));
  CHECK(fixed.ops[1].time() == plain.ops[1].time() + Tick::from_ps(8'000'000));
  // The second op starts when the first has ended on every chip: its start moves by the first's cost.
  CHECK(fixed.ops[1].begin == plain.ops[1].begin + Tick::from_ps(5'000'000));
  CHECK(fixed.makespan == plain.makespan + Tick::from_ps(13'000'000));
  // The closed form's latency term and the lower bound add it too.
  CHECK(fixed.ops[0].latency_s == Approx(plain.ops[0].latency_s + 5e-6));
  CHECK(fixed.ops[0].closed_s == Approx(plain.ops[0].closed_s + 5e-6));
  CHECK(fixed.ops[0].bound_s == Approx(plain.ops[0].bound_s + 5e-6));
  CHECK(fixed.ops[0].bound_s <= fixed.ops[0].time().seconds());
  // A number applies to every kind; another level's cost does not apply here.
  const driver::RunResult all = run(workload(
      R"({"preset": "tpu-v5e", "collective_fixed_cost_s": {"ici": 2e-6, "dcn": 1e-3}})", kGather + ", " + kReduce));
  CHECK(all.ops[0].time() == plain.ops[0].time() + Tick::from_ps(2'000'000));
  CHECK(all.ops[1].time() == plain.ops[1].time() + Tick::from_ps(2'000'000));
}

TEST_CASE("fabric terms: link efficiency scales the links' bandwidth; exact reductions and critical paths see both",
          "[fabric_terms]") {
  const std::string hw = R"({"preset": "tpu-v5e", "ici_efficiency": 0.9, "collective_fixed_cost_s": {"ici": 3e-6}})";
  const std::string text = workload(hw, kGather, R"({"X": 16, "Y": 4})");
  const workloads::Workload w = workloads::parse_workload(text, "t.json");
  CHECK(w.hardware.peak.ici == 45'000'000'000);
  CHECK(w.hardware.ici.bandwidth_bytes_per_s == 40'500'000'000);
  // Same bytes as a workload that gives the achieved bandwidth directly.
  const driver::RunResult direct = run(workload(
      R"({"preset": "tpu-v5e", "ici_bandwidth_one_way_bytes_per_s": 4.05e10, "collective_fixed_cost_s": {"ici": 3e-6}})",
      kGather, R"({"X": 16, "Y": 4})"));
  driver::SimulateOptions full;
  full.reduce = false;
  full.critical_path = true;
  const driver::RunResult reduced = run(text), unreduced = run(text, full);
  CHECK(reduced.reduced_classes > 0);
  CHECK(reduced.ops[0].time() == unreduced.ops[0].time());
  CHECK(reduced.ops[0].time() == direct.ops[0].time());
  REQUIRE(unreduced.critical_paths.size() == 1);
  CHECK(unreduced.critical_paths[0].fixed == Tick::from_ps(3'000'000));
}

TEST_CASE("fabric terms: on a GPU fabric the level is the op's outermost; SimGrid pays the same fixed cost",
          "[fabric_terms]") {
  const std::string mesh = R"({"X": 8, "Y": 2})";
  const std::string ops = R"({"name": "in", "kind": "all_reduce", "bytes": 1048576, "axes": ["X"]},
                             {"name": "across", "kind": "all_reduce", "bytes": 1048576, "axes": ["X", "Y"], "after": ["in"]})";
  const std::string plain_text = workload(R"("h100-dgx")", ops, mesh);
  const std::string fixed_text =
      workload(R"({"preset": "h100-dgx", "collective_fixed_cost_s": {"nvlink": 4e-6, "nic": 20e-6}})", ops, mesh);
  const driver::RunResult plain = run(plain_text), fixed = run(fixed_text);
  CHECK(fixed.ops[0].time() == plain.ops[0].time() + Tick::from_ps(4'000'000));   // inside the node: nvlink
  CHECK(fixed.ops[1].time() == plain.ops[1].time() + Tick::from_ps(20'000'000));  // across nodes: nic
  driver::SimulateOptions sg;
  sg.engine = driver::EngineKind::SimGrid;
  const driver::RunResult plain_sg = run(plain_text, sg), fixed_sg = run(fixed_text, sg);
  for (std::size_t i = 0; i < 2; ++i) {
    const double added = (fixed_sg.ops[i].time() - plain_sg.ops[i].time()).seconds();
    CHECK(added == Approx(i == 0 ? 4e-6 : 20e-6).epsilon(1e-3));
  }
}
