// Measurements, fits and comparisons without a GPU: synthetic measurements from
// a known model go through the same code as real ones.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>

#include "base/error.hpp"
#include "calibrate/fit.hpp"
#include "driver/simulate.hpp"
#include "replay/hardware.hpp"
#include "workloads/workload.hpp"

using namespace meshsim;
using namespace meshsim::replay;

namespace {

const std::string kSource = MESHSIM_SOURCE_DIR;

// A made-up device: t = 6 us + F / 650 TFLOP/s + B / 3.5 TB/s for bf16 GEMMs,
// copies at 4.0 TB/s after 3 us, NVLink steps of 3 us at 360 GB/s after NCCL's base latency.
double gemm_time(std::uint64_t m, std::uint64_t n, std::uint64_t k) {
  const calibrate::MatmulPoint p{m, k, n, 2, 0};
  return 6e-6 + calibrate::matmul_flops(p) / 6.5e14 + calibrate::matmul_hbm_bytes(p) / 3.5e12;
}

Measurements synthetic_suite() {
  std::mt19937_64 rng(99);
  std::normal_distribution<double> noise(0.0, 0.01);
  auto spread = [&](double t) {
    const double m = t * (1 + noise(rng));
    return Spread{m, m * 0.99, m * 1.01};
  };
  Measurements m;
  m.suite = true;
  m.file = "suite.json";
  m.hardware.device = "NVIDIA H200";
  m.hardware.gpus = 8;
  m.hardware.sms = 132;  // the fit gets the wave column too; the smooth truth leaves it unused
  for (std::uint64_t a : {128u, 1024u, 4096u, 8192u})
    for (std::uint64_t b : {128u, 1024u, 4096u, 8192u})
      for (std::uint64_t c : {128u, 1024u, 8192u}) m.gemm.push_back({"bf16", a, b, c, false, spread(gemm_time(a, b, c))});
  for (const auto& [a, b, c] : std::vector<std::array<std::uint64_t, 3>>{{3072, 3072, 3072}, {1536, 6144, 768}, {64, 6144, 6144}})
    m.gemm.push_back({"bf16", a, b, c, true, spread(gemm_time(a, b, c))});
  for (std::uint64_t bytes = 4096; bytes <= (1u << 30); bytes *= 4)
    m.copy.push_back({bytes, spread(3e-6 + 2.0 * static_cast<double>(bytes) / 4e12)});
  for (OpKind kind : {OpKind::AllGather, OpKind::AllReduce})
    for (std::uint64_t bytes = 1 << 12; bytes <= (1u << 30); bytes *= 4) {
      const calibrate::RingTerms t = calibrate::ring_terms(kind, 8, bytes);
      // What NCCL would report choosing: LL for the small sizes, SIMPLE for the
      // large; its base latency (6.6 and 8.4 us) comes first, which the fit is
      // told of and leaves to the simulation.
      const bool ll = bytes < (1u << 20);
      m.collectives.push_back({kind, 8, bytes, spread((ll ? 6.6e-6 : 8.4e-6) + t.steps * 3e-6 + t.wire_bytes / 3.6e11),
                               {"RING", ll ? "LL" : "SIMPLE"}});
    }
  return m;
}

}  // namespace

TEST_CASE("hardware: a suite's fit, its file round trip and the held-out comparison", "[replay]") {
  const Measurements m = synthetic_suite();
  std::vector<std::string> not_fitted;
  const calibrate::Calibration cal = fit_suite(m, not_fitted);
  CHECK(not_fitted.empty());
  REQUIRE(cal.matmul_for("bf16"));
  CHECK(cal.matmul_for("bf16")->flops_per_s == Approx(6.5e14).epsilon(0.02));
  CHECK(cal.matmul_for("bf16")->sms == 132);
  REQUIRE(cal.hbm);
  CHECK(cal.hbm->bandwidth_bytes_per_s == Approx(4e12).epsilon(0.02));
  REQUIRE(cal.link_for(calibrate::Level::Nvlink));
  CHECK(cal.link_for(calibrate::Level::Nvlink)->step_latency_s == Approx(3e-6).epsilon(0.02));
  CHECK(cal.link_for(calibrate::Level::Nvlink)->bandwidth_bytes_per_s == Approx(3.6e11).epsilon(0.02));
  CHECK(cal.collectives.size() == 2);

  const Measurements again = parse_measurements(format_measurements(m), "suite.json");
  CHECK(format_measurements(again) == format_measurements(m));

  const std::string table = format_comparison(again, &cal, "");
  CHECK(table.find("before: the h200-dgx preset") != std::string::npos);
  CHECK(table.find("gemm bf16 M=3072 N=3072 K=3072               holdout") != std::string::npos);
  // The held-out GEMMs come out within the noise after calibration.
  const auto at = table.find("median absolute error, held out (3 rows): before ");
  REQUIRE(at != std::string::npos);
  const std::string line = table.substr(at, table.find('\n', at) - at);
  const double after = std::stod(line.substr(line.find("after ") + 6));
  CHECK(after < 2.0);
}

TEST_CASE("hardware: a fit the points cannot determine is named and left out; the others stand", "[replay]") {
  Measurements m = synthetic_suite();
  // Two fp8 GEMMs (the rest refused on the GPU): too few for the matmul model.
  m.gemm.push_back({"fp8", 4096, 4096, 4096, false, Spread{1e-4, 1e-4, 1e-4}});
  m.gemm.push_back({"fp8", 8192, 8192, 8192, false, Spread{7e-4, 7e-4, 7e-4}});
  std::vector<std::string> not_fitted;
  const calibrate::Calibration cal = fit_suite(m, not_fitted);
  REQUIRE(not_fitted.size() == 1);
  CHECK(not_fitted[0].rfind("fp8 GEMMs: ", 0) == 0);
  CHECK(not_fitted[0].find("cannot determine") != std::string::npos);
  CHECK(cal.matmul_for("fp8") == nullptr);
  REQUIRE(cal.matmul_for("bf16"));
  CHECK(cal.matmul_for("bf16")->flops_per_s == Approx(6.5e14).epsilon(0.02));
  CHECK(cal.hbm);
  CHECK(cal.collectives.size() == 2);
}

TEST_CASE("hardware: run with a calibration: matmuls take the fitted time, links the fitted rates", "[replay]") {
  workloads::Workload w = workloads::load_workload(kSource + "/examples/mlp_2x2_v5e.json");
  std::vector<std::string> not_fitted;
  const calibrate::Calibration cal = fit_suite(synthetic_suite(), not_fitted);
  CHECK(not_fitted.empty());
  calibrate::apply_calibration(w, cal);
  const driver::RunResult r = driver::simulate(w);
  // mlp.up.matmul: M=256 N=2048 K=1024 bf16 on every chip.
  const calibrate::MatmulFit& f = *cal.matmul_for("bf16");
  const calibrate::MatmulPoint p{256, 1024, 2048, 2, 0};
  CHECK(r.ops[0].time() == tick_from_seconds(f.time_s(p.m, p.k, p.n, p.element_bytes)));

  // An 8-GPU ring all-reduce of 1 GiB with the fitted NVLink: the closed form
  // 2(N-1) a + 2(N-1)/N V / B with the fitted a and B.
  workloads::Workload g = workloads::parse_workload(R"({
    "hardware": "h200-dgx", "topology": {"nodes": 1}, "mesh": {"X": 8},
    "ops": [{"name": "ar", "kind": "all_reduce", "axes": ["X"], "bytes": 1073741824, "algorithm": "ring"}]})",
                                                    "w.json");
  calibrate::apply_calibration(g, cal);
  const calibrate::LinkFit& l = *cal.link_for(calibrate::Level::Nvlink);
  const calibrate::RingTerms t = calibrate::ring_terms(OpKind::AllReduce, 8, 1u << 30);
  const double expected = t.steps * l.step_latency_s + t.wire_bytes / l.bandwidth_bytes_per_s;
  CHECK(driver::simulate(g).ops[0].time().seconds() == Approx(expected).epsilon(0.01));
}

TEST_CASE("hardware: measurement files are validated like workloads", "[replay]") {
  auto error_of = [](const std::string& text) {
    try {
      parse_measurements(text, "m.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(error_of(R"({"kind": "replays"})") == "m.json:/kind: unknown measurements kind 'replays' (expected suite or replay)");
  CHECK(error_of(R"({"kind": "replay", "workload": "w.json", "extra": 1})").find("m.json:/extra: unknown key 'extra'") == 0);
  // What NCCL chose: both names or neither, never empty.
  const std::string good = format_measurements(synthetic_suite());
  REQUIRE(error_of(good) == "no error");
  std::string one = good;
  const auto at = one.find("\"nccl_algorithm\": \"RING\",");
  REQUIRE(at != std::string::npos);
  one.erase(at, one.find("\"nccl_protocol\"", at) - at);
  CHECK(error_of(one) == "m.json:/collectives/0: expected both nccl_algorithm and nccl_protocol, or neither");
  std::string empty = good;
  const auto p = empty.find("\"nccl_protocol\": \"LL\"");
  REQUIRE(p != std::string::npos);
  empty.replace(p, std::string("\"nccl_protocol\": \"LL\"").size(), "\"nccl_protocol\": \"\"");
  CHECK(error_of(empty) == "m.json:/collectives/0/nccl_protocol: expected NCCL's protocol name");
  // A time taken without the gate: "ungated": true, a boolean, only beside a time.
  Measurements suite = synthetic_suite();
  suite.collectives[0].time.gated = false;
  const std::string ungated = format_measurements(suite);
  CHECK(ungated.find("\"ungated\": true") != std::string::npos);
  CHECK(format_measurements(parse_measurements(ungated, "m.json")) == ungated);
  CHECK_FALSE(parse_measurements(ungated, "m.json").collectives[0].time.gated);
  CHECK(parse_measurements(ungated, "m.json").collectives[1].time.gated);
  std::string not_bool = ungated;
  not_bool.replace(not_bool.find("\"ungated\": true"), std::string("\"ungated\": true").size(), "\"ungated\": 1");
  CHECK(error_of(not_bool).find("m.json:/collectives/0/ungated: ") == 0);
  CHECK(error_of(R"({"meshsim_measurements": 1, "kind": "replay", "workload": "w.json",
                     "hardware": {"device": "d", "gpus": 1, "cuda_runtime": "", "nccl": "", "nccl_algo": "",
                                  "nccl_proto": ""},
                     "warmups": 1, "repetitions": 1, "skipped": [],
                     "ops": [{"op": 0, "name": "a", "kind": "matmul", "ranks": 1, "ranks_replayed": 0,
                              "ungated": true}]})") == "m.json:/ops/0/ungated: expected only with a time (median_s)");
  // spread_of a Timing keeps whether it was gated.
  CHECK(spread_of(kernels::cuda::Timing{{2e-6, 1e-6, 3e-6}, true}).gated);
  const Spread s = spread_of(kernels::cuda::Timing{{2e-6, 1e-6, 3e-6}, false});
  CHECK_FALSE(s.gated);
  CHECK(s.median_s == 2e-6);
}

TEST_CASE("hardware: without a GPU the probe says why, and a session refuses plainly", "[replay]") {
  const kernels::cuda::Probe p = kernels::cuda::probe();
  if (p.gpus == 0) {
    CHECK_FALSE(p.problem.empty());
    CHECK(p.problem.find('\n') == std::string::npos);
  } else {
    CHECK(p.problem.empty());  // on a GPU machine: nothing to refuse
  }
  if (!kernels::cuda::built_with_cuda()) CHECK_THROWS_AS(kernels::cuda::Session(1), Error);
}

TEST_CASE("hardware: a replay's measurements file and trace", "[replay]") {
  const workloads::Workload w = workloads::load_workload(kSource + "/examples/mlp_2x2_v5e.json");
  Measurements m;
  m.file = "m.json";
  m.workload = w.file;
  m.hardware.device = "NVIDIA H200";
  m.hardware.gpus = 2;
  const std::vector<OpStep> steps = device_steps(w, make_plan(w), 2);
  for (const OpStep& s : steps) {
    OpMeasurement o = measurement_of(w, s);
    if (!s.calls.empty()) o.time = spread_of({3e-6, 1e-6, 2e-6});
    m.ops.push_back(o);
  }
  CHECK(m.ops[0].time->median_s == 2e-6);
  CHECK(m.ops[0].time->min_s == 1e-6);
  CHECK(m.ops[0].time->max_s == 3e-6);
  CHECK_FALSE(m.ops[2].time);
  const std::string text = format_measurements(m);
  CHECK(format_measurements(parse_measurements(text, "m.json")) == text);

  const std::string trace = format_replay_trace(w, m);
  CHECK(trace.find(R"x("args":{"name":"chip (0,0)"})x") != std::string::npos);
  CHECK(trace.find(R"x("args":{"name":"chip (1,0)"})x") != std::string::npos);
  CHECK(trace.find("chip (0,1)") == std::string::npos);  // no GPU for chip 2
  CHECK(trace.find(R"x({"ph":"X","pid":2,"tid":1,"ts":2.0,"dur":2.0,"name":"mlp.down.matmul","cat":"matmul")x") != std::string::npos);
  CHECK(trace.find("mlp.down.all_reduce") == std::string::npos);  // not replayed
}
