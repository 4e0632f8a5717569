// The parse-time lower bound of an op's time (workloads/time_bound.hpp) never
// exceeds the simulated time, on tori, lines and GPU fabrics, for every kind;
// and a workload past the bound is refused by parse_workload.
#include <catch2/catch.hpp>

#include <string>

#include "base/error.hpp"
#include "driver/simulate.hpp"
#include "workloads/time_bound.hpp"
#include "workloads/workload.hpp"

using namespace meshsim;

namespace {

const char* kOps = R"([
    {"name": "ag", "kind": "all_gather", "bytes": 16777216, "axes": ["X"]},
    {"name": "rs", "kind": "reduce_scatter", "bytes": 16777216, "axes": ["X", "Y"]},
    {"name": "ar", "kind": "all_reduce", "bytes": 16777216, "axes": ["Y"]},
    {"name": "a2a", "kind": "all_to_all", "bytes": 16777216, "axes": ["X", "Y"]},
    {"name": "ar2", "kind": "all_reduce", "bytes": 16777216, "axes": ["X", "Y"]}
  ])";

void check_bounds(const std::string& text) {
  const workloads::Workload w = workloads::parse_workload(text, "w.json");
  const driver::RunResult r = driver::simulate(w);
  REQUIRE(r.ops.size() == w.ops.size());
  for (std::size_t i = 0; i < w.ops.size(); ++i) {
    const double bound = workloads::time_lower_bound_s(w, w.ops[i]);
    INFO(w.ops[i].name << ": bound " << bound << " s, simulated " << r.ops[i].time().seconds() << " s");
    CHECK(bound > 0);
    CHECK(bound <= r.ops[i].time().seconds());
  }
}

}  // namespace

TEST_CASE("Time bound: below the simulated time on a torus and on lines", "[time_bound]") {
  check_bounds(std::string(R"({"hardware": "tpu-v5e", "mesh": {"X": 4, "Y": 4}, "ops": )") + kOps + "}");
  check_bounds(std::string(R"({"hardware": "tpu-v5e", "topology": {"shape": [4, 4], "wraparound": true},
                               "mesh": {"X": 4, "Y": 4}, "ops": )") + kOps + "}");
  check_bounds(R"({"hardware": "tpu-v4", "mesh": {"X": 4, "Y": 4, "Z": 4},
                   "ops": [{"kind": "send", "bytes": 1048576, "from": [0, 0, 0], "to": [3, 2, 1]}]})");
}

TEST_CASE("Time bound: below the simulated time on a GPU fabric", "[time_bound]") {
  check_bounds(std::string(R"({"hardware": "h100-dgx", "topology": {"nodes": 2}, "mesh": {"X": 8, "Y": 2},
                               "ops": )") + kOps + "}");
}

TEST_CASE("Time bound: a workload past 2^62 ps is refused when parsed", "[time_bound]") {
  const std::string text = R"({"hardware": "tpu-v5e", "mesh": {"X": 4, "Y": 4},
                               "ops": [{"kind": "all_reduce", "bytes": 4e18, "axes": ["X"]}]})";
  CHECK_THROWS_WITH(workloads::parse_workload(text, "w.json"),
                    Catch::StartsWith("w.json:/ops/0: this op needs at least ") &&
                        Catch::Contains("past the simulator's limit of 4.61e+06 s (2^62 ps); reduce the bytes"));
}
