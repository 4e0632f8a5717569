// Identical independent groups known from the workload (driver/groups.hpp):
// when they apply, and that running group 0 alone gives the very bytes of the
// full simulation (JSON with the busiest links, every op's transfers).
#include <catch2/catch.hpp>

#include <cctype>
#include <string>

#include "driver/groups.hpp"
#include "driver/simulate.hpp"
#include "reports/report.hpp"
#include "workloads/workload.hpp"

using namespace meshsim;

namespace {

workloads::Workload parse(const std::string& text) { return workloads::parse_workload(text, "t.json"); }

// The groups of `w` on its system.
std::optional<driver::TranslatedGroups> groups_in(const workloads::Workload& w) {
  return driver::translated_groups(w, w.make_system());
}

std::optional<driver::TranslatedGroups> groups_of(const std::string& text) { return groups_in(parse(text)); }

// The --json document (with the 8 busiest links) of a run, reduced or not.
std::string json(const std::string& text, bool reduce) {
  const workloads::Workload w = parse(text);
  driver::SimulateOptions o;
  o.reduce = reduce;
  o.busiest_links = 8;
  driver::RunContext run(w);
  return reports::format_json(w, run, driver::simulate(w, run, o));
}

// An all-reduce named ar<bytes><its axes' letters>.
std::string ar(const std::string& axes, std::uint64_t bytes = 1 << 20, const std::string& after = "") {
  std::string name = "ar" + std::to_string(bytes);
  for (char c : axes)
    if (std::isalpha(static_cast<unsigned char>(c))) name += c;
  return R"({"name": ")" + name + R"(", "kind": "all_reduce", "bytes": )" + std::to_string(bytes) + R"(, "axes": )" +
         axes + (after.empty() ? "" : R"(, "after": [")" + after + "\"]") + "}";
}

}  // namespace

TEST_CASE("groups: which workloads split into translated groups", "[groups]") {
  const std::string v4 = R"({"hardware": "tpu-v4", "topology": {"shape": [4, 4, 4]}, "mesh": {"X": 4, "Y": 4, "Z": 4}, "ops": [)";
  // Over X: 16 groups of 4 chips (one per y, z), offsets y*4 + z*16.
  const auto g = groups_of(v4 + ar(R"(["X"])") + "]}");
  REQUIRE(g.has_value());
  CHECK(*g->first == std::vector<topology::ChipId>{0, 1, 2, 3});
  CHECK(g->copies() == 16);
  CHECK(g->offsets.front() == 4);
  CHECK(g->offsets.back() == 60);
  // Over X and Z: 4 groups (one per y).
  const auto xz = groups_of(v4 + ar(R"(["X"])") + "," + ar(R"(["Z"])", 1 << 20, "ar1048576X") + "]}");
  REQUIRE(xz.has_value());
  CHECK(xz->copies() == 4);
  CHECK(xz->first->size() == 16);
  // Not: every axis, a send, a twisted torus, a training step, a GPU collective across nodes.
  CHECK_FALSE(groups_of(v4 + ar(R"(["X", "Y", "Z"])") + "]}"));
  CHECK_FALSE(groups_of(v4 + ar(R"(["X"])") + R"(, {"kind": "send", "bytes": 1024, "from": [0, 0, 0], "to": [1, 0, 0]}]})"));
  CHECK_FALSE(groups_of(R"({"hardware": "tpu-v4", "topology": {"shape": [4, 4, 8], "twisted": true},
                            "mesh": {"X": 4, "Y": 4, "Z": 8}, "ops": [)" + ar(R"(["X"])") + "]}"));
  CHECK_FALSE(groups_of(R"({"hardware": "tpu-v5p", "topology": {"shape": [4, 4, 4]}, "mesh": {"F": 64},
    "training": {"model": "llama3-8b", "global_batch": 64, "microbatch": 1, "recompute": "full",
                  "parallelism": {"fsdp": ["F"]}}})"));
  const std::string gpu = R"({"hardware": "h100-dgx", "topology": {"nodes": 4}, "mesh": {"G": 8, "N": 4}, "ops": [)";
  const auto in_node = groups_of(gpu + ar(R"(["G"])") + "]}");
  REQUIRE(in_node.has_value());
  CHECK(in_node->copies() == 4);
  // Across the nodes: the 8 rails.
  const auto rails = groups_of(gpu + ar(R"(["N"])") + "]}");
  REQUIRE(rails.has_value());
  CHECK(rails->copies() == 8);
  CHECK(*rails->first == std::vector<topology::ChipId>{0, 8, 16, 24});
  // Not when a collective spans both, nor when another is inside the node, nor
  // when the groups differ by a node axis (a grid's spines are assigned by node).
  CHECK_FALSE(groups_of(gpu + ar(R"(["G", "N"])") + "]}"));
  CHECK_FALSE(groups_of(gpu + ar(R"(["N"])") + "," + ar(R"(["G"])") + "]}"));
  CHECK_FALSE(groups_of(R"({"hardware": "h100-dgx", "topology": {"nodes": [2, 2]}, "mesh": {"G": 8, "P": 2, "Q": 2},
                            "ops": [)" + ar(R"(["P"])") + "]}"));
  // Nor with oversubscribed spines: rails would share core cables.
  const std::string tiers = R"({"hardware": {"preset": "h100-dgx", "leaf_nodes": 2, "pod_nodes": 4, "spine_oversubscription": )";
  const std::string tail = R"(}, "topology": {"nodes": 8}, "mesh": {"G": 8, "N": 8}, "ops": [)" + ar(R"(["N"])") + "]}";
  CHECK(groups_of(tiers + "1" + tail));
  CHECK_FALSE(groups_of(tiers + "2" + tail));
}

TEST_CASE("groups: group 0 alone gives the full simulation's bytes", "[groups]") {
  const std::vector<std::string> cases = {
      // Rings on a torus; a matmul on every chip beside them.
      R"({"hardware": "tpu-v4", "topology": {"shape": [4, 4, 4]}, "mesh": {"X": 4, "Y": 16}, "ops": [)" +
          ar(R"(["X"])", 8 << 20) + "," + ar(R"(["X"])", 1 << 10) + "]}",
      // Lines (no wraparound) and concurrent ops that contend.
      R"({"hardware": "tpu-v5e", "topology": {"shape": [8, 4]}, "mesh": {"X": 8, "Y": 4}, "ops": [)" +
          ar(R"(["X"])", 4 << 20) + R"(, {"name": "ag", "kind": "all_gather", "bytes": 2097152, "axes": ["X"]},
             {"name": "a2a", "kind": "all_to_all", "bytes": 2097152, "axes": ["X"], "after": ["ag"]}]})",
      // Multislice: ICI collectives (groups across the slices) and DCN ones (groups inside a slice).
      R"({"hardware": "tpu-v5p", "topology": {"shape": [4, 4, 4], "slices": 2}, "mesh": {"F": 64, "D": 2}, "ops": [)" +
          ar(R"(["F"])", 16 << 20) + "]}",
      R"({"hardware": "tpu-v5p", "topology": {"shape": [4, 4, 4], "slices": 3}, "mesh": {"F": 64, "D": 3}, "ops": [)" +
          ar(R"(["D"])", 16 << 20) + R"(, {"name": "a2a", "kind": "all_to_all", "bytes": 1048576, "axes": ["D"]}]})",
      // GPUs: collectives inside each node.
      R"({"hardware": "h100-dgx", "topology": {"nodes": 4}, "mesh": {"G": 8, "N": 4}, "ops": [)" +
          ar(R"(["G"])", 64 << 20) + R"(, {"name": "ag", "kind": "all_gather", "bytes": 8388608, "axes": ["G"]}]})",
      // GPUs: collectives across the nodes, on each rail: ring and tree, an
      // all-to-all, on an odd number of nodes (a wrap step through the spine).
      R"({"hardware": "h100-dgx", "topology": {"nodes": 5}, "mesh": {"G": 8, "N": 5}, "ops": [)" +
          ar(R"(["N"])", 64 << 20) + "," + ar(R"(["N"])", 1 << 12) +
          R"(, {"name": "a2a", "kind": "all_to_all", "bytes": 8388608, "axes": ["N"], "after": ["ar67108864N"]}]})",
      // ... and on three tiers: leaves of 2 nodes, pods of 4, the core.
      R"({"hardware": {"preset": "h100-dgx", "leaf_nodes": 2, "pod_nodes": 4, "leaf_oversubscription": 2, "spines": 2},
          "topology": {"nodes": 8}, "mesh": {"G": 8, "N": 8}, "ops": [)" +
          ar(R"(["N"])", 32 << 20) + R"(, {"name": "a2a", "kind": "all_to_all", "bytes": 8388608, "axes": ["N"]},
          {"name": "tree", "kind": "all_reduce", "bytes": 8388608, "axes": ["N"], "algorithm": "tree", "after": ["a2a"]}]})",
  };
  for (const std::string& text : cases) {
    INFO(text);
    const workloads::Workload w = parse(text);
    REQUIRE(groups_in(w).has_value());
    const driver::RunResult r = driver::simulate(w);
    CHECK(r.reduced_classes == 1);
    CHECK(r.simulated_transfers < r.transfers);
    CHECK(json(text, true) == json(text, false));
  }
}
