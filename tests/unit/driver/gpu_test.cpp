// GPU fabrics: NCCL-style rings on NVLink domains and across nodes, nccl-tests'
// bus bandwidth, contention on an oversubscribed spine, the latency floor.
#include <catch2/catch.hpp>

#include <string>

#include "driver/simulate.hpp"
#include "workloads/workload.hpp"

using namespace meshsim;

namespace {

driver::RunResult run(const std::string& text) { return driver::simulate(workloads::parse_workload(text, "t.json")); }

std::string ops(const std::string& kind, const std::string& axes, std::uint64_t bytes) {
  return R"({"kind": ")" + kind + R"(", "bytes": )" + std::to_string(bytes) + R"(, "axes": )" + axes + "}";
}

}  // namespace

TEST_CASE("GPU: ring collectives on one 8-GPU node reach the NVLink port bandwidth", "[gpu]") {
  const std::uint64_t v = 1ull << 30;
  for (const char* kind : {"all_reduce", "all_gather", "reduce_scatter"}) {
    const driver::RunResult r = run(R"({"hardware": "h100-dgx", "mesh": {"X": 8}, "ops": [)" + ops(kind, R"(["X"])", v) + "]}");
    const driver::OpResult& o = r.ops[0];
    INFO(kind);
    CHECK(o.time().seconds() == Approx(o.closed_s).epsilon(0.01));
    CHECK(o.busbw_bytes_per_s == Approx(450e9).epsilon(0.01));  // busbw = port bandwidth for a ring
  }
  const driver::RunResult a2a = run(R"({"hardware": "h100-dgx", "mesh": {"X": 8}, "ops": [)" +
                                    ops("all_to_all", R"(["X"])", v) + "]}");
  CHECK(a2a.ops[0].time().seconds() == Approx(a2a.ops[0].closed_s).epsilon(0.02));
  // B200: twice the NVLink bandwidth, half the time.
  const driver::RunResult b200 = run(R"({"hardware": "b200-dgx", "mesh": {"X": 8}, "ops": [)" +
                                     ops("all_reduce", R"(["X"])", v) + "]}");
  CHECK(b200.ops[0].busbw_bytes_per_s == Approx(900e9).epsilon(0.01));
}

TEST_CASE("GPU: across nodes the ring is bound by the NICs", "[gpu]") {
  const std::uint64_t v = 1ull << 30;
  const std::string head = R"({"hardware": "h100-dgx", "topology": {"nodes": 4}, "mesh": {"X": 8, "Y": 4}, "ops": [)";
  const driver::RunResult across = run(head + ops("all_reduce", R"(["Y"])", v) + "]}");
  CHECK(across.ops[0].busbw_bytes_per_s == Approx(50e9).epsilon(0.01));
  CHECK(across.ops[0].time().seconds() == Approx(across.ops[0].closed_s).epsilon(0.01));
  const driver::RunResult flat = run(head + ops("all_reduce", R"(["X", "Y"])", v) + "]}");
  CHECK(flat.ops[0].time().seconds() == Approx(flat.ops[0].closed_s).epsilon(0.01));
}

TEST_CASE("GPU: an oversubscribed spine slows cross-rail traffic", "[gpu]") {
  const std::uint64_t v = 1ull << 30;
  const std::string tail = R"(, "topology": {"nodes": 4}, "mesh": {"X": 8, "Y": 4}, "ops": [)" +
                           ops("all_to_all", R"(["X", "Y"])", v) + "]}";
  const driver::RunResult full = run(R"({"hardware": "h100-dgx")" + tail);
  const driver::RunResult thin = run(
      R"({"hardware": {"preset": "h100-dgx", "spine_bandwidth_one_way_bytes_per_s": 25e9})" + tail);
  CHECK(thin.makespan.seconds() > 1.5 * full.makespan.seconds());
}

TEST_CASE("GPU: small messages pay the ring's per-step latency", "[gpu]") {
  // 2(N-1) = 14 ring steps of NVLink up and down (NCCL's 3.4 us per ring step)
  // for a tiny all-reduce on 8 GPUs, and 2(N-1) = 6 steps over the NICs (9.6 us
  // each) across 4 nodes.
  const driver::RunResult node = run(R"({"hardware": "h100-dgx", "mesh": {"X": 8}, "ops": [)" +
                                     ops("all_reduce", R"(["X"])", 64) + "]}");
  CHECK(node.ops[0].time().seconds() == Approx(14 * 3.4e-6).epsilon(0.02));
  CHECK(node.ops[0].bound == "latency");
  const driver::RunResult nodes = run(R"({"hardware": "h100-dgx", "topology": {"nodes": 4}, "mesh": {"X": 8, "Y": 4},
    "ops": [)" + ops("all_reduce", R"(["Y"])", 64) + "]}");
  CHECK(nodes.ops[0].time().seconds() == Approx(6 * 9.6e-6).epsilon(0.02));
}
