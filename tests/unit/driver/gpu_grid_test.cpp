// GPU clusters whose nodes form a grid ("topology": {"nodes": [N0, N1]}): the
// groups and rings of collectives over some of the node axes, their times against
// the same rings on a plain {"nodes": N} cluster, the hierarchical algorithm on
// part of the grid, and the names of the hardware axes.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "driver/expand.hpp"
#include "driver/simulate.hpp"
#include "reports/report.hpp"
#include "sim/collectives/gpu.hpp"
#include "workloads/workload.hpp"

using namespace meshsim;

namespace {

driver::RunResult run(const std::string& text) { return driver::simulate(workloads::parse_workload(text, "t.json")); }

std::string op(const std::string& axes, std::uint64_t bytes, const std::string& algorithm = "") {
  return R"({"kind": "all_reduce", "bytes": )" + std::to_string(bytes) + R"(, "axes": )" + axes +
         (algorithm.empty() ? "" : R"(, "algorithm": ")" + algorithm + "\"") + "}";
}

// 8 DGX H100 nodes as a 4 x 2 grid: X = gpu, P = node0, Q = node1.
const std::string kGrid =
    R"({"hardware": {"preset": "h100-dgx", "nvlink_efficiency": 1}, "topology": {"nodes": [4, 2]}, "mesh": {"X": 8, "P": 4, "Q": 2}, "ops": [)";
const std::uint64_t kGiB = std::uint64_t{1} << 30;

std::vector<std::vector<topology::ChipId>> rings_of(const workloads::Workload& w) {
  return collectives::gpu::rings(w.make_torus(), w.ops[0].collective().hw_axes);
}

}  // namespace

TEST_CASE("GPU grid: the hardware axes are gpu, node0, node1, and chip ids are gpu + 8 node", "[gpu][grid]") {
  const workloads::Workload w = workloads::parse_workload(kGrid + op(R"(["P"])", 1024) + "]}", "t.json");
  REQUIRE(w.topology.size() == 3);
  CHECK(w.node_grid);
  CHECK(workloads::gpu_axis_name(w, 0) == "gpu");
  CHECK(workloads::gpu_axis_name(w, 1) == "node0");
  CHECK(workloads::gpu_axis_name(w, 2) == "node1");
  CHECK(w.ops[0].collective().hw_axes == std::vector<int>{1});
  // The fabric is one fat tree of the 8 nodes; the torus' linear ids (axis 0
  // fastest) are the fabric's GPU numbers, node = n0 + 4 n1.
  const topology::Torus t = w.make_torus();
  const topology::Fabric f = w.make_fabric();
  CHECK(f.nodes() == 8);
  CHECK(f.num_gpus() == t.num_chips());
  for (topology::ChipId c = 0; c < t.num_chips(); ++c) {
    CHECK(f.local_rank(c) == t.coord(c, 0));
    CHECK(f.node_of(c) == t.coord(c, 1) + 4 * t.coord(c, 2));
  }
  // {"nodes": N} keeps its single node axis, named "node".
  const workloads::Workload plain = workloads::parse_workload(
      R"({"hardware": {"preset": "h100-dgx", "nvlink_efficiency": 1}, "topology": {"nodes": 4}, "mesh": {"X": 8, "Y": 4}, "ops": [)" +
          op(R"(["Y"])", 1024) + "]}",
      "t.json");
  CHECK_FALSE(plain.node_grid);
  CHECK(workloads::gpu_axis_name(plain, 1) == "node");
  // A one-axis grid is still a grid: gpu, node0.
  const workloads::Workload one = workloads::parse_workload(
      R"({"hardware": {"preset": "h100-dgx", "nvlink_efficiency": 1}, "topology": {"nodes": [4]}, "mesh": {"X": 8, "Y": 4}, "ops": [)" +
          op(R"(["Y"])", 1024) + "]}",
      "t.json");
  CHECK(one.node_grid);
  CHECK(workloads::gpu_axis_name(one, 1) == "node0");
}

TEST_CASE("GPU grid: an all-reduce over node0 forms rings of 4 nodes, each as fast as on a 4-node cluster", "[gpu][grid]") {
  const workloads::Workload w = workloads::parse_workload(kGrid + op(R"(["P"])", kGiB, "ring") + "]}", "t.json");
  const topology::Fabric f = w.make_fabric();
  const auto rs = rings_of(w);
  // 8 rails x 2 groups (node1 = 0: nodes 0-3; node1 = 1: nodes 4-7).
  REQUIRE(rs.size() == 16);
  std::vector<int> per_rail(8, 0);
  for (const auto& ring : rs) {
    REQUIRE(ring.size() == 4);
    std::set<int> groups;
    for (std::size_t i = 0; i < ring.size(); ++i) {
      CHECK(f.local_rank(ring[i]) == f.local_rank(ring[0]));  // one rail: every step NIC up, NIC down
      CHECK(f.node_of(ring[i]) % 4 == static_cast<int>(i));   // node0 in order
      groups.insert(f.node_of(ring[i]) / 4);
    }
    CHECK(groups.size() == 1);  // one value of node1
    ++per_rail[static_cast<std::size_t>(f.local_rank(ring[0]))];
  }
  for (int n : per_rail) CHECK(n == 2);
  // Same-rail steps cross only the two GPUs' own NIC links (the leaf switch is
  // non-blocking), so the rings of the two groups share no link: the op takes
  // exactly as long as the same all-reduce on 4 nodes.
  const driver::RunResult grid = run(kGrid + op(R"(["P"])", kGiB, "ring") + "]}");
  const driver::RunResult four = run(
      R"({"hardware": {"preset": "h100-dgx", "nvlink_efficiency": 1}, "topology": {"nodes": 4}, "mesh": {"X": 8, "Y": 4},
    "ops": [)" +
      op(R"(["Y"])", kGiB, "ring") + "]}");
  CHECK(grid.ops[0].time() == four.ops[0].time());
  CHECK(grid.ops[0].closed_s == four.ops[0].closed_s);
  CHECK(grid.ops[0].hw_axes == std::vector<std::string>{"node0"});
  // Over node1 (stride 4 nodes): rings of nodes n and n + 4, as fast as on 2 nodes.
  const driver::RunResult q = run(kGrid + op(R"(["Q"])", kGiB, "ring") + "]}");
  const driver::RunResult two = run(
      R"({"hardware": {"preset": "h100-dgx", "nvlink_efficiency": 1}, "topology": {"nodes": 2}, "mesh": {"X": 8, "Y": 2},
    "ops": [)" +
      op(R"(["Y"])", kGiB, "ring") + "]}");
  CHECK(q.ops[0].time() == two.ops[0].time());
  CHECK(q.ops[0].hw_axes == std::vector<std::string>{"node1"});
  // The algorithm meshsim picks is the same too.
  CHECK(
      run(kGrid + op(R"(["P"])", kGiB) + "]}").ops[0].algorithm ==
      run(R"({"hardware": {"preset": "h100-dgx", "nvlink_efficiency": 1}, "topology": {"nodes": 4}, "mesh": {"X": 8, "Y": 4}, "ops": [)" +
          op(R"(["Y"])", kGiB) + "]}")
          .ops[0]
          .algorithm);
}

TEST_CASE("GPU grid: an all-reduce over node0 and node1 is the all-reduce over all 8 nodes", "[gpu][grid]") {
  const std::string eight =
      R"({"hardware": {"preset": "h100-dgx", "nvlink_efficiency": 1}, "topology": {"nodes": 8}, "mesh": {"X": 8, "Y": 8}, "ops": [)";
  for (const char* algorithm : {"ring", "tree", ""}) {
    INFO(algorithm);
    const std::string g = kGrid + op(R"(["P", "Q"])", kGiB, algorithm) + "]}";
    const std::string n = eight + op(R"(["Y"])", kGiB, algorithm) + "]}";
    // The same GPUs in the same ring order: node0 fastest gives node 0, 1, ..., 7.
    CHECK(rings_of(workloads::parse_workload(g, "t.json")) == rings_of(workloads::parse_workload(n, "t.json")));
    const driver::RunResult a = run(g), b = run(n);
    CHECK(a.ops[0].time() == b.ops[0].time());
    CHECK(a.ops[0].algorithm == b.ops[0].algorithm);
  }
  // A mesh axis spanning both node axes (Y = node0 node1) is the same op.
  const driver::RunResult spanned = run(
      R"({"hardware": {"preset": "h100-dgx", "nvlink_efficiency": 1}, "topology": {"nodes": [4, 2]}, "mesh": {"X": 8, "Y": 8}, "ops": [)" +
      op(R"(["Y"])", kGiB, "ring") + "]}");
  CHECK(spanned.ops[0].time() == run(eight + op(R"(["Y"])", kGiB, "ring") + "]}").ops[0].time());
  CHECK(spanned.ops[0].hw_axes == std::vector<std::string>{"node0", "node1"});
}

TEST_CASE("GPU grid: hierarchical all-reduce over gpu and node0 runs rail rings of 4 nodes", "[gpu][grid]") {
  const driver::RunResult r = run(kGrid + op(R"(["X", "P"])", kGiB, "hierarchical") + "]}");
  CHECK(r.ops[0].algorithm == "hierarchical");
  // Unnamed, the ring on 8 channels is faster (every NIC carries one channel).
  CHECK(run(kGrid + op(R"(["X", "P"])", kGiB) + "]}").ops[0].algorithm == "ring");
  // In the node over NVLink, then V/8 shards over the 4 nodes of the group on
  // each rail: the closed form counts 4 nodes, not the grid's 8.
  const double in_node = 2 * 7.0 / 8.0 * static_cast<double>(kGiB) / 450e9;
  const double across = 2 * 3.0 / 4.0 * static_cast<double>(kGiB) / 8.0 / 50e9;
  CHECK(r.ops[0].time().seconds() == Approx(in_node + across).epsilon(0.02));
  // The groups (node1 = 0 and 1) share no link: exactly the 4-node cluster's op.
  const driver::RunResult four = run(
      R"({"hardware": {"preset": "h100-dgx", "nvlink_efficiency": 1}, "topology": {"nodes": 4}, "mesh": {"X": 8, "Y": 4},
    "ops": [)" +
      op(R"(["X", "Y"])", kGiB, "hierarchical") + "]}");
  CHECK(r.ops[0].time() == four.ops[0].time());
  CHECK(r.ops[0].closed_s == Approx(four.ops[0].closed_s).epsilon(1e-12));
  // No NVLS once a node axis is in the op; NVLS over the GPUs of a node alone.
  CHECK_THROWS_WITH(run(kGrid + op(R"(["X", "Q"])", 1024, "nvls") + "]}"),
                    Catch::Contains("algorithm 'nvls' does not apply"));
  CHECK(run(kGrid + op(R"(["X"])", kGiB, "nvls") + "]}").ops[0].algorithm == "nvls");
}

TEST_CASE("GPU grid: the task-limit estimate bounds every algorithm on part of the grid", "[gpu][grid]") {
  const std::string head =
      R"({"hardware": {"preset": "h100-dgx", "nvlink_efficiency": 1, "forward_chunk_bytes": 65536}, "topology": {"nodes": [3, 2]},
    "mesh": {"X": 8, "P": 3, "Q": 2}, "ops": [)";
  for (const char* axes : {R"(["X", "P"])", R"(["Q"])", R"(["X", "Q"])", R"(["P", "Q"])"})
    for (const char* algorithm : {"ring", "tree", "direct", "hierarchical"}) {
      if (std::string(algorithm) == "hierarchical" && std::string(axes).find('X') == std::string::npos) continue;
      const workloads::Workload w = workloads::parse_workload(head + op(axes, (std::uint64_t{3} << 20) + 5, algorithm) + "]}", "t.json");
      driver::RunContext torus_run(w);
      const topology::Torus& torus = torus_run.torus();
      const topology::Fabric fabric = w.make_fabric();
      const driver::Expanded ex = driver::expand(w, torus_run);
      const std::uint64_t estimate = driver::estimate_transfers(w.ops[0], w, torus, &fabric);
      INFO(axes << " " << algorithm);
      CHECK(ex.op_transfers[0] > 0);
      CHECK(ex.op_transfers[0] <= estimate);
      if (std::string(algorithm) == "tree") CHECK(ex.op_transfers[0] == estimate);  // counted edge by edge
      CHECK(estimate <= 2 * ex.op_transfers[0]);
    }
}

TEST_CASE("GPU grid: the table names the grid and the node axes, a send takes one coordinate per axis", "[gpu][grid]") {
  const workloads::Workload w = workloads::parse_workload(kGrid + op(R"(["P"])", 1024) + "]}", "t.json");
  driver::RunContext context(w);
  const std::string table = reports::format_table(w, context, driver::simulate(w, context));
  CHECK(table.find("8 nodes (4x2) x 8 GPUs") != std::string::npos);
  CHECK(table.find("mesh X=8(gpu) P=4(node0) Q=2(node1)") != std::string::npos);
  // [1, 3, 1] is GPU 1 of node 3 + 4 = 7: the same send as on 8 plain nodes.
  const std::string send = kGrid + R"({"kind": "send", "bytes": 1073741824, "from": [0, 0, 0], "to": [1, 3, 1]}]})";
  CHECK(workloads::parse_workload(send, "t.json").ops[0].send().dst == 1 + 8 * 7);
  const driver::RunResult plain = run(
      R"({"hardware": {"preset": "h100-dgx", "nvlink_efficiency": 1}, "topology": {"nodes": 8}, "mesh": {"X": 8, "Y": 8},
    "ops": [{"kind": "send", "bytes": 1073741824, "from": [0, 0], "to": [1, 7]}]})");
  CHECK(run(send).ops[0].time() == plain.ops[0].time());
}
