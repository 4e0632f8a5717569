// Compute and communication together: roofline compute, collective times, their
// overlap, and the MLP's column->row saving.
#include <catch2/catch.hpp>

#include <string>

#include "driver/simulate.hpp"
#include "workloads/workload.hpp"

using namespace meshsim;

namespace {

driver::RunResult run(const std::string& text) { return driver::simulate(workloads::parse_workload(text, "t.json")); }

const driver::OpResult& op(const driver::RunResult& r, const std::string& name) {
  for (const auto& o : r.ops)
    if (o.name == name) return o;
  FAIL("no op " << name);
  return r.ops.front();
}

const char* kHead = R"({"hardware": "tpu-v5e", "mesh": {"X": 16, "Y": 16}, )";

}  // namespace

TEST_CASE("Matmul timing: negligible communication runs at the roofline compute time", "[driver]") {
  const driver::RunResult r = run(std::string(kHead) + R"(
    "arrays": {"A": {"shape": {"I": 16384, "J": 8192}, "dtype": "bf16", "sharding": "A[I_X, J]"},
               "B": {"shape": {"J": 8192, "K": 16384}, "dtype": "bf16", "sharding": "B[J, K_Y]"}},
    "ops": [{"name": "mm", "kind": "matmul", "a": "A", "b": "B", "out": "C"}]})");
  const double flops = 2.0 * 1024 * 8192 * 1024;  // local shard per chip
  CHECK(r.makespan.seconds() == Approx(flops / 1.97e14).epsilon(0.01));
  CHECK(op(r, "mm.matmul").bound == "compute");
}

TEST_CASE("Matmul timing: negligible compute runs at its collective's time", "[driver]") {
  // Case 3 on a chip whose compute and HBM are made a thousand times faster: the
  // reduction of C's partial sums is all that is left.
  const std::string fast = R"({"hardware": {"preset": "tpu-v5e", "bf16_flops_per_s": 1.97e17,
                                "hbm_bandwidth_bytes_per_s": 8.2e14}, "mesh": {"X": 16, "Y": 16}, )";
  const driver::RunResult mm = run(fast + R"(
    "arrays": {"A": {"shape": {"I": 4096, "J": 4096}, "dtype": "bf16", "sharding": "A[I, J_Y]"},
               "B": {"shape": {"J": 4096, "K": 4096}, "dtype": "bf16", "sharding": "B[J_Y, K]"}},
    "ops": [{"name": "mm", "kind": "matmul", "a": "A", "b": "B", "out": "C"}]})");
  const driver::RunResult ar = run(fast + R"(
    "ops": [{"kind": "all_reduce", "bytes": 33554432, "axes": ["Y"]}]})");
  INFO("matmul total " << mm.makespan.seconds() << " s, all-reduce alone " << ar.makespan.seconds() << " s");
  CHECK(op(mm, "mm.all_reduce").time() == ar.makespan);
  CHECK(mm.makespan.seconds() == Approx(ar.makespan.seconds()).epsilon(0.01));
}

TEST_CASE("Matmul timing: compute and communication overlap when independent, add up when dependent", "[driver]") {
  const std::string arrays = R"(
    "arrays": {"A": {"shape": {"I": 16384, "J": 8192}, "dtype": "bf16", "sharding": "A[I_X, J]"},
               "B": {"shape": {"J": 8192, "K": 16384}, "dtype": "bf16", "sharding": "B[J, K_Y]"},
               "G": {"shape": {"P": 4096, "Q": 2048}, "dtype": "bf16", "sharding": "G[P_X, Q]"}},)";
  const driver::RunResult both = run(std::string(kHead) + arrays + R"(
    "ops": [{"name": "mm", "kind": "matmul", "a": "A", "b": "B", "out": "C"},
            {"name": "ag", "kind": "all_gather", "array": "G", "axes": ["X"]}]})");
  const driver::RunResult chained = run(std::string(kHead) + arrays + R"(
    "ops": [{"name": "mm", "kind": "matmul", "a": "A", "b": "B", "out": "C"},
            {"name": "ag", "kind": "all_gather", "array": "G", "axes": ["X"], "after": ["mm"]}]})");
  const double compute = op(both, "mm.matmul").time().seconds();
  const double comm = op(both, "ag").time().seconds();
  const double lo = std::max(compute, comm), hi = compute + comm;
  // Independent: compute units and links are different resources.
  CHECK(both.makespan.seconds() >= lo * (1 - 1e-9));
  CHECK(both.makespan.seconds() == Approx(lo).epsilon(0.01));
  // Dependent: one after the other.
  CHECK(chained.makespan.seconds() == Approx(hi).epsilon(0.01));
  CHECK(chained.makespan.seconds() <= hi * (1 + 1e-9));
}

TEST_CASE("MLP: column->row moves less than gather-in-the-middle, by the gather of H", "[driver]") {
  const std::string arrays = R"(
    "arrays": {"Xa": {"shape": {"B": 8192, "D": 8192}, "dtype": "bf16", "sharding": "Xa[B_X, D]"},
               "W1": {"shape": {"D": 8192, "F": 32768}, "dtype": "bf16", "sharding": "W1[D, F_Y]"},
               "W2": {"shape": {"F": 32768, "D": 8192}, "dtype": "bf16", "sharding": "W2[F_Y, D]"}},)";
  const driver::RunResult cr = run(std::string(kHead) + arrays + R"(
    "ops": [{"name": "m", "kind": "mlp", "x": "Xa", "w1": "W1", "w2": "W2", "out": "Y"}]})");
  const driver::RunResult gm = run(std::string(kHead) + arrays + R"(
    "ops": [{"name": "m", "kind": "mlp", "x": "Xa", "w1": "W1", "w2": "W2", "out": "Y", "variant": "gather_middle"}]})");
  // H[B_X, F_Y]: each of the 16 x-groups all-gathers V_H = (8192/16) * 32768 * 2 bytes
  // over a ring of 16: every chip receives 15/16 of V_H, one hop transfer per
  // received shard, so the links carry 256 * 15/16 * V_H more bytes.
  const double v_h = 8192.0 / 16 * 32768 * 2;
  CHECK(static_cast<double>(gm.link_bytes - cr.link_bytes) == Approx(256 * 15.0 / 16 * v_h).epsilon(1e-9));
  // And it takes longer by about the gather's closed form, (X-1)/X V_H / W.
  const double gather = op(gm, "m.gather_h").time().seconds();
  CHECK(gather == Approx(15.0 / 16 * v_h / 90e9).epsilon(0.01));
  CHECK(gm.makespan.seconds() - cr.makespan.seconds() == Approx(gather).epsilon(0.01));
}

TEST_CASE("Critical path: a ring all-gather's last byte crossed floor(X/2) hops; contention shows", "[driver]") {
  const std::string text = R"({"hardware": "tpu-v5e", "mesh": {"X": 16},
    "ops": [{"name": "a", "kind": "all_gather", "bytes": 16777216, "axes": ["X"]},
            {"name": "b", "kind": "all_gather", "bytes": 16777216, "axes": ["X"]},
            {"name": "alone", "kind": "all_gather", "bytes": 16777216, "axes": ["X"], "after": ["a", "b"]}]})";
  driver::SimulateOptions options;
  options.critical_path = true;
  const driver::RunResult r = driver::simulate(workloads::parse_workload(text, "t.json"), options);
  REQUIRE(r.critical_paths.size() == 3);
  const driver::CriticalPath& alone = r.critical_paths[2];
  CHECK(alone.hops == 8);
  CHECK(alone.latency.ps() == 8 * 1'000'000);
  CHECK(alone.queued == kZeroTick);
  CHECK(alone.computes == 0);
  // The two concurrent gathers wait behind each other's transfers.
  CHECK(r.critical_paths[0].queued + r.critical_paths[1].queued > kZeroTick);
}
