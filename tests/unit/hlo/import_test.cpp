// HLO import: a module expressible as a meshsim workload simulates to the same
// picosecond as that workload; the fixtures lower to what they hold (loops by
// trip count, async pairs bounding overlap); what cannot be lowered is one
// error line.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <string>

#include "base/error.hpp"
#include "driver/simulate.hpp"
#include "hlo/lower.hpp"

using namespace meshsim;

namespace {

workloads::Workload import_text(const std::string& text, const std::string& hardware, std::vector<int> shape,
                                hlo::ImportReport* report = nullptr) {
  hlo::ImportOptions o;
  o.hardware = hardware;
  o.shape = std::move(shape);
  return hlo::import_module(hlo::parse_module_text(text, "d.hlo"), o, report);
}

std::string error_of(const std::string& text, std::vector<int> shape = {2, 4}) {
  try {
    (void)import_text(text, "tpu-v5e", std::move(shape));
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// A tensor-parallel block on 8 devices: a dot, a reduce-scatter over the y
// chips (device d is chip d, x fastest on 2x4: {0,2,4,6} is x = 0), an
// all-reduce over x, an all-to-all over y.
const char* kBlock = R"(HloModule block, num_partitions=8

%sum (a: bf16[], b: bf16[]) -> bf16[] {
  %a = bf16[] parameter(0)
  %b = bf16[] parameter(1)
  ROOT %s = bf16[] add(%a, %b)
}

ENTRY %main (x: bf16[8,512,1024], w: bf16[1024,1024]) -> bf16[8,128,1024] {
  %x = bf16[8,512,1024]{2,1,0} parameter(0)
  %w = bf16[1024,1024]{1,0} parameter(1)
  %dot.1 = bf16[8,512,1024]{2,1,0} dot(%x, %w), lhs_contracting_dims={2}, rhs_contracting_dims={0}
  %rs.2 = bf16[8,128,1024]{2,1,0} reduce-scatter(%dot.1), channel_id=1, replica_groups=[2,4]<=[4,2]T(1,0), use_global_device_ids=true, dimensions={1}, to_apply=%sum
  %ar.3 = bf16[8,128,1024]{2,1,0} all-reduce(%rs.2), channel_id=2, replica_groups={{0,1},{2,3},{4,5},{6,7}}, use_global_device_ids=true, to_apply=%sum
  ROOT %a2a.4 = bf16[8,128,1024]{2,1,0} all-to-all(%ar.3), channel_id=3, replica_groups={{0,2,4,6},{1,3,5,7}}, dimensions={0}
})";

// The same program as a meshsim workload: the dot of replicated arrays is the
// local matmul 4096 x 1024 x 1024; V is the reduce-scatter's input, the
// all-reduce's array, the all-to-all's per-chip bytes x 4.
const char* kBlockWorkload = R"({"hardware": "tpu-v5e", "topology": {"shape": [2, 4]}, "mesh": {"X": 2, "Y": 4},
  "arrays": {"A": {"shape": {"M": 4096, "K": 1024}, "dtype": "bf16"},
             "B": {"shape": {"K": 1024, "N": 1024}, "dtype": "bf16"}},
  "ops": [{"name": "mm", "kind": "matmul", "a": "A", "b": "B", "out": "C"},
          {"name": "rs", "kind": "reduce_scatter", "bytes": 8388608, "axes": ["Y"], "after": ["mm"]},
          {"name": "ar", "kind": "all_reduce", "bytes": 2097152, "axes": ["X"], "after": ["rs"]},
          {"name": "a2a", "kind": "all_to_all", "bytes": 8388608, "axes": ["Y"], "after": ["ar"]}]})";

}  // namespace

TEST_CASE("hlo import: a block expressible as a workload takes the same picoseconds", "[hlo]") {
  hlo::ImportReport report;
  const workloads::Workload imported = import_text(kBlock, "tpu-v5e", {2, 4}, &report);
  const workloads::Workload written = workloads::parse_workload(kBlockWorkload, "w.json");
  const driver::RunResult a = driver::simulate(imported), b = driver::simulate(written);
  REQUIRE(a.ops.size() == 4);
  REQUIRE(b.ops.size() == 4);
  for (std::size_t i = 0; i < 4; ++i) {
    INFO(a.ops[i].name);
    CHECK(a.ops[i].kind == b.ops[i].kind);
    CHECK(a.ops[i].bytes == b.ops[i].bytes);
    CHECK(a.ops[i].begin == b.ops[i].begin);
    CHECK(a.ops[i].end == b.ops[i].end);
  }
  CHECK(a.makespan == b.makespan);
  CHECK(imported.ops[0].matmul().m == 4096);
  CHECK(imported.ops[0].matmul().k == 1024);
  CHECK(imported.ops[0].matmul().n == 1024);
  CHECK(report.summary() == "lowered 1 matmuls, 0 kernels, 3 collectives, 0 sends; skipped 2 instructions: 2 parameter");
}

TEST_CASE("hlo import: the FSDP fixture: 8 trips, async gathers overlap the dots they feed only", "[hlo]") {
  hlo::ImportOptions o;
  o.hardware = "tpu-v5e";
  o.shape = {4};
  hlo::ImportReport report;
  const workloads::Workload w =
      hlo::import_module(hlo::load_module(std::string(MESHSIM_SOURCE_DIR) + "/tests/hlo/fsdp_mlp_while.hlo"), o, &report);
  CHECK(report.matmuls == 16);
  CHECK(report.collectives == 16);
  CHECK(report.kernels == 8);
  REQUIRE(w.ops.size() == 40);
  // Each trip: two gathers started together, the first dot after the first
  // gather's done, the fusion, the second dot after the second gather's done.
  const driver::RunResult r = driver::simulate(w);
  for (std::size_t t = 0; t < 8; ++t) {
    const auto& ag1 = r.ops[5 * t];
    const auto& ag2 = r.ops[5 * t + 1];
    const auto& dot1 = r.ops[5 * t + 2];
    const auto& dot2 = r.ops[5 * t + 4];
    CHECK(ag1.begin == ag2.begin);  // both issued before either is waited for
    CHECK(dot1.begin >= ag1.end);
    CHECK(dot2.begin >= ag2.end);
    CHECK(dot1.begin < ag2.end);  // the first dot runs under the second gather
    if (t > 0) CHECK(ag1.begin >= r.ops[5 * t - 1].end);  // the next trip after the last dot
  }
  CHECK(w.ops[0].kind == OpKind::AllGather);
  CHECK(w.ops[0].comm_bytes() == 1024u * 4096u * 2u);  // the gathered weights
}

TEST_CASE("hlo import: a collective started in one trip and ended in the next (the collective pipeliner)", "[hlo]") {
  hlo::ImportOptions o;
  o.hardware = "tpu-v5e";
  o.shape = {4};
  hlo::ImportReport report;
  const workloads::Workload w = hlo::import_module(
      hlo::load_module(std::string(MESHSIM_SOURCE_DIR) + "/tests/hlo/pipelined_allgather_loop.hlo"), o, &report);
  // The prologue's gather, then per trip the next gather and a dot.
  REQUIRE(w.ops.size() == 7);
  CHECK(report.collectives == 4);
  CHECK(report.matmuls == 3);
  const std::vector<std::string> names{"first", "loop[0]/next", "loop[0]/y", "loop[1]/next", "loop[1]/y",
                                       "loop[2]/next", "loop[2]/y"};
  for (std::size_t i = 0; i < names.size(); ++i) CHECK(w.ops[i].name == names[i]);
  // Trip t's dot waits for the gather trip t-1 started (carried in the loop
  // state), not for the one its own trip starts just before it.
  const auto waits = [&](std::size_t op, std::uint32_t on) {
    return std::find(w.ops[op].deps.begin(), w.ops[op].deps.end(), on) != w.ops[op].deps.end();
  };
  CHECK(waits(2, 0));
  CHECK(!waits(2, 1));
  CHECK(waits(4, 1));
  CHECK(!waits(4, 3));
  CHECK(waits(6, 3));
  CHECK(!waits(6, 5));
  // So the gather a trip starts runs under that trip's dot.
  const driver::RunResult r = driver::simulate(w);
  for (std::size_t t = 0; t < 3; ++t) {
    CHECK(r.ops[1 + 2 * t].begin == r.ops[2 + 2 * t].begin);
    CHECK(r.ops[1 + 2 * t].begin < r.ops[2 + 2 * t].end);
  }
}

TEST_CASE("hlo import: convolutions that are matmuls; the generic async-start wraps a collective", "[hlo]") {
  const std::string head = "HloModule m, num_partitions=8\n\n";
  const auto one_op = [&](const std::string& body) {
    return import_text(head + "ENTRY %main {\n" + body + "\n}\n", "tpu-v5e", {2, 4});
  };
  // TPU prints a matmul as a convolution: the same op as the dot.
  const workloads::Workload dot = one_op(
      "  %a = bf16[4096,1024] parameter(0)\n  %b = bf16[1024,512] parameter(1)\n"
      "  ROOT %d = bf16[4096,512] dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}");
  const workloads::Workload conv = one_op(
      "  %a = bf16[4096,1024] parameter(0)\n  %b = bf16[1024,512] parameter(1)\n"
      "  ROOT %c = bf16[4096,512] convolution(%a, %b), dim_labels=bf_io->bf");
  REQUIRE(conv.ops.size() == 1);
  CHECK(conv.ops[0].matmul().m == dot.ops[0].matmul().m);
  CHECK(conv.ops[0].matmul().k == dot.ops[0].matmul().k);
  CHECK(conv.ops[0].matmul().n == dot.ops[0].matmul().n);
  CHECK(driver::simulate(conv).makespan == driver::simulate(dot).makespan);
  // Spatial dimensions under a window of 1 are rows.
  const workloads::Workload spatial = one_op(
      "  %a = bf16[8,16,1024] parameter(0)\n  %b = bf16[1,1024,512] parameter(1)\n"
      "  ROOT %c = bf16[8,16,512] convolution(%a, %b), window={size=1}, dim_labels=b0f_0io->b0f");
  CHECK(spatial.ops[0].matmul().m == 128);
  CHECK(spatial.ops[0].matmul().k == 1024);
  CHECK(spatial.ops[0].matmul().n == 512);
  CHECK(error_of(head + "ENTRY %main {\n  %a = bf16[8,16,1024] parameter(0)\n  %b = bf16[3,1024,512] parameter(1)\n"
                 "  ROOT %c = bf16[8,16,512] convolution(%a, %b), window={size=3 pad=1_1}, dim_labels=b0f_0io->b0f\n}\n") ==
        "d.hlo:6: c: a convolution with a window larger than 1 is not a matmul; meshsim lowers only those");
  // async-start ... calls=: the all-gather runs under the dot before its done; the dot after waits.
  const workloads::Workload w = import_text(head + R"(%wrapped (p: bf16[128,1024]) -> bf16[1024,1024] {
  %p = bf16[128,1024]{1,0} parameter(0)
  ROOT %ag = bf16[1024,1024]{1,0} all-gather(%p), channel_id=1, replica_groups=[1,8]<=[8], dimensions={0}, use_global_device_ids=true
}

ENTRY %main {
  %w = bf16[128,1024]{1,0} parameter(0)
  %x = bf16[256,1024]{1,0} parameter(1)
  %start = ((bf16[128,1024]{1,0}), bf16[1024,1024]{1,0}, s32[]) async-start(%w), calls=%wrapped
  %d1 = bf16[256,1024]{1,0} dot(%x, %x), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  %done = bf16[1024,1024]{1,0} async-done(%start)
  ROOT %d2 = bf16[256,1024]{1,0} dot(%x, %done), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})",
                                            "tpu-v5e", {2, 4});
  REQUIRE(w.ops.size() == 3);
  CHECK(w.ops[0].kind == OpKind::AllGather);
  CHECK(w.ops[0].comm_bytes() == 1024u * 1024u * 2u);
  CHECK(w.ops[0].collective().hw_axes == std::vector<int>{0, 1});
  CHECK(w.ops[1].deps.empty());                         // d1 does not wait for the gather
  CHECK(w.ops[2].deps == std::vector<std::uint32_t>{0, 1});  // d2 waits for d1 and the gather
}

TEST_CASE("hlo import: groups that are not axes run as rings over their chips", "[hlo]") {
  // {{0,2},{1,3}} on a 2x2 is the y axis: the axis collective. On a ring of 4
  // chips it pairs chips two hops apart (strided), and on a 2x2 {{0,3},{1,2}}
  // pairs the diagonals: collectives over groups of chips, whose time is their
  // closed form (the busiest link's bytes over its bandwidth: both load every
  // link alike) within 0.5%, never below their lower bound.
  const auto module = [](const std::string& groups) {
    return "HloModule m, num_partitions=4\n\nENTRY %main {\n  %p = bf16[33554432] parameter(0)\n"
           "  ROOT %r = bf16[134217728] all-gather(%p), channel_id=1, replica_groups=" +
           groups + ", use_global_device_ids=true, dimensions={0}\n}\n";
  };
  hlo::ImportReport report;
  const workloads::Workload axis = import_text(module("{{0,2},{1,3}}"), "tpu-v4", {2, 2}, &report);
  REQUIRE(axis.ops.size() == 1);
  CHECK(axis.ops[0].collective().hw_axes == std::vector<int>{1});
  CHECK(!axis.ops[0].collective().groups);
  struct Case {
    std::string groups;
    std::vector<int> shape;
  };
  for (const Case& c : {Case{"{{0,2},{1,3}}", {4}}, Case{"{{0,3},{1,2}}", {2, 2}}}) {
    INFO(c.groups << " on " << c.shape.size() << " axes");
    report = {};
    const workloads::Workload w = import_text(module(c.groups), "tpu-v4", c.shape, &report);
    REQUIRE(w.ops.size() == 1);
    REQUIRE(w.ops[0].collective().groups);
    CHECK(w.ops[0].collective().groups->size() == 2);
    CHECK(w.ops[0].comm_bytes() == 268435456u);  // V: the gathered bf16[134217728]
    CHECK(report.summary() == "lowered 0 matmuls, 0 kernels, 1 collectives (1 over groups of chips), 0 sends; "
                              "skipped 1 instructions: 1 parameter");
    const driver::RunResult r = driver::simulate(w);
    REQUIRE(r.ops.size() == 1);
    const driver::OpResult& o = r.ops[0];
    CHECK(o.groups == w.ops[0].collective().groups);
    CHECK(o.time().seconds() == Approx(o.closed_s).epsilon(0.005));
    CHECK(o.time().seconds() >= o.bound_s);
    CHECK(o.bound_s > 0);
  }
}

TEST_CASE("hlo import: a permute across the torus is routed sends at the load of their busiest link", "[hlo]") {
  // Every device to the one half way round a ring of 16 (tpu-v5e wraps an axis
  // of 16): 16 sends of 16 MiB, each 8 hops the Plus way (dimension-order
  // routing breaks the tie one way), so each Plus link carries 8 of them.
  std::string pairs;
  for (int d = 0; d < 16; ++d) pairs += fmt::format("{}{{{},{}}}", d ? "," : "", d, (d + 8) % 16);
  const std::string text = "HloModule m, num_partitions=16\n\nENTRY %main {\n  %p = bf16[8388608] parameter(0)\n"
                           "  ROOT %c = bf16[8388608] collective-permute(%p), channel_id=1, source_target_pairs={" +
                           pairs + "}\n}\n";
  const workloads::Workload w = import_text(text, "tpu-v5e", {16});
  REQUIRE(w.ops.size() == 1);
  CHECK(w.ops[0].send().pairs.size() == 16);
  const driver::RunResult r = driver::simulate(w);
  const driver::OpResult& o = r.ops.at(0);
  const double v = 16777216.0, b = static_cast<double>(w.hardware.ici.bandwidth_bytes_per_s);
  CHECK(o.closed_s == Approx(8 * v / b));  // the busiest link's bytes over its bandwidth
  CHECK(o.time().seconds() == Approx(8 * v / b).epsilon(0.005));
  // Every byte crosses 8 of the ring's 32 links: the traffic bound 4 V / b binds.
  CHECK(o.bound_term == "traffic");
  CHECK(o.bound_s == Approx(4 * v / b));
}

TEST_CASE("hlo import: a device order maps groups onto other chips", "[hlo]") {
  // Devices numbered y fastest on a 2x4: device d is chip (x = d / 4, y = d % 4) = x + 2y.
  const std::string text = "HloModule m, num_partitions=8\n\nENTRY %main {\n  %p = bf16[1024] parameter(0)\n"
                           "  ROOT %r = bf16[1024] all-reduce(%p), channel_id=1, replica_groups=[2,4]<=[8], "
                           "use_global_device_ids=true, to_apply=%s\n}\n";
  hlo::ImportOptions o;
  o.hardware = "tpu-v5e";
  o.shape = {2, 4};
  // Device d as chip d: {0,1,2,3} is a 2x2 block, not an axis: a ring over the group.
  const workloads::Workload block = hlo::import_module(hlo::parse_module_text(text, "d.hlo"), o);
  REQUIRE(block.ops.size() == 1);
  CHECK(block.ops[0].collective().hw_axes.empty());
  REQUIRE(block.ops[0].collective().groups);
  CHECK(*block.ops[0].collective().groups == std::vector<std::vector<topology::ChipId>>{{0, 1, 2, 3}, {4, 5, 6, 7}});
  o.hardware = "tpu-v5e";
  o.shape = {2, 4};
  o.devices = {0, 2, 4, 6, 1, 3, 5, 7};
  const workloads::Workload w = hlo::import_module(hlo::parse_module_text(text, "d.hlo"), o);
  REQUIRE(w.ops.size() == 1);
  CHECK(w.ops[0].collective().hw_axes == std::vector<int>{1});  // y
  o.devices = {0, 1, 2};
  CHECK_THROWS_WITH(hlo::import_module(hlo::parse_module_text(text, "d.hlo"), o),
                    "--devices: expected each of the 8 chips once (the chip of device 0, 1, ...), got 3 ids");
}

TEST_CASE("hlo import: what cannot be lowered is one error line", "[hlo]") {
  const std::string head = "HloModule m, num_partitions=8\n\nENTRY %main {\n  %p = bf16[64] parameter(0)\n";
  CHECK(error_of(head + "  ROOT %r = bf16[64] all-reduce(%p), channel_id=1, replica_groups={{0,3},{1,2,4,7},{5,6}}, "
                        "use_global_device_ids=true, to_apply=%s\n}\n") ==
        "d.hlo:5: r: its replica groups have different sizes (2 and 4 devices)");
  CHECK(error_of(head + "  ROOT %w = bf16[64] while(%p), condition=%c, body=%b\n}\n") ==
        "d.hlo:5: w: the loop's trip count is unknown (no known_trip_count in its backend_config): meshsim unrolls "
        "loops by their trip counts; give --trip-count N");
  CHECK(error_of(head + "  ROOT %r = bf16[64] all-reduce(%p), replica_groups={}, to_apply=%s\n}\n", {4, 4}) ==
        "d.hlo:1: the module runs on 8 devices (1 replicas x 8 partitions); the 4x4 topology has 16 chips");
  CHECK(error_of(head + "  ROOT %d = bf16[64] all-gather-done(%p)\n}\n") ==
        "d.hlo:5: d: an async -done whose operand is not an async -start (followed through tuples, "
        "get-tuple-element, loop state and calls)");
  CHECK(error_of(head + "  ROOT %c = bf16[64] copy(%p)\n}\n") ==
        "d.hlo:3: nothing to simulate: no dot, fusion or collective in the ENTRY computation (lowered 0 matmuls, 0 "
        "kernels, 0 collectives, 0 sends; skipped 2 instructions: 1 copy, 1 parameter)");
  // Sizes past what a chip could hold are refused, not wrapped around.
  CHECK(error_of("HloModule m, num_partitions=8\nENTRY %main {\n  %a = bf16[2097152,2097152] parameter(0)\n"
                 "  %b = bf16[2097152,2097152] parameter(1)\n  ROOT %d = bf16[2097152,2097152] dot(%a, %b), "
                 "lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n") ==
        "d.hlo:5: d: a matmul of more than 2^62 multiply-adds per chip");
  // Malformed calls: a loop of no cost with an enormous trip count, a computation calling itself.
  CHECK(error_of("HloModule m, num_partitions=8\n%b {\n  %q = s32[] parameter(0)\n}\nENTRY %main {\n"
                 "  %p = s32[] parameter(0)\n  ROOT %w = s32[] while(%p), condition=%b, body=%b, "
                 "backend_config={\"known_trip_count\":{\"n\":\"1000000000000\"}}\n}\n") ==
        "d.hlo:3: q: the module visits more than 16777216 instructions (loops are unrolled by their trip counts)");
  CHECK(error_of("HloModule m, num_partitions=8\n%f {\n  %p = s32[] parameter(0)\n  ROOT %c = s32[] call(%p), "
                 "to_apply=%f\n}\nENTRY %main {\n  %p = s32[] parameter(0)\n  ROOT %c = s32[] call(%p), to_apply=%f\n}\n") ==
        "d.hlo:4: c: computation 'f' calls itself");
  CHECK_THROWS_WITH(import_text(head + "}\n", "tpu-v9", {8}),
                    Catch::StartsWith("--hardware: 'tpu-v9' is not a preset (TPU: "));
}

TEST_CASE("hlo import: a collective of several operands (XLA's combiners) moves them all", "[hlo]") {
  const std::string head = R"(HloModule m, num_partitions=8

%sum (a: bf16[], b: bf16[]) -> bf16[] {
  %a = bf16[] parameter(0)
  %b = bf16[] parameter(1)
  ROOT %s = bf16[] add(%a, %b)
}

ENTRY %main {
  %p = bf16[1024,64]{1,0} parameter(0)
  %q = bf16[512]{0} parameter(1)
  %r = f32[256,8]{1,0} parameter(2)
)";
  const auto one = [&](const std::string& body) {
    const workloads::Workload w = import_text(head + body + "\n}\n", "tpu-v5e", {2, 4});
    REQUIRE(w.ops.size() == 1);
    return w.ops[0];
  };
  const std::uint64_t all = 1024 * 64 * 2 + 512 * 2 + 256 * 8 * 4;  // the three operands' bytes
  // all-reduce and its async start: V is every operand's bytes.
  CHECK(one("  ROOT %ar = (bf16[1024,64], bf16[512], f32[256,8]) all-reduce(%p, %q, %r), channel_id=1, "
            "replica_groups=[1,8]<=[8], use_global_device_ids=true, to_apply=%sum")
            .comm_bytes() == all);
  CHECK(one("  %s = (bf16[1024,64], bf16[512], f32[256,8]) all-reduce-start(%p, %q, %r), channel_id=1, "
            "replica_groups=[1,8]<=[8], use_global_device_ids=true, to_apply=%sum\n"
            "  ROOT %d = (bf16[1024,64], bf16[512], f32[256,8]) all-reduce-done(%s)")
            .comm_bytes() == all);
  // reduce-scatter: V is the inputs (each chip keeps 1/8 of each).
  CHECK(one("  ROOT %rs = (bf16[128,64], bf16[64], f32[32,8]) reduce-scatter(%p, %q, %r), channel_id=1, "
            "replica_groups=[1,8]<=[8], use_global_device_ids=true, dimensions={0}, to_apply=%sum")
            .comm_bytes() == all);
  // all-to-all of tuple operands: operand i goes to the group's chip i; V is P times a chip's bytes.
  const workloads::Op a2a =
      one("  ROOT %a = (bf16[1024,64], bf16[1024,64]) all-to-all(%p, %p), channel_id=1, "
          "replica_groups={{0,1},{2,3},{4,5},{6,7}}");
  CHECK(a2a.kind == OpKind::AllToAll);
  CHECK(a2a.comm_bytes() == 2 * (2 * 1024 * 64 * 2));
  // all-gather: V is the gathered results, every one.
  CHECK(one("  ROOT %ag = (bf16[8192,64], bf16[4096]) all-gather(%p, %q), channel_id=1, replica_groups=[1,8]<=[8], "
            "use_global_device_ids=true, dimensions={0}")
            .comm_bytes() == 8 * (1024 * 64 * 2 + 512 * 2));
}

TEST_CASE("hlo import: an in-place collective-permute sends its slice, not the buffer", "[hlo]") {
  // As XLA's latency-hiding scheduler test writes it: the buffer in and out,
  // their start indices, slice_sizes; 4256 x 8 x 128 f32 of a 33712 x 8 x 128 buffer.
  const std::string head = R"(HloModule m, num_partitions=8

ENTRY %main {
  %buf = f32[33712,8,128]{2,1,0} parameter(0)
  %z = u32[] constant(0)
  %i = u32[] constant(4256)
  %in = (u32[], u32[], u32[]) tuple(%z, %z, %z)
  %out = (u32[], u32[], u32[]) tuple(%i, %z, %z)
)";
  const std::string pairs = "source_target_pairs={{0,2},{2,3},{3,1},{1,0},{6,4},{4,5},{5,7},{7,6}}";
  const workloads::Workload w = import_text(
      head + "  ROOT %cp = f32[33712,8,128]{2,1,0} collective-permute(%buf, %buf, %in, %out), channel_id=1, " + pairs +
          ", slice_sizes={{4256,8,128}}\n}\n",
      "tpu-v5e", {2, 4});
  REQUIRE(w.ops.size() == 1);
  CHECK(w.ops[0].kind == OpKind::Send);
  CHECK(w.ops[0].send().bytes == 4256u * 8u * 128u * 4u);  // 17.4 MB, not the buffer's 138 MB
  CHECK(w.ops[0].send().pairs.size() == 8);
  // Without slice_sizes the whole operand moves.
  const workloads::Workload whole = import_text(
      head + "  ROOT %cp = f32[33712,8,128]{2,1,0} collective-permute(%buf), channel_id=1, " + pairs + "\n}\n",
      "tpu-v5e", {2, 4});
  CHECK(whole.ops[0].send().bytes == 33712u * 8u * 128u * 4u);
  // Slices it cannot be: one line each.
  const auto with_slices = [&](const std::string& slices) {
    return error_of(head +
                    "  ROOT %cp = f32[33712,8,128]{2,1,0} collective-permute(%buf, %buf, %in, %out), "
                    "channel_id=1, " +
                    pairs + ", slice_sizes=" + slices + "\n}\n");
  };
  CHECK(with_slices("{{4256,8}}") == "d.hlo:9: cp: slice_sizes has 2 dimensions, its buffer has 3");
  CHECK(with_slices("{{40000,8,128}}") ==
        "d.hlo:9: cp: slice size 40000 of dimension 0 is outside its buffer's 0..33712");
  CHECK(with_slices("{{4256,8,128},{4256,8,128}}") ==
        "d.hlo:9: cp: an in-place collective-permute of 2 slices (meshsim sends one slice per source-target pair)");
  CHECK(with_slices("{4256}") == "d.hlo:9: cp: expected slice_sizes={{d0,d1,...}}");
}

TEST_CASE("hlo import: XLA's printing as people paste it: comments, lines split, shapes left out", "[hlo]") {
  // /*index=N*/ in long tuples, "} // name" after a computation, an instruction
  // over several lines, a shape left out (XLA's tests), a comment line.
  const std::string text = R"(// a dump pasted from a test
HloModule m, num_partitions=8

%sum (a: bf16[], b: bf16[]) -> bf16[] {
  %a = bf16[] parameter(0)
  %b = bf16[] parameter(1)
  ROOT %s = bf16[] add(%a, %b)
} // sum

ENTRY %main {
  %t = (bf16[1024], bf16[1024], bf16[1024], bf16[1024], bf16[1024], /*index=5*/bf16[1024]) parameter(0)
  %x = get-tuple-element(%t), index=0
  %p = bf16[1024]{0} get-tuple-element(%t), index=5
  ROOT %ar = bf16[1024]{0} all-reduce(%p),
    channel_id=1,
    replica_groups=[1,8]<=[8], use_global_device_ids=true,
    to_apply=%sum
} // main
)";
  const workloads::Workload w = import_text(text, "tpu-v5e", {2, 4});
  REQUIRE(w.ops.size() == 1);
  CHECK(w.ops[0].kind == OpKind::AllReduce);
  CHECK(w.ops[0].comm_bytes() == 2048);
  CHECK(w.ops[0].pointer == "14");  // the line the instruction starts on
  // What reads an instruction printed without its shape cannot be sized: one line.
  const std::string shapeless = R"(HloModule m, num_partitions=8
%sum (a: bf16[], b: bf16[]) -> bf16[] {
  %a = bf16[] parameter(0)
  %b = bf16[] parameter(1)
  ROOT %s = bf16[] add(%a, %b)
}
ENTRY %main {
  %t = (bf16[1024]) parameter(0)
  %x = get-tuple-element(%t), index=0
  ROOT %ar = bf16[1024]{0} all-reduce(%x), channel_id=1, replica_groups=[1,8]<=[8], use_global_device_ids=true, to_apply=%sum
}
)";
  CHECK(error_of(shapeless) == "d.hlo:10: ar: operand 'x' has no shape in the dump: meshsim cannot size what reads it");
  // Several modules in one file (XLA's lit tests): one line.
  CHECK(error_of("// RUN: x\nHloModule a, num_partitions=8\nENTRY %m {\n  ROOT %p = bf16[8] parameter(0)\n}\n"
                 "// -----\nHloModule b\n") ==
        "d.hlo:7: a second HloModule in the file: meshsim reads one module per file (split it, e.g. at its '// -----' "
        "lines)");
}

TEST_CASE("hlo import: a module without a device count runs on the topology's chips", "[hlo]") {
  // torch_xla's dumps and XLA's tests print no replica_count or num_partitions.
  const auto module = [](const std::string& attrs) {
    return "HloModule m\n%sum (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
           "  ROOT %s = f32[] add(%a, %b)\n}\nENTRY %main {\n  %p = f32[256] parameter(0)\n"
           "  ROOT %ar = f32[256] all-reduce(%p), " +
           attrs + "replica_groups={{0,1},{2,3},{4,5},{6,7}}, to_apply=%sum\n}\n";
  };
  hlo::ImportReport replicas, partitions;
  const workloads::Workload a = import_text(module(""), "tpu-v5e", {2, 4}, &replicas);
  const workloads::Workload b = import_text(module("channel_id=1, "), "tpu-v5e", {2, 4}, &partitions);
  CHECK(replicas.assumed_devices == "replicas");
  CHECK(partitions.assumed_devices == "partitions");
  CHECK_THAT(replicas.summary(),
             Catch::StartsWith("no device count in the module: 8 replicas, the topology's chips; "));
  REQUIRE(a.ops.size() == 1);
  REQUIRE(b.ops.size() == 1);
  CHECK(a.ops[0].comm_bytes() == 1024);
  CHECK(a.ops[0].collective().hw_axes == b.ops[0].collective().hw_axes);  // the same groups either way
  CHECK(a.ops[0].collective().hw_axes == std::vector<int>{0});            // pairs along x of the 2x4
}

TEST_CASE("hlo import: --trip-count runs loops the dump gives no trip count", "[hlo]") {
  const std::string text = R"(HloModule m, num_partitions=8
%sum (a: bf16[], b: bf16[]) -> bf16[] {
  %a = bf16[] parameter(0)
  %b = bf16[] parameter(1)
  ROOT %s = bf16[] add(%a, %b)
}
%body (q: bf16[512]) -> bf16[512] {
  %q = bf16[512] parameter(0)
  ROOT %ar = bf16[512] all-reduce(%q), channel_id=1, replica_groups=[1,8]<=[8], use_global_device_ids=true, to_apply=%sum
}
%cond (q: bf16[512]) -> pred[] {
  %q = bf16[512] parameter(0)
  ROOT %t = pred[] constant(true)
}
ENTRY %main {
  %p = bf16[512] parameter(0)
  ROOT %w = bf16[512] while(%p), condition=%cond, body=%body
}
)";
  hlo::ImportOptions o;
  o.hardware = "tpu-v5e";
  o.shape = {2, 4};
  o.trip_count = 3;
  hlo::ImportReport report;
  const workloads::Workload w = hlo::import_module(hlo::parse_module_text(text, "d.hlo"), o, &report);
  CHECK(w.ops.size() == 3);
  CHECK(report.assumed_trips == 1);
  CHECK(report.summary().find("(1 while loop without a known trip count run --trip-count times)") != std::string::npos);
}

TEST_CASE("hlo import: an f32 dot on a TPU runs as bf16 passes on the MXU", "[hlo]") {
  // XLA's precision for f32 operands: DEFAULT one bf16 pass, HIGH three, HIGHEST six.
  const auto dot = [](const std::string& attrs) {
    const std::string text =
        "HloModule m, num_partitions=8\nENTRY %main {\n  %a = f32[4096,4096] parameter(0)\n"
        "  %b = f32[4096,4096] parameter(1)\n  ROOT %d = f32[4096,4096] dot(%a, %b), "
        "lhs_contracting_dims={1}, rhs_contracting_dims={0}" +
        attrs + "\n}\n";
    return import_text(text, "tpu-v5e", {2, 4});
  };
  const workloads::Workload fast = dot(""), high = dot(", operand_precision={high,high}"),
                            highest = dot(", operand_precision={highest,default}"),
                            x6 = dot(", algorithm=dot_bf16_bf16_f32_x6");
  CHECK(fast.ops[0].matmul().bf16_passes == 1);
  CHECK(high.ops[0].matmul().bf16_passes == 3);
  CHECK(highest.ops[0].matmul().bf16_passes == 6);
  CHECK(x6.ops[0].matmul().bf16_passes == 6);
  // 2 x 4096^3 FLOPs at v5e's bf16 peak (1.97e14 FLOP/s) per pass: compute-bound.
  const double flops = 2.0 * 4096.0 * 4096.0 * 4096.0, peak = fast.hardware.chip.bf16_flops_per_s;
  CHECK(driver::simulate(fast).makespan.seconds() ==
        Approx(flops / (peak * fast.hardware.matmul_efficiency)).epsilon(1e-6));
  CHECK(driver::simulate(highest).makespan.seconds() ==
        Approx(6 * flops / (peak * fast.hardware.matmul_efficiency)).epsilon(1e-6));
  // On a GPU preset: the fp32 rate, whatever the precision.
  const workloads::Workload gpu = import_text(
      "HloModule m, num_partitions=8\nENTRY %main {\n  %a = f32[4096,4096] parameter(0)\n"
      "  %b = f32[4096,4096] parameter(1)\n  ROOT %d = f32[4096,4096] dot(%a, %b), "
      "lhs_contracting_dims={1}, rhs_contracting_dims={0}, operand_precision={highest,highest}\n}\n",
      "a100-dgx", {1});
  CHECK(gpu.ops.at(0).matmul().bf16_passes == 0);
}

TEST_CASE("hlo import: send and recv are sends over their pairs, the recv-done waits for them", "[hlo]") {
  // XLA's pipeline-parallel point-to-point: the pairs in a frontend attribute.
  const std::string text = R"(HloModule m, num_partitions=8
ENTRY %main {
  %data = f32[1024,256] parameter(0)
  %tok = token[] after-all()
  %recv = (f32[1024,256], u32[], token[]) recv(%tok), channel_id=1, frontend_attributes={
    _xla_send_recv_source_target_pairs="{{0, 1}, {1, 2}, {2, 3}}"
  }
  %send = (f32[1024,256], u32[], token[]) send(%data, %tok), channel_id=1, frontend_attributes={
    _xla_send_recv_source_target_pairs="{{0, 1}, {1, 2}, {2, 3}}"
  }
  %recv-done = (f32[1024,256], token[]) recv-done(%recv), channel_id=1
  %got = f32[1024,256] get-tuple-element(%recv-done), index=0
  %d = f32[1024,1024] dot(%got, %data), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT %send-done = token[] send-done(%send), channel_id=1
})";
  const workloads::Workload w = import_text(text, "tpu-v5e", {2, 4});
  REQUIRE(w.ops.size() == 2);
  CHECK(w.ops[0].kind == OpKind::Send);
  CHECK(w.ops[0].send().bytes == 1024u * 256u * 4u);
  CHECK(w.ops[0].send().pairs.size() == 3);
  CHECK(w.ops[1].kind == OpKind::Matmul);
  CHECK(w.ops[1].deps == std::vector<std::uint32_t>{0});  // the dot reads what the recv-done received
  // Host transfers are not between devices: skipped.
  CHECK(error_of("HloModule m, num_partitions=8\nENTRY %main {\n  %t = token[] after-all()\n"
                 "  %s = (f32[8], u32[], token[]) send(f32[8] %x, %t), channel_id=2, is_host_transfer=true\n"
                 "  ROOT %d = token[] send-done(%s), channel_id=2, is_host_transfer=true\n}\n")
            .find("nothing to simulate") != std::string::npos);
}

TEST_CASE("hlo import: XLA:GPU modules on a GPU preset; an fft is a memory-bound kernel", "[hlo]") {
  // As jaxdecomp's FFT on 8 A100s: an fft, an async all-to-all over all 8, an fft.
  const std::string text = R"(HloModule jit_fft, is_scheduled=true, num_partitions=8
ENTRY %main {
  %p = c64[128,1024,1024]{2,1,0} parameter(0)
  %f1 = c64[128,1024,1024]{2,1,0} fft(%p), fft_type=FFT, fft_length={1024}
  %s = ((c64[128,1024,1024]{2,1,0}), c64[128,1024,1024]{2,1,0}) all-to-all-start(%f1), channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={1}
  %d = c64[128,1024,1024]{2,1,0} all-to-all-done(%s)
  ROOT %f2 = c64[128,1024,1024]{2,1,0} fft(%d), fft_type=FFT, fft_length={1024}
})";
  hlo::ImportReport report;
  const workloads::Workload w = import_text(text, "a100-dgx", {1}, &report);
  REQUIRE(w.ops.size() == 3);
  CHECK(w.hardware.gpu);
  const std::uint64_t bytes = 128ull * 1024 * 1024 * 8;  // c64: 8 bytes an element
  CHECK(w.ops[0].kind == OpKind::Elementwise);
  CHECK(w.ops[0].elementwise().hbm_bytes == 2 * bytes);  // read and written once
  CHECK(w.ops[1].kind == OpKind::AllToAll);
  CHECK(w.ops[1].comm_bytes() == 8 * bytes);
  CHECK(w.ops[1].collective().hw_axes == std::vector<int>{0});  // a node's 8 GPUs
  CHECK(w.ops[2].deps == std::vector<std::uint32_t>{0, 1});
  const driver::RunResult r = driver::simulate(w);
  CHECK(r.ops[0].time().seconds() ==
        Approx(2.0 * static_cast<double>(bytes) / w.hardware.chip.hbm_bandwidth_bytes_per_s).epsilon(1e-6));
  // Groups of part of a node are not a GPU cluster's axes: one line.
  CHECK(error_of(R"(HloModule m, num_partitions=8
ENTRY %main {
  %p = f32[1024] parameter(0)
  ROOT %a = f32[1024] all-to-all(%p), channel_id=1, replica_groups={{0,1},{2,3},{4,5},{6,7}}, dimensions={0}
})") == "no error");  // on a TPU 2x4 these pairs are the x axis
  try {
    (void)import_text(R"(HloModule m, num_partitions=8
ENTRY %main {
  %p = f32[1024] parameter(0)
  ROOT %a = f32[1024] all-to-all(%p), channel_id=1, replica_groups={{0,1},{2,3},{4,5},{6,7}}, dimensions={0}
})",
                      "a100-dgx", {1});
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) ==
          "d.hlo:4: a: its groups (of 2 devices, e.g. {0,1}) are not the GPUs of whole nodes, "
          "the nodes, or all: meshsim runs a GPU cluster's collectives over those");
  }
}
