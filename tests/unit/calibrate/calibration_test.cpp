// The calibration file: round trip, validation messages, applying it to a workload.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "base/error.hpp"
#include "calibrate/calibration.hpp"
#include "workloads/workload.hpp"

using namespace meshsim;
using namespace meshsim::calibrate;

namespace {

const char* kFull = R"({
  "meshsim_calibration": 1,
  "hardware": {"device": "NVIDIA H200", "gpus": 8, "cuda_runtime": "12.4", "nccl": "2.21.5", "nccl_algo": "Ring"},
  "hbm": {"latency_s": 4e-6, "bandwidth_bytes_per_s": 4.2e12, "points": 9, "rms_relative_residual": 0.01,
          "max_relative_residual": 0.02},
  "matmul": [{"dtype": "bf16", "launch_s": 5e-6, "flops_per_s": 7e14, "hbm_bytes_per_s": 3.9e12, "points": 30,
              "rms_relative_residual": 0.03, "max_relative_residual": 0.08}],
  "links": [{"level": "nvlink", "step_latency_s": 3.4e-6, "bandwidth_bytes_per_s": 3.7e11, "points": 40,
             "rms_relative_residual": 0.02, "max_relative_residual": 0.05}],
  "collectives": [{"kind": "all_reduce", "level": "nvlink", "ranks": 8, "step_latency_s": 3.3e-6,
                   "bandwidth_bytes_per_s": 3.6e11, "points": 20, "rms_relative_residual": 0.02,
                   "max_relative_residual": 0.04}]
})";

std::string error_of(const std::string& text) {
  try {
    parse_calibration(text, "cal.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("calibration: parse and write back", "[calibrate]") {
  const Calibration c = parse_calibration(kFull, "cal.json");
  CHECK(c.hardware.device == "NVIDIA H200");
  CHECK(c.hardware.gpus == 8);
  REQUIRE(c.hbm);
  CHECK(c.hbm->bandwidth_bytes_per_s == 4.2e12);
  REQUIRE(c.matmul_for("bf16"));
  CHECK(c.matmul_for("bf16")->flops_per_s == 7e14);
  CHECK(c.matmul_for("fp32") == nullptr);
  REQUIRE(c.link_for(Level::Nvlink));
  CHECK(c.link_for(Level::Nvlink)->step_latency_s == 3.4e-6);
  REQUIRE(c.collectives.size() == 1);
  CHECK(c.collectives[0].kind == OpKind::AllReduce);
  const Calibration again = parse_calibration(format_calibration(c), "again.json");
  CHECK(format_calibration(again) == format_calibration(c));
}

TEST_CASE("calibration: errors name the file and the JSON pointer", "[calibrate]") {
  CHECK(error_of("{") .find("cal.json:") == 0);
  CHECK(error_of(R"({"meshsim_calibration": 2, "hardware": {"device": "x", "gpus": 1}})") ==
        "cal.json:/meshsim_calibration: unsupported calibration version 2 (this meshsim reads version 1)");
  CHECK(error_of(R"({"meshsim_calibration": 1, "hardware": {"device": "x", "gpus": 1}, "hmb": {}})") ==
        "cal.json:/hmb: unknown key 'hmb' (expected one of: meshsim_calibration, hardware, hbm, matmul, links, "
        "collectives, fabric)");
  CHECK(error_of(R"({"meshsim_calibration": 1, "hardware": {"device": "x", "gpus": 1},
                     "matmul": [{"dtype": "bf17", "launch_s": 0, "flops_per_s": 1e12, "hbm_bytes_per_s": 1e12,
                                 "points": 3, "rms_relative_residual": 0, "max_relative_residual": 0}]})") ==
        "cal.json:/matmul/0/dtype: unknown dtype 'bf17' (expected bf16, fp16, fp32, int8 or fp8)");
  CHECK(error_of(R"({"meshsim_calibration": 1, "hardware": {"device": "x", "gpus": 1},
                     "links": [{"level": "nvlink", "step_latency_s": -1, "bandwidth_bytes_per_s": 1e12,
                                "points": 3, "rms_relative_residual": 0, "max_relative_residual": 0}]})") ==
        "cal.json:/links/0/step_latency_s: expected a non-negative number of seconds, got -1");
}

TEST_CASE("calibration: applied to a GPU workload's links, HBM and matmuls", "[calibrate]") {
  workloads::Workload w = workloads::parse_workload(R"({
    "hardware": "h200-dgx", "topology": {"nodes": 1}, "mesh": {"X": 8},
    "ops": [{"name": "ar", "kind": "all_reduce", "axes": ["X"], "bytes": 1048576}]})", "w.json");
  const Calibration c = parse_calibration(kFull, "cal.json");
  const std::vector<std::string> changes = apply_calibration(w, c);
  CHECK(changes.size() == 3);
  CHECK(w.hardware.nvlink.bandwidth_bytes_per_s == 370'000'000'000u);
  CHECK(w.hardware.nvlink.latency == tick_from_seconds(1.7e-6));  // half a step: up and down the switch
  CHECK(w.hardware.chip.hbm_bandwidth_bytes_per_s == 4.2e12);
  REQUIRE(w.hardware.calibrated_matmuls.size() == 1);
  CHECK(w.hardware.calibrated_matmuls[0].flops_per_s == 7e14);
}

TEST_CASE("calibration: fabric levels parse, write back and apply to the workload's hardware", "[calibration]") {
  const std::string text = R"({"meshsim_calibration": 1, "hardware": {"device": "tpu-v5e"},
    "fabric": [{"level": "ici", "preset": "tpu-v5e", "hop_latency_s": 1.5e-6, "hop_latency_fitted": false,
                "efficiency": 0.9, "efficiency_fitted": false,
                "fixed_cost_s": {"all_gather": 4e-6}, "standard_error": {"hop_latency_s": 1e-8, "efficiency": 0.001,
                "fixed_cost_s": {"all_gather": 1e-7}}, "points": 10, "rms_relative_residual": 0.01,
                "max_relative_residual": 0.02}]})";
  const Calibration c = parse_calibration(text, "cal.json");
  REQUIRE(c.fabric.size() == 1);
  CHECK(c.fabric[0].fixed_cost.size() == 1);
  CHECK(c.fabric[0].fixed_cost[0].error_s == 1e-7);
  CHECK_FALSE(c.fabric[0].hop_latency_fitted);
  CHECK_FALSE(c.fabric[0].efficiency_fitted);
  const Calibration again = parse_calibration(format_calibration(c), "again.json");
  CHECK(format_calibration(again) == format_calibration(c));
  CHECK_FALSE(again.fabric[0].efficiency_fitted);
  workloads::Workload w = workloads::parse_workload(
      R"({"hardware": "tpu-v5e", "mesh": {"x": 4}, "ops": [{"kind": "all_gather", "bytes": 1024, "axes": ["x"]}]})",
      "w.json");
  const std::uint64_t peak = w.hardware.ici.bandwidth_bytes_per_s;
  apply_calibration(w, c);
  CHECK(w.hardware.ici.bandwidth_bytes_per_s == static_cast<std::uint64_t>(std::llround(0.9 * static_cast<double>(peak))));
  CHECK(w.hardware.ici.latency == tick_from_seconds(1.5e-6));
  CHECK(w.hardware.fixed_cost_of(workloads::FabricLevel::Ici, OpKind::AllGather) == tick_from_seconds(4e-6));
  CHECK(w.hardware.fixed_cost_of(workloads::FabricLevel::Ici, OpKind::AllReduce) == kZeroTick);
  // A level both in "links" and in "fabric" is refused.
  CHECK_THROWS_WITH(parse_calibration(R"({"meshsim_calibration": 1, "hardware": {"device": "x"},
      "links": [{"level": "ici", "step_latency_s": 1e-6, "bandwidth_bytes_per_s": 1e10, "points": 3,
                 "rms_relative_residual": 0, "max_relative_residual": 0}],
      "fabric": [{"level": "ici", "preset": "tpu-v5e", "hop_latency_s": 1e-6, "efficiency": 1, "fixed_cost_s": {},
                  "points": 3, "rms_relative_residual": 0, "max_relative_residual": 0}]})",
                                      "cal.json"),
                    "cal.json:/fabric/0/level: level ici is given both in \"links\" and here: keep one");
}

TEST_CASE("calibration: a fitted link bandwidth is its level's new peak; other levels keep their efficiency",
          "[calibration]") {
  const Calibration c = parse_calibration(R"({"meshsim_calibration": 1, "hardware": {"device": "x", "gpus": 8},
      "links": [{"level": "nic", "step_latency_s": 1e-5, "bandwidth_bytes_per_s": 4e10, "points": 3,
                 "rms_relative_residual": 0, "max_relative_residual": 0}]})",
                                          "cal.json");
  workloads::Workload w = workloads::parse_workload(
      R"({"hardware": {"preset": "h100-dgx", "nvlink_efficiency": 0.9, "nic_efficiency": 0.5}, "mesh": {"X": 8},
          "ops": [{"kind": "all_gather", "bytes": 1024, "axes": ["X"]}]})",
      "w.json");
  const std::uint64_t nvlink = w.hardware.nvlink.bandwidth_bytes_per_s;
  CHECK(nvlink == static_cast<std::uint64_t>(std::llround(0.9 * static_cast<double>(w.hardware.peak.nvlink))));
  apply_calibration(w, c);
  CHECK(w.hardware.nvlink.bandwidth_bytes_per_s == nvlink);  // untouched: not 0.9 x 0.9
  CHECK(w.hardware.nic.bandwidth_bytes_per_s == 40'000'000'000);  // the fitted rate, at full efficiency
  CHECK(w.hardware.link_efficiency[static_cast<std::size_t>(workloads::FabricLevel::Nic)] == 1.0);
}
