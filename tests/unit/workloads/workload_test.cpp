// parse_workload on inline JSON: presets and wraparound, topology mapping, V of
// each op, shardings after each op, dependencies, hardware overrides, errors.
#include "workloads/workload.hpp"

#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "base/op_kind.hpp"
#include "base/error.hpp"
#include "base/tick.hpp"

namespace topology = meshsim::topology;
using meshsim::OpKind;
using meshsim::workloads::AxisFactor;
using meshsim::workloads::CollectiveOp;
using meshsim::workloads::load_workload;
using meshsim::workloads::mesh_coordinates;
using meshsim::workloads::Op;
using meshsim::workloads::parse_workload;
using meshsim::workloads::Workload;

namespace {

Workload parse(const std::string& json) {
  return parse_workload(json, "w.json");
}

std::vector<int> sizes(const Workload& w) {
  std::vector<int> out;
  for (const auto& a : w.topology) out.push_back(a.size);
  return out;
}

std::vector<bool> wraps(const Workload& w) {
  std::vector<bool> out;
  for (const auto& a : w.topology) out.push_back(a.wraparound);
  return out;
}

// The topology of a workload whose only op is an all_reduce of 1 KiB over the first mesh axis.
Workload topo(const std::string& hardware, const std::string& mesh, const std::string& topology = "") {
  std::string json = "{\"hardware\": " + hardware + ", \"mesh\": " + mesh;
  if (!topology.empty()) json += ", \"topology\": " + topology;
  json += R"(, "ops": [{"kind": "all_reduce", "bytes": 1024, "axes": ["X"]}]})";
  return parse(json);
}

const Op& op_named(const Workload& w, const std::string& name) {
  for (const Op& op : w.ops)
    if (op.name == name) return op;
  FAIL("no op named " << name);
  return w.ops.front();
}

using Deps = std::vector<std::uint32_t>;
using Axes = std::vector<int>;

}  // namespace

TEST_CASE("Workload: default wraparound on v5e and v6e wraps only axes of 16", "[workloads]") {
  CHECK(wraps(topo(R"("tpu-v5e")", R"({"X": 16, "Y": 16})")) == std::vector<bool>{true, true});
  CHECK(wraps(topo(R"("tpu-v5e")", R"({"X": 16, "Y": 8})")) == std::vector<bool>{true, false});
  CHECK(wraps(topo(R"("tpu-v5e")", R"({"X": 4, "Y": 16})")) == std::vector<bool>{false, true});
  CHECK(wraps(topo(R"("tpu-v5e")", R"({"X": 8, "Y": 8})")) == std::vector<bool>{false, false});
  CHECK(wraps(topo(R"("tpu-v5e")", R"({"X": 32})")) == std::vector<bool>{false});
  CHECK(wraps(topo(R"("tpu-v6e")", R"({"X": 16, "Y": 4})")) == std::vector<bool>{true, false});
  CHECK(wraps(topo(R"("tpu-v6e")", R"({"X": 2, "Y": 2})")) == std::vector<bool>{false, false});
  CHECK(sizes(topo(R"("tpu-v6e")", R"({"X": 16, "Y": 4})")) == std::vector<int>{16, 4});
}

TEST_CASE("Workload: default wraparound on v4 and v5p wraps only whole 4x4x4 cubes", "[workloads]") {
  const std::vector<bool> all{true, true, true}, none{false, false, false};
  CHECK(wraps(topo(R"("tpu-v4")", R"({"X": 4, "Y": 4, "Z": 4})")) == all);
  CHECK(wraps(topo(R"("tpu-v4")", R"({"X": 16, "Y": 16, "Z": 16})")) == all);
  CHECK(wraps(topo(R"("tpu-v4")", R"({"X": 8, "Y": 4, "Z": 12})")) == all);
  CHECK(wraps(topo(R"("tpu-v5p")", R"({"X": 8, "Y": 8, "Z": 8})")) == all);
  // Not multiples of 4, or not 3D: no wraparound at all.
  CHECK(wraps(topo(R"("tpu-v4")", R"({"X": 4, "Y": 4, "Z": 2})")) == none);
  CHECK(wraps(topo(R"("tpu-v4")", R"({"X": 4, "Y": 4, "Z": 6})")) == none);
  CHECK(wraps(topo(R"("tpu-v5p")", R"({"X": 2, "Y": 2, "Z": 2})")) == none);
  CHECK(wraps(topo(R"("tpu-v4")", R"({"X": 16, "Y": 16})")) == std::vector<bool>{false, false});
  CHECK(wraps(topo(R"("tpu-v5p")", R"({"X": 16})")) == std::vector<bool>{false});
}

TEST_CASE("Workload: an axis of size 1 never wraps", "[workloads]") {
  CHECK(wraps(topo(R"("tpu-v4")", R"({"X": 4})", R"({"shape": [4, 1, 1], "wraparound": true})")) ==
        std::vector<bool>{true, false, false});
  CHECK(wraps(topo(R"("tpu-v5e")", R"({"X": 16, "Y": 1})")) == std::vector<bool>{true, false});
}

TEST_CASE("Workload: topology overrides the default shape and wraparound", "[workloads]") {
  // A list, one value per axis.
  const Workload w =
      topo(R"("tpu-v4")", R"({"X": 4, "Y": 4, "Z": 4})", R"({"shape": [4, 4, 4], "wraparound": [true, false, true]})");
  CHECK(sizes(w) == std::vector<int>{4, 4, 4});
  CHECK(wraps(w) == std::vector<bool>{true, false, true});
  // One boolean for every axis.
  CHECK(wraps(topo(R"("tpu-v4")", R"({"X": 64})", R"({"shape": [4, 4, 4], "wraparound": false})")) ==
        std::vector<bool>{false, false, false});
  CHECK(wraps(topo(R"("tpu-v5e")", R"({"X": 8, "Y": 8})", R"({"shape": [8, 8], "wraparound": true})")) ==
        std::vector<bool>{true, true});
  // A shape without "wraparound" keeps the preset's rule for that shape.
  CHECK(wraps(topo(R"("tpu-v4")", R"({"X": 64})", R"({"shape": [4, 4, 4]})")) == std::vector<bool>{true, true, true});
  CHECK(wraps(topo(R"("tpu-v5e")", R"({"X": 256})", R"({"shape": [16, 16]})")) == std::vector<bool>{true, true});
  // The torus built from it agrees.
  CHECK(w.make_torus().num_chips() == 64u);
  CHECK(w.make_torus().shape_string() == "4x4x4");
}

TEST_CASE("Workload: a mesh axis may span consecutive hardware axes", "[workloads]") {
  const Workload w = topo(R"("tpu-v4")", R"({"X": 16, "Y": 4})", R"({"shape": [4, 4, 4]})");
  REQUIRE(w.mesh.size() == 2u);
  CHECK(w.mesh[0].name == "X");
  CHECK(w.mesh[0].size == 16);
  CHECK(w.mesh[0].hw_axes == Axes{0, 1});
  CHECK(w.mesh[1].name == "Y");
  CHECK(w.mesh[1].hw_axes == Axes{2});
  // The op over X runs on both hardware axes of X.
  CHECK(w.ops[0].collective().mesh_axes == Axes{0});
  CHECK(w.ops[0].collective().hw_axes == Axes{0, 1});

  const Workload all = topo(R"("tpu-v4")", R"({"X": 64})", R"({"shape": [4, 4, 4]})");
  CHECK(all.mesh[0].hw_axes == Axes{0, 1, 2});

  const Workload tail = topo(R"("tpu-v4")", R"({"X": 4, "Y": 16})", R"({"shape": [4, 4, 4]})");
  CHECK(tail.mesh[0].hw_axes == Axes{0});
  CHECK(tail.mesh[1].hw_axes == Axes{1, 2});
}

TEST_CASE("Workload: without topology each mesh axis is one hardware axis", "[workloads]") {
  const Workload w = topo(R"("tpu-v5p")", R"({"X": 8, "Y": 4, "Z": 2})");
  CHECK(sizes(w) == std::vector<int>{8, 4, 2});
  CHECK(w.mesh[0].hw_axes == Axes{0});
  CHECK(w.mesh[1].hw_axes == Axes{1});
  CHECK(w.mesh[2].hw_axes == Axes{2});
}

TEST_CASE("Workload: an op's hardware axes skip axes of size 1", "[workloads]") {
  const Workload w = parse(R"({
    "hardware": "tpu-v4", "topology": {"shape": [4, 1, 4]}, "mesh": {"X": 4, "Y": 4},
    "ops": [{"kind": "all_reduce", "bytes": 1024, "axes": ["Y"]},
            {"kind": "all_reduce", "bytes": 1024, "axes": ["X", "Y"]}]})");
  CHECK(w.mesh[1].hw_axes == Axes{1, 2});
  CHECK(w.ops[0].collective().hw_axes == Axes{2});
  CHECK(w.ops[1].collective().hw_axes == Axes{0, 2});

  // A mesh axis of size 1 maps to no hardware axis; an op over it moves nothing.
  const Workload one = parse(R"({"hardware": "tpu-v5e", "mesh": {"X": 4, "Y": 1},
    "ops": [{"kind": "all_gather", "bytes": 1024, "axes": ["Y"]}]})");
  CHECK(one.mesh[1].hw_axes.empty());
  CHECK(one.ops[0].collective().hw_axes.empty());
}

TEST_CASE("Workload: arrays, dtypes and global sizes", "[workloads]") {
  const Workload w = parse(R"({
    "hardware": "tpu-v5e", "mesh": {"X": 4, "Y": 8},
    "arrays": {
      "A": {"shape": {"I": 64, "J": 128}, "dtype": "bf16", "sharding": "A[I_X, J_Y]"},
      "B": {"shape": {"K": 10}, "dtype": "fp32"},
      "C": {"shape": {"K": 10, "L": 3}, "dtype": "int8", "sharding": "[K, L]"}
    },
    "ops": [{"kind": "all_gather", "array": "A", "axes": ["X"]}]})");
  REQUIRE(w.arrays.size() == 3u);
  CHECK(w.arrays[0].name == "A");
  CHECK(w.arrays[0].dims == std::vector<std::string>{"I", "J"});
  CHECK(w.arrays[0].sizes == std::vector<std::uint64_t>{64, 128});
  CHECK(w.arrays[0].element_bytes == 2u);
  CHECK(w.arrays[1].element_bytes == 4u);
  CHECK(w.arrays[1].bytes() == 40u);
  CHECK(w.arrays[1].shard_axes == std::vector<std::vector<int>>{{}});
  CHECK(w.arrays[2].element_bytes == 1u);
  CHECK(w.arrays[2].bytes() == 30u);
}

TEST_CASE("Workload: V of an array op is the global size over the shards outside the op", "[workloads]") {
  const Workload w = parse(R"({
    "hardware": "tpu-v5e", "mesh": {"X": 4, "Y": 8},
    "arrays": {
      "A": {"shape": {"I": 64, "J": 128}, "dtype": "bf16", "sharding": "A[I_X, J_Y]"},
      "B": {"shape": {"I": 64, "J": 128}, "dtype": "bf16", "sharding": "B[I_XY, J]"},
      "P": {"shape": {"I": 64, "J": 128}, "dtype": "fp32", "sharding": "P[I, J_Y]"}
    },
    "ops": [
      {"name": "ag_x", "kind": "all_gather", "array": "A", "axes": ["X"], "out": "A1"},
      {"name": "ag_xy", "kind": "all_gather", "array": "A", "axes": ["X", "Y"], "out": "A2"},
      {"name": "ag_b", "kind": "all_gather", "array": "B", "axes": ["Y"]},
      {"name": "ar", "kind": "all_reduce", "array": "P", "axes": ["X"]},
      {"name": "rs", "kind": "reduce_scatter", "array": "P", "axes": ["X"], "dim": "I", "out": "P1"},
      {"name": "a2a", "kind": "all_to_all", "array": "A", "axes": ["X"], "dim": "J", "out": "A3"}
    ]})");
  const std::uint64_t global = 64 * 128 * 2;       // bf16 arrays A and B
  CHECK(op_named(w, "ag_x").comm_bytes() == global / 8);  // Y (8) shards J outside the op
  CHECK(op_named(w, "ag_xy").comm_bytes() == global);     // every shard is gathered
  CHECK(op_named(w, "ag_b").comm_bytes() == global / 4);  // X (4) stays on I
  CHECK(op_named(w, "ar").comm_bytes() == 64u * 128 * 4 / 8);
  CHECK(op_named(w, "rs").comm_bytes() == 64u * 128 * 4 / 8);
  CHECK(op_named(w, "a2a").comm_bytes() == global / 8);
}

TEST_CASE("Workload: bytes-only ops carry their bytes as V", "[workloads]") {
  const Workload w = parse(R"({"hardware": "tpu-v5e", "mesh": {"X": 4, "Y": 4},
    "ops": [{"kind": "all_gather", "bytes": 1e9, "axes": ["X"]},
            {"kind": "reduce_scatter", "bytes": 4096, "axes": ["X", "Y"]},
            {"kind": "all_to_all", "bytes": 1, "axes": ["Y"]},
            {"kind": "send", "bytes": 300, "from": [1, 2], "to": [3, 0]}]})");
  REQUIRE(w.ops.size() == 4u);
  CHECK(w.ops[0].kind == OpKind::AllGather);
  CHECK(w.ops[0].comm_bytes() == 1'000'000'000u);
  CHECK(w.ops[0].inputs.empty());
  CHECK(w.ops[0].sharding_before.empty());
  CHECK(w.ops[0].sharding_after.empty());
  CHECK(w.ops[1].kind == OpKind::ReduceScatter);
  CHECK(w.ops[1].collective().mesh_axes == Axes{0, 1});
  CHECK(w.ops[1].comm_bytes() == 4096u);
  CHECK(w.ops[2].kind == OpKind::AllToAll);
  CHECK(w.ops[2].comm_bytes() == 1u);
  CHECK(w.ops[3].kind == OpKind::Send);
  CHECK(w.ops[3].comm_bytes() == 300u);
  // Chip ids are linear, axis 0 fastest.
  CHECK(w.ops[3].send().src == 1u + 2u * 4u);
  CHECK(w.ops[3].send().dst == 3u);
  CHECK(w.ops[3].comm_axes().empty());
}

TEST_CASE("Workload: ops get default names and their JSON pointers", "[workloads]") {
  const Workload w = parse(R"({"hardware": "tpu-v5e", "mesh": {"X": 4},
    "ops": [{"kind": "all_reduce", "bytes": 8, "axes": ["X"]},
            {"name": "second", "kind": "all_gather", "bytes": 8, "axes": ["X"]},
            {"kind": "all_gather", "bytes": 8, "axes": ["X"]}]})");
  CHECK(w.ops[0].name == "all_reduce#0");
  CHECK(w.ops[1].name == "second");
  CHECK(w.ops[2].name == "all_gather#2");
  CHECK(w.ops[0].pointer == "/ops/0");
  CHECK(w.ops[2].pointer == "/ops/2");
  CHECK(w.file == "w.json");
}

TEST_CASE("Workload: sharding before and after each kind of op", "[workloads]") {
  const Workload w = parse(R"({
    "hardware": "tpu-v5e", "mesh": {"X": 4, "Y": 8},
    "arrays": {
      "A": {"shape": {"I": 64, "J": 128}, "dtype": "bf16", "sharding": "A[I_X, J_Y]"},
      "P": {"shape": {"I": 64, "J": 128}, "dtype": "fp32", "sharding": "P[I, J_Y]"},
      "Q": {"shape": {"I": 64, "J": 128}, "dtype": "fp32", "sharding": "Q[I_Y, J]"},
      "T": {"shape": {"I": 64, "J": 128}, "dtype": "bf16", "sharding": "T[I_X, J]"}
    },
    "ops": [
      {"name": "ag", "kind": "all_gather", "array": "A", "axes": ["X"]},
      {"name": "ar", "kind": "all_reduce", "array": "P", "axes": ["X"]},
      {"name": "rs", "kind": "reduce_scatter", "array": "P", "axes": ["X"], "dim": "I"},
      {"name": "rs_minor", "kind": "reduce_scatter", "array": "Q", "axes": ["X"], "dim": "I"},
      {"name": "a2a", "kind": "all_to_all", "array": "T", "axes": ["X"], "dim": "J"},
      {"name": "ag_out", "kind": "all_gather", "array": "A", "axes": ["Y"], "out": "G"},
      {"name": "send", "kind": "send", "bytes": 8, "from": [0, 0], "to": [1, 0]}
    ]})");
  auto check = [&](const char* name, const char* before, const char* after) {
    INFO("op " << name);
    CHECK(op_named(w, name).sharding_before == before);
    CHECK(op_named(w, name).sharding_after == after);
  };
  check("ag", "A[I_X, J_Y]", "A[I, J_Y]");
  check("ar", "P[I, J_Y]", "P[I, J_Y]");
  check("rs", "P[I, J_Y]", "P[I_X, J_Y]");
  check("rs_minor", "Q[I_Y, J]", "Q[I_YX, J]");  // the new axis is the minor one
  check("a2a", "T[I_X, J]", "T[I, J_X]");
  check("ag_out", "A[I, J_Y]", "G[I, J]");  // after "ag", into a new array
  check("send", "", "");

  // The result named by "out" is a new array; the input keeps its layout.
  REQUIRE(w.arrays.size() == 5u);
  CHECK(w.arrays[4].name == "G");
  CHECK(w.arrays[4].shard_axes == std::vector<std::vector<int>>{{}, {}});
  CHECK(w.arrays[0].name == "A");
  CHECK(w.arrays[0].shard_axes == std::vector<std::vector<int>>{{}, {1}});
  CHECK(w.arrays[1].shard_axes == std::vector<std::vector<int>>{{0}, {1}});    // P after rs
  CHECK(w.arrays[2].shard_axes == std::vector<std::vector<int>>{{1, 0}, {}});  // Q after rs_minor
}

TEST_CASE("Workload: an op on an array depends on the op that last wrote it", "[workloads]") {
  const Workload w = parse(R"({
    "hardware": "tpu-v5e", "mesh": {"X": 4, "Y": 4},
    "arrays": {
      "A": {"shape": {"I": 64, "J": 64}, "dtype": "bf16", "sharding": "A[I_X, J_Y]"},
      "B": {"shape": {"I": 64}, "dtype": "bf16"}
    },
    "ops": [
      {"name": "first", "kind": "all_gather", "array": "A", "axes": ["X"]},
      {"name": "on_b", "kind": "all_reduce", "array": "B", "axes": ["X"]},
      {"name": "copy", "kind": "all_gather", "array": "A", "axes": ["Y"], "out": "C"},
      {"name": "again", "kind": "all_reduce", "array": "A", "axes": ["X"]},
      {"name": "on_c", "kind": "all_reduce", "array": "C", "axes": ["X", "Y"]},
      {"name": "free", "kind": "all_reduce", "bytes": 1024, "axes": ["X"]},
      {"name": "waits", "kind": "all_reduce", "bytes": 1024, "axes": ["Y"], "after": ["free", "on_b"]},
      {"name": "both", "kind": "all_gather", "array": "A", "axes": ["Y"], "after": ["again", "free"]},
      {"name": "s", "kind": "send", "bytes": 8, "from": [0, 0], "to": [0, 1], "after": ["both"]}
    ]})");
  CHECK(op_named(w, "first").deps.empty());  // A was declared, not written
  CHECK(op_named(w, "on_b").deps.empty());
  CHECK(op_named(w, "copy").deps == Deps{0});   // reads A written by "first"
  CHECK(op_named(w, "again").deps == Deps{0});  // "copy" wrote C, not A
  CHECK(op_named(w, "on_c").deps == Deps{2});
  CHECK(op_named(w, "free").deps.empty());  // bytes-only: no data dependencies
  CHECK(op_named(w, "waits").deps == Deps{5, 1});
  // "after" and the data dependency on "again" (the last writer of A) are merged.
  CHECK(op_named(w, "both").deps == Deps{3, 5});
  CHECK(op_named(w, "s").deps == Deps{7});
}

TEST_CASE("Workload: preset values and hardware overrides", "[workloads]") {
  const Workload preset = topo(R"("tpu-v5e")", R"({"X": 4})");
  CHECK(preset.hardware.preset == "tpu-v5e");
  CHECK(preset.hardware.ici.bandwidth_bytes_per_s == 45'000'000'000u);
  CHECK(preset.hardware.ici.latency == meshsim::Tick::from_ps(1'000'000));
  CHECK(preset.hardware.forward_chunk_bytes == 4096u);
  CHECK(preset.hardware.chip.hbm_bytes == 16'000'000'000u);

  const Workload same = topo(R"({"preset": "tpu-v5e"})", R"({"X": 4})");
  CHECK(same.hardware.ici.bandwidth_bytes_per_s == 45'000'000'000u);
  CHECK(same.hardware.chip.bf16_flops_per_s == preset.hardware.chip.bf16_flops_per_s);

  const Workload w = topo(R"({"preset": "tpu-v6e", "ici_bandwidth_one_way_bytes_per_s": 1e11,
                              "hop_latency_s": 2.5e-6, "forward_chunk_bytes": 8192,
                              "bf16_flops_per_s": 1e15, "int8_ops_per_s": 2e15, "hbm_bytes": 1e9,
                              "hbm_bandwidth_bytes_per_s": 3e12})",
                          R"({"X": 4})");
  CHECK(w.hardware.preset == "tpu-v6e");
  CHECK(w.hardware.ici.bandwidth_bytes_per_s == 100'000'000'000u);
  CHECK(w.hardware.ici.latency == meshsim::Tick::from_ps(2'500'000));
  CHECK(w.hardware.forward_chunk_bytes == 8192u);
  CHECK(w.hardware.chip.bf16_flops_per_s == 1e15);
  CHECK(w.hardware.chip.int8_ops_per_s == 2e15);
  CHECK(w.hardware.chip.hbm_bytes == 1'000'000'000u);
  CHECK(w.hardware.chip.hbm_bandwidth_bytes_per_s == 3e12);
  CHECK(w.make_torus().link_spec().bandwidth_bytes_per_s == 100'000'000'000u);

  const Workload zero = topo(R"({"preset": "tpu-v4", "hop_latency_s": 0})", R"({"X": 4})");
  CHECK(zero.hardware.ici.latency == meshsim::kZeroTick);
  CHECK(zero.hardware.ici.bandwidth_bytes_per_s == 45'000'000'000u);
}

TEST_CASE("Workload: errors name the file and the JSON pointer", "[workloads]") {
  const std::string head = R"({"hardware": "tpu-v5e", "mesh": {"X": 4, "Y": 4}, )";
  REQUIRE_THROWS_WITH(parse(head + R"("ops": [{"kind": "all_reduce", "bytes": 8, "axes": ["X", "Z"]}]})"),
                      "w.json:/ops/0/axes/1: unknown mesh axis 'Z' (mesh axes: X, Y)");
  REQUIRE_THROWS_WITH(parse(head + R"("ops": []})"), "w.json:/ops: expected at least one op");
  REQUIRE_THROWS_WITH(parse(R"({"hardware": "tpu-v5e", "mesh": {"X": 4}})"), "w.json:: missing required field 'ops'");
  REQUIRE_THROWS_WITH(parse(head + R"("ops": [{"kind": "all_reduce", "bytes": 1.5, "axes": ["X"]}]})"),
                      "w.json:/ops/0/bytes: expected an integer, got 1.5");
  REQUIRE_THROWS_WITH(parse(head + R"("ops": [{"kind": "all_reduce", "bytes": 8, "axes": ["X"],}]})"),
                      "w.json:/ops/0: syntax error at line 1, column 108: unexpected '}'; expected string literal");
  REQUIRE_THROWS_WITH(parse(head + R"("arrays": {"A": {"shape": {"I": 64, "J": 64}, "dtype": "bf16",
      "sharding": "A[I_X, J_X]"}}, "ops": [{"kind": "all_gather", "array": "A", "axes": ["X"]}]})"),
                      "w.json:/arrays/A/sharding: mesh axis X shards both I and J of A; an axis can shard only one "
                      "dimension");
  REQUIRE_THROWS_WITH(parse(head + R"("ops": [{"name": "a", "kind": "all_reduce", "bytes": 8, "axes": ["X"],
      "after": ["b"]}, {"name": "b", "kind": "all_reduce", "bytes": 8, "axes": ["X"]}]})"),
                      "w.json:/ops/0/after/0: 'b' is not the name of an earlier op");
  REQUIRE_THROWS_WITH(parse("{\"hardware\": \"tpu\\nv9\", \"mesh\": {\"X\": 4}, \"ops\": []}"),
                      "w.json:/hardware: unknown preset 'tpu\\nv9' (known: tpu-v4, tpu-v5e, tpu-v5p, tpu-v6e, a100-dgx, h100-dgx, h200-dgx, b200-dgx, gb200-nvl72)");
  REQUIRE_THROWS_WITH(parse(" \n"), "w.json:: the file is empty; expected a JSON object");
  REQUIRE_THROWS_WITH(parse(R"({"hardware": "tpu-v4", "topology": {"shape": [4, 4, 4]}, "mesh": {"X": 16},
      "ops": [{"kind": "all_reduce", "bytes": 8, "axes": ["X"]}]})"),
                      "w.json:/mesh: the mesh has 16 chips but the topology 4x4x4 has 64; no mesh axis is left for "
                      "hardware axis z of size 4");
  REQUIRE_THROWS_WITH(parse(R"({"hardware": "tpu-v4", "topology": {"shape": [4, 4, 4]}, "mesh": {"X": 64, "Y": 2},
      "ops": [{"kind": "all_reduce", "bytes": 8, "axes": ["X"]}]})"),
                      "w.json:/mesh/Y: the mesh has more chips than the topology 4x4x4 (64 chips); no hardware axes "
                      "are left for mesh axis Y of size 2");
  REQUIRE_THROWS_WITH(parse(R"({"hardware": "tpu-v4", "topology": {"shape": [4, 4, 4]}, "mesh": {"X": 6, "Y": 8},
      "ops": [{"kind": "all_reduce", "bytes": 8, "axes": ["X"]}]})"),
                      "w.json:/mesh/X: mesh axis X of size 6 cuts hardware axis x unevenly: a mesh axis takes a "
                      "divisor of what is left of it (4) or a multiple of that (4x4x4 topology)");
  // Part of a torus axis: on a twisted torus, or of the slices, a mesh axis takes whole axes.
  REQUIRE_THROWS_WITH(parse(R"({"hardware": "tpu-v4", "topology": {"shape": [4, 4, 8], "twisted": true},
      "mesh": {"X": 2, "Y": 64}, "ops": [{"kind": "all_reduce", "bytes": 8, "axes": ["X"]}]})"),
                      "w.json:/mesh/X: mesh axis X of size 2 does not cover whole hardware axes of the 4x4x8 topology "
                      "(on a twisted torus a mesh axis takes whole axes)");
  REQUIRE_THROWS_WITH(parse(R"({"hardware": "tpu-v5e", "topology": {"shape": [4, 4], "slices": 4},
      "mesh": {"X": 16, "S": 2, "R": 2}, "ops": [{"kind": "all_reduce", "bytes": 8, "axes": ["X"]}]})"),
                      "w.json:/mesh/S: mesh axis S of size 2 does not cover whole hardware axes of the 4x4 x 4 slices "
                      "topology "
                      "(a mesh axis takes whole slices)");
}

TEST_CASE("Workload: a TPU mesh axis over part of a torus axis takes its chips at a stride", "[workload]") {
  // JAX's device order with physical axes split (mesh_utils, allow_split_physical_axes):
  // the first mesh axis the inner part of x, the next the outer part and y, z.
  const Workload w = parse(R"({"hardware": "tpu-v5p", "topology": {"shape": [16, 4, 4]}, "mesh": {"T": 4, "F": 64},
      "ops": [{"kind": "all_gather", "bytes": 4096, "axes": ["T"]}, {"kind": "all_gather", "bytes": 4096, "axes": ["F"]},
              {"kind": "all_gather", "bytes": 4096, "axes": ["F", "T"]}]})");
  REQUIRE(w.topology.size() == 3);
  CHECK(w.topology[0].size == 16);  // the torus keeps its axes
  CHECK_FALSE(w.mesh[0].whole);
  CHECK_FALSE(w.mesh[1].whole);
  CHECK(w.mesh[0].factors == std::vector<AxisFactor>{{0, 1, 4}});
  CHECK(w.mesh[1].factors == std::vector<AxisFactor>{{0, 4, 4}, {1, 1, 4}, {2, 1, 4}});
  const topology::Torus t = w.make_torus();
  const auto coords = mesh_coordinates(w, t);
  const topology::ChipId c = t.chip(std::vector<int>{13, 2, 1});  // x = 13 = 3 + 4 * 3
  CHECK(coords[c] == std::vector<int>{1, 3 + 4 * 2 + 16 * 1});
  // Collectives over them run over explicit groups, ring by factor.
  const CollectiveOp& tp = w.ops[0].collective();
  CHECK(tp.hw_axes.empty());
  REQUIRE(tp.groups);
  CHECK(tp.groups->size() == 64);
  CHECK(tp.factors == std::vector<int>{4});
  CHECK(tp.groups->front() == std::vector<topology::ChipId>{0, 1, 2, 3});
  CHECK(tp.mesh_axes == std::vector<int>{0});
  const CollectiveOp& fsdp = w.ops[1].collective();
  REQUIRE(fsdp.groups);
  CHECK(fsdp.groups->size() == 4);
  CHECK(fsdp.factors == std::vector<int>{4, 4, 4});
  CHECK(std::vector<topology::ChipId>(fsdp.groups->front().begin(), fsdp.groups->front().begin() + 5) ==
        std::vector<topology::ChipId>{0, 4, 8, 12, 16});
  const CollectiveOp& both = w.ops[2].collective();
  REQUIRE(both.groups);
  CHECK(both.groups->size() == 1);
  CHECK(both.factors == std::vector<int>{4, 4, 4, 4});
  // 4x4x4 with X = 8 takes x and half of y; Y the other half and z.
  const Workload cube = parse(R"({"hardware": "tpu-v4", "topology": {"shape": [4, 4, 4]}, "mesh": {"X": 8, "Y": 8},
      "ops": [{"kind": "all_reduce", "bytes": 8, "axes": ["X"]}]})");
  CHECK(cube.mesh[0].factors == std::vector<AxisFactor>{{0, 1, 4}, {1, 1, 2}});
  CHECK(cube.mesh[1].factors == std::vector<AxisFactor>{{1, 2, 2}, {2, 1, 4}});
  // A whole-axis mesh is as it was: hardware axes, no groups.
  const Workload plain = parse(R"({"hardware": "tpu-v4", "topology": {"shape": [4, 4, 4]}, "mesh": {"X": 16, "Y": 4},
      "ops": [{"kind": "all_reduce", "bytes": 8, "axes": ["X"]}]})");
  CHECK(plain.mesh[0].whole);
  CHECK(plain.ops[0].collective().hw_axes == std::vector<int>{0, 1});
  CHECK_FALSE(plain.ops[0].collective().groups);
}

TEST_CASE("Workload: errors are InputErrors carrying the pointer", "[workloads]") {
  try {
    parse(R"({"hardware": "tpu-v5e", "mesh": {"X": 4}, "ops": [{"kind": "gather", "bytes": 8, "axes": ["X"]}]})");
    FAIL("no error");
  } catch (const meshsim::InputError& e) {
    CHECK(e.file() == "w.json");
    CHECK(e.json_pointer() == "/ops/0/kind");
    CHECK(e.message() == "unknown op kind 'gather' (known: all_gather, reduce_scatter, all_reduce, all_to_all, send, matmul, mlp)");
  }
}

TEST_CASE("Workload: an unreadable file is an Error, not an InputError", "[workloads]") {
  const std::string path = "/nonexistent-meshsim-dir/w.json";
  REQUIRE_THROWS_WITH(load_workload(path), path + ": cannot open file");
  bool input_error = false;
  try {
    load_workload(path);
  } catch (const meshsim::InputError&) {
    input_error = true;
  } catch (const meshsim::Error&) {
  }
  CHECK_FALSE(input_error);
}

TEST_CASE("Workload: a matmul's 'after' holds back every one of its steps", "[workloads]") {
  // Case 4 needs a gather of A and a gather of B; both must wait for x, or the
  // second would share x's links (a bug once: only the first step waited).
  const Workload w = parse(R"({"hardware": "tpu-v5e", "mesh": {"X": 4, "Y": 4},
    "arrays": {"A": {"shape": {"I": 4096, "J": 4096}, "dtype": "bf16", "sharding": "A[I, J_X]"},
               "B": {"shape": {"J": 4096, "K": 4096}, "dtype": "bf16", "sharding": "B[J_Y, K]"}},
    "ops": [{"name": "x", "kind": "all_reduce", "bytes": 1000000, "axes": ["Y"]},
            {"name": "mm", "kind": "matmul", "a": "A", "b": "B", "out": "C", "after": ["x"]}]})");
  REQUIRE(w.ops.size() == 4);
  int gathers = 0;
  for (std::size_t i = 1; i < w.ops.size(); ++i) {
    const Op& op = w.ops[i];
    if (op.kind == OpKind::AllGather) ++gathers;
    const bool waits_for_x = std::find(op.deps.begin(), op.deps.end(), 0u) != op.deps.end();
    CHECK(waits_for_x);
  }
  CHECK(gathers == 2);
}
