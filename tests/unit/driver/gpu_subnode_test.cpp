// Mesh axes over part of a GPU node, or part of the nodes (docs/WORKLOAD.md,
// `topology` on GPUs): the split hardware axes and their names, Megatron's rank
// order of the groups, collectives over them against their closed forms and
// bounds, and exact reductions of such runs.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "driver/run_context.hpp"
#include "driver/simulate.hpp"
#include "reports/report.hpp"
#include "sim/collectives/gpu.hpp"
#include "unit/driver/run_json.hpp"
#include "workloads/workload.hpp"

using namespace meshsim;

namespace {

const std::uint64_t kGiB = std::uint64_t{1} << 30;

std::string workload(const std::string& nodes, const std::string& mesh, const std::string& ops) {
  return R"({"hardware": {"preset": "h100-dgx", "nvlink_efficiency": 1}, "topology": {"nodes": )" + nodes +
         R"(}, "mesh": )" + mesh + R"(, "ops": [)" + ops + "]}";
}

std::string op(const char* kind, const std::string& axes, std::uint64_t bytes, const std::string& algorithm = "") {
  return std::string(R"({"kind": ")") + kind + R"(", "bytes": )" + std::to_string(bytes) + R"(, "axes": )" + axes +
         (algorithm.empty() ? "" : R"(, "algorithm": ")" + algorithm + "\"") + "}";
}

std::vector<std::vector<topology::ChipId>> rings_of(const workloads::Workload& w, std::size_t i = 0) {
  return collectives::gpu::rings(w.make_torus(), w.ops[i].collective().hw_axes);
}

std::string json(const std::string& text, bool reduce) {
  return test::run_json(text, reduce);
}

}  // namespace

TEST_CASE("GPU sub-node axes: mesh axes split a node's GPUs in Megatron's rank order", "[gpu][subnode]") {
  // TP 2 x DP 4 in one DGX node: T is GPUs {0, 1}, {2, 3}, ...; D {0, 2, 4, 6} and {1, 3, 5, 7}.
  const workloads::Workload w =
      workloads::parse_workload(workload("1", R"({"T": 2, "D": 4})",
                                         op("all_gather", R"(["T"])", 1024) + "," + op("all_gather", R"(["D"])", 1024)),
                                "t.json");
  REQUIRE(w.topology.size() == 3);
  CHECK(w.topology[0].size == 2);
  CHECK(w.topology[1].size == 4);
  CHECK(w.topology[0].in_node);
  CHECK(w.topology[1].in_node);
  CHECK_FALSE(w.topology[2].in_node);
  CHECK(workloads::gpu_axis_name(w, 0) == "gpu0");
  CHECK(workloads::gpu_axis_name(w, 1) == "gpu1");
  CHECK(workloads::gpu_axis_name(w, 2) == "node");
  CHECK(w.written_shape == std::vector<int>{8, 1});
  CHECK(w.mesh[0].hw_axes == std::vector<int>{0});
  CHECK(w.mesh[1].hw_axes == std::vector<int>{1});
  CHECK(rings_of(w, 0) == std::vector<std::vector<topology::ChipId>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(rings_of(w, 1) == std::vector<std::vector<topology::ChipId>>{{0, 2, 4, 6}, {1, 3, 5, 7}});
  CHECK(w.make_fabric().gpus_per_node() == 8);
  driver::RunContext context(w);
  const std::string table = reports::format_table(w, context, driver::simulate(w, context));
  CHECK(table.find("1 node x 8 GPUs") != std::string::npos);
  CHECK(table.find("mesh T=2(gpu0) D=4(gpu1)") != std::string::npos);

  // TP 4 on 2 nodes, D over the other half of each node and both nodes: its
  // ring visits node 0's GPUs forwards and node 1's backwards (one rail per
  // step), on 2 channels, one per GPU of the group in each node.
  const workloads::Workload two =
      workloads::parse_workload(workload("2", R"({"T": 4, "D": 4})", op("all_gather", R"(["D"])", 1024)), "t.json");
  CHECK(two.mesh[1].hw_axes == std::vector<int>{1, 2});
  const auto rs = rings_of(two);
  REQUIRE(rs.size() == 4);
  CHECK(rs.front() == std::vector<topology::ChipId>{0, 4, 12, 8});
  CHECK(collectives::gpu::ring_channels(two.make_torus(), two.ops[0].collective().hw_axes) == 2);
  CHECK(collectives::gpu::rings(two.make_torus(), two.ops[0].collective().hw_axes, 1).front() ==
        std::vector<topology::ChipId>{4, 0, 8, 12});

  // Part of the nodes: 4 nodes as D = node0 (2), P = node1 (2); a send still
  // takes [gpu, node] as the topology has them.
  const workloads::Workload nodes = workloads::parse_workload(
      workload("4", R"({"T": 8, "D": 2, "P": 2})", R"({"kind": "send", "bytes": 1024, "from": [0, 0], "to": [3, 3]})"),
      "t.json");
  CHECK(workloads::gpu_axis_name(nodes, 0) == "gpu");
  CHECK(workloads::gpu_axis_name(nodes, 1) == "node0");
  CHECK(workloads::gpu_axis_name(nodes, 2) == "node1");
  CHECK(nodes.ops[0].send().dst == 3 + 8 * 3);
  CHECK_THROWS_WITH(
      workloads::parse_workload(workload("4", R"({"T": 8, "D": 2, "P": 2})",
                                         R"({"kind": "send", "bytes": 1024, "from": [0, 0, 0], "to": [3, 3]})"),
                                "t.json"),
      Catch::Contains("expected 2 hardware coordinates, got 3"));
}

TEST_CASE("GPU sub-node axes: a collective over part of a node equals its closed form and never beats its bound",
          "[gpu][subnode]") {
  // T = 2 GPUs, D = 4 GPUs at stride 2 in each node, N = the 2 nodes.
  const std::string mesh = R"({"T": 2, "D": 4, "N": 2})";
  struct Case {
    const char* kind;
    const char* axes;
    const char* algorithm;
    double ring_s;  // the ring's bandwidth term: (n - 1)/n V over its narrowest links
  };
  const double v = static_cast<double>(kGiB), nvlink = 450e9, nic = 50e9;
  const std::vector<Case> cases{
      {"all_gather", R"(["T"])", "", 1.0 / 2 * v / nvlink},
      {"all_gather", R"(["D"])", "", 3.0 / 4 * v / nvlink},
      {"reduce_scatter", R"(["T"])", "", 1.0 / 2 * v / nvlink},
      {"all_reduce", R"(["D"])", "ring", 2 * 3.0 / 4 * v / nvlink},
      // 4 GPUs a node on 2 nodes: 4 channels, each node-to-node step on its own NIC.
      {"reduce_scatter", R"(["D", "N"])", "", 7.0 / 8 * v / 4 / nic},
      {"all_reduce", R"(["D", "N"])", "ring", 2 * 7.0 / 8 * v / 4 / nic},
      {"all_reduce", R"(["D", "N"])", "tree", 0},
      {"all_reduce", R"(["D", "N"])", "hierarchical", 0},
      {"all_reduce", R"(["T", "D"])", "nvls", 0},
      {"all_to_all", R"(["D"])", "", 0},
  };
  for (const Case& c : cases) {
    INFO(c.kind << " over " << c.axes << " " << c.algorithm);
    const driver::RunResult r = driver::simulate(
        workloads::parse_workload(workload("2", mesh, op(c.kind, c.axes, kGiB, c.algorithm)), "t.json"));
    const driver::OpResult& o = r.ops[0];
    CHECK(o.time().seconds() >= o.bound_s);
    CHECK(o.time().seconds() == Approx(o.closed_s).epsilon(0.015));
    if (c.ring_s > 0) CHECK(o.bandwidth_s == Approx(c.ring_s).epsilon(1e-6));
  }
  // A group of a node's GPUs at stride 2 runs as fast as the same ring of 4
  // GPUs with a stride of 1 (T and D swapped): NVLink through one switch.
  const auto time = [&](const std::string& m, const char* axes) {
    return driver::simulate(workloads::parse_workload(workload("1", m, op("all_gather", axes, kGiB)), "t.json"))
        .ops[0]
        .time();
  };
  CHECK(time(R"({"T": 2, "D": 4})", R"(["D"])") == time(R"({"D": 4, "T": 2})", R"(["D"])"));
}

TEST_CASE("GPU sub-node axes: the reduced runs give the bytes of the full ones", "[gpu][subnode]") {
  const std::string ops = op("all_gather", R"(["T"])", kGiB) + "," + op("reduce_scatter", R"(["D", "N"])", kGiB) + "," +
                          op("all_reduce", R"(["D", "N"])", kGiB, "tree") + "," + op("all_reduce", R"(["D"])", kGiB);
  for (const char* mesh : {R"({"T": 2, "D": 4, "N": 2})", R"({"T": 4, "D": 2, "N": 2})"}) {
    INFO(mesh);
    const std::string text = workload("2", mesh, ops);
    CHECK(json(text, true) == json(text, false));
  }
  const std::string grid = workload("4", R"({"T": 8, "D": 2, "N": 2})",
                                    op("all_reduce", R"(["D"])", kGiB) + "," + op("all_gather", R"(["N"])", kGiB));
  CHECK(json(grid, true) == json(grid, false));
}
