// Multislice TPU systems: slices joined by the data-center network (DCN). The
// slice index is a last, switched hardware axis; every chip has one DCN link out
// and one in. Checked here: the links, names and routes, the exact time of a ring
// step between slices and of a send, and the multi-axis collectives against their
// closed forms and lower bounds (docs/MODEL.md, "Multislice").
#include <catch2/catch.hpp>

#include <string>

#include "base/tick.hpp"
#include "driver/bounds.hpp"
#include "driver/simulate.hpp"
#include "topology/graph_check.hpp"
#include "workloads/workload.hpp"

using namespace meshsim;

namespace {

// Two v5p 4x4x4 slices: F spans the ICI axes, D the slices.
std::string workload(const std::string& ops, const std::string& topology = R"({"shape": [4, 4, 4], "slices": 2})",
                     const std::string& mesh = R"({"F": 64, "D": 2})") {
  return R"({"hardware": "tpu-v5p", "topology": )" + topology + R"(, "mesh": )" + mesh + R"(, "ops": [)" + ops + "]}";
}

std::string collective(const std::string& kind, std::uint64_t bytes, const std::string& axes) {
  return R"({"kind": ")" + kind + R"(", "bytes": )" + std::to_string(bytes) + R"(, "axes": )" + axes + "}";
}

driver::OpResult run_one(const std::string& text) {
  const driver::RunResult r = driver::simulate(workloads::parse_workload(text, "t.json"));
  REQUIRE(r.ops.size() == 1);
  return r.ops[0];
}

double seconds(const driver::OpResult& o) { return (o.end - o.begin).seconds(); }

constexpr std::uint64_t kDcn = 6'250'000'000;               // v5p, bytes/s per chip each way
constexpr Tick kDcnLatency = Tick::from_ps(4'800'000);       // per link
constexpr std::uint64_t kChunk = 4096;                       // v5p forwarding chunk

}  // namespace

TEST_CASE("multislice: the slice axis is a last switched axis with one DCN link out and one in per chip",
          "[multislice]") {
  const workloads::Workload w = workloads::parse_workload(workload(collective("all_gather", 1024, R"(["D"])")), "t.json");
  REQUIRE(w.topology.size() == 4);
  CHECK(w.topology[3].switched);
  const topology::Torus t = w.make_torus();
  CHECK(t.num_chips() == 128);
  CHECK(t.dcn_axis() == 3);
  CHECK(t.axis_name(3) == "dcn");
  CHECK(t.shape_string() == "4x4x4 x 2 slices");
  CHECK(t.num_links() == 128 * 6 + 128 * 2);  // the ICI torus of each slice, and every chip's two DCN links
  CHECK(w.ops[0].collective().hw_axes == std::vector<int>{3});

  const topology::ChipId a = t.chip(std::vector<int>{1, 2, 3, 0}), b = t.chip(std::vector<int>{3, 0, 1, 1});
  CHECK(t.link_name(t.dcn_out(a)) == "(1,2,3,0) dcn out");
  CHECK(t.link_name(t.dcn_in(b)) == "(3,0,1,1) dcn in");
  CHECK(t.spec(t.dcn_out(a)).bandwidth_bytes_per_s == kDcn);
  CHECK(t.spec(t.link(a, 0, topology::Direction::Plus)).bandwidth_bytes_per_s == 90'000'000'000);
  // A step along the slices reaches the same position in the other slice.
  CHECK(t.neighbor(a, 3, topology::Direction::Plus) == t.chip(std::vector<int>{1, 2, 3, 1}));
  CHECK(t.neighbor(a, 3, topology::Direction::Minus) == t.chip(std::vector<int>{1, 2, 3, 1}));
  // Between slices a route is host to host: a's link out, b's link in.
  CHECK(t.between_slices(a, b));
  CHECK(t.route(a, b) == std::vector<topology::LinkId>{t.dcn_out(a), t.dcn_in(b)});
  CHECK(t.hop_distance(a, b) == 1);
  CHECK(t.route_latency(a, b) == kDcnLatency + kDcnLatency);
  // Within a slice the routes are the ICI torus's.
  const topology::ChipId c = t.chip(std::vector<int>{3, 0, 1, 0});
  CHECK_FALSE(t.between_slices(a, c));
  CHECK(t.hop_distance(a, c) == 2 + 2 + 2);
  // Every ICI route is a shortest path, every route between slices the two DCN links.
  const topology::GraphCheck g = topology::check_with_bfs(t, 16);
  CHECK(g.connected);
  CHECK(g.pairs_checked == 16 * 128);
  CHECK(g.route_mismatches == 0);
}

TEST_CASE("multislice: one slice is no multislice", "[multislice]") {
  const workloads::Workload w = workloads::parse_workload(
      workload(collective("all_gather", 1024, R"(["F"])"), R"({"shape": [4, 4, 4], "slices": 1})", R"({"F": 64})"),
      "t.json");
  CHECK(w.topology.size() == 3);
  CHECK(w.make_torus().dcn_axis() == -1);
}

TEST_CASE("multislice: an AllGather between two slices is two half shards out of each chip's DCN link", "[multislice]") {
  // Each chip holds V/2 and sends it to its counterpart in the other slice, half
  // each way round the ring of two: both halves leave through the chip's one DCN
  // link out, cut-through into the other chip's link in.
  const std::uint64_t v = std::uint64_t{1} << 28;
  const driver::OpResult o = run_one(workload(collective("all_gather", v, R"(["D"])")));
  const Tick expected = serialization_time(v / 4, kDcn) + serialization_time(v / 4, kDcn) +
                        serialization_time(kChunk, kDcn) + kDcnLatency + kDcnLatency;
  CHECK(o.end - o.begin == expected);
  // The closed form (S-1) V / (P B) with P = 2 chips in the group, and the bound.
  CHECK(o.bandwidth_s == Approx(static_cast<double>(v) / 2 / kDcn));
  CHECK(o.bound_s <= seconds(o) + 1e-12);
  CHECK(seconds(o) / o.closed_s == Approx(1.0).margin(1e-3));
}

TEST_CASE("multislice: a send between slices takes the two DCN links", "[multislice]") {
  const std::uint64_t bytes = std::uint64_t{1} << 22;
  const driver::OpResult o = run_one(
      workload(R"({"kind": "send", "bytes": )" + std::to_string(bytes) + R"(, "from": [0, 0, 0, 0], "to": [3, 3, 3, 1]})"));
  CHECK(o.end - o.begin ==
        serialization_time(bytes, kDcn) + serialization_time(kChunk, kDcn) + kDcnLatency + kDcnLatency);
  CHECK(o.latency_s == Approx((kDcnLatency + kDcnLatency).seconds()));
  CHECK(o.bandwidth_s == Approx(static_cast<double>(bytes) / kDcn));
}

TEST_CASE("multislice: a send after a send starts once the first has arrived, and takes its own time",
          "[multislice]") {
  // `far` leaves chip (0,0,0) of slice 0 for slice 1 over DCN; `near` goes from
  // the same chip to its x-neighbour after it. The sender is done with `far`
  // once its bytes have arrived; `near` starts then (its start and end count
  // its own two chips) and takes the time it takes alone.
  const std::uint64_t bytes = std::uint64_t{1} << 22;
  const std::string near = R"({"name": "near", "kind": "send", "bytes": 4096, "from": [0, 0, 0, 0],
                               "to": [1, 0, 0, 0])";
  const driver::RunResult r = driver::simulate(workloads::parse_workload(
      workload(R"({"name": "far", "kind": "send", "bytes": )" + std::to_string(bytes) +
               R"(, "from": [0, 0, 0, 0], "to": [0, 0, 0, 1]}, )" + near + R"(, "after": ["far"]})"),
      "t.json"));
  CHECK(r.ops[1].begin == r.ops[0].end);
  CHECK(r.ops[1].end - r.ops[1].begin == run_one(workload(near + "}")).end);
}

TEST_CASE("multislice: collectives over the ICI axes and the slices stay between the bound and the closed form",
          "[multislice]") {
  const std::uint64_t v = std::uint64_t{1} << 28;
  for (const char* kind : {"all_gather", "reduce_scatter", "all_reduce"}) {
    INFO(kind);
    const driver::OpResult o = run_one(workload(collective(kind, v, R"(["F", "D"])")));
    // The closed form is the hierarchical sum (ICI part, then the DCN part of
    // V / 64 per chip); the balanced schedule may overlap the two.
    CHECK(seconds(o) >= o.bound_s);
    CHECK(seconds(o) <= o.closed_s * 1.001);
    // The DCN part alone is most of it: (S-1) V / (P B) per pass.
    const double dcn = static_cast<double>(v) / 128 / kDcn * (std::string(kind) == "all_reduce" ? 2 : 1);
    CHECK(seconds(o) > dcn);
  }
  // An AllToAll: every chip's pieces for the other slice leave through its DCN
  // link, (S-1) V / (S P) bytes: within 7 % of that bound.
  const driver::OpResult a2a = run_one(workload(collective("all_to_all", v, R"(["F", "D"])")));
  CHECK(a2a.bound_s == Approx(static_cast<double>(v) / (2 * 128) / kDcn));
  CHECK(seconds(a2a) >= a2a.bound_s);
  CHECK(seconds(a2a) <= 1.07 * a2a.bound_s);
}

TEST_CASE("multislice: slices of a twisted v4 torus", "[multislice]") {
  const std::string text = R"({"hardware": "tpu-v4", "topology": {"shape": [4, 4, 8], "twisted": true, "slices": 2},
    "mesh": {"X": 128, "D": 2}, "ops": [)" +
                           collective("all_gather", std::uint64_t{1} << 26, R"(["X", "D"])") + "]}";
  const workloads::Workload w = workloads::parse_workload(text, "t.json");
  const topology::Torus t = w.make_torus();
  CHECK(t.twisted());
  CHECK(t.dcn_axis() == 3);
  CHECK(t.twist(3, 2) == 0);  // the slices are not twisted
  const topology::GraphCheck g = topology::check_with_bfs(t, 8);
  CHECK(g.route_mismatches == 0);
  const driver::OpResult o = run_one(text);
  CHECK(seconds(o) >= o.bound_s);
  // (the cheat sheet's ICI part does not know the twisted rings: within 10 %)
  CHECK(seconds(o) / o.closed_s == Approx(1.0).margin(0.1));
}

TEST_CASE("multislice: a training step puts data parallelism over the slices", "[multislice]") {
  const std::string text = R"({"hardware": "tpu-v5p", "topology": {"shape": [4, 4, 4], "slices": 2},
    "mesh": {"F": 64, "D": 2}, "training": {"model": "llama3-8b", "global_batch": 256, "microbatch": 1,
    "recompute": "selective", "parallelism": {"fsdp": ["F"], "data": ["D"]}}})";
  const workloads::Workload w = workloads::parse_workload(text, "t.json");
  bool dcn_op = false;
  for (const workloads::Op& op : w.ops)
    if (op.comm_axes() == std::vector<int>{3}) dcn_op = true;
  CHECK(dcn_op);  // the data-parallel gradient reductions run over the DCN
  const driver::RunResult r = driver::simulate(w);
  CHECK(r.makespan > kZeroTick);
}
