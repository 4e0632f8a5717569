// Simulated training steps against their closed forms: the pipeline bubble of
// GPipe, 1F1B and interleaved 1F1B with communication made negligible, a
// tensor-parallel step with compute made negligible, and the overlap switches
// moving the step between the sum and the max of compute and communication.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "driver/simulate.hpp"
#include "reports/training_report.hpp"
#include "workloads/workload.hpp"

using namespace meshsim;

namespace {

struct Step {
  workloads::Workload w;
  driver::RunResult run;
  reports::TrainingResult result;
};

Step simulate(const std::string& text) {
  Step s{workloads::parse_workload(text, "t.json"), {}, {}};
  s.run = driver::simulate(s.w);
  s.result = reports::training_result(s.w, s.run);
  return s;
}

// Links ten thousand times faster than v5p's, no hop latency: communication negligible.
const char* kFastLinks = R"({"preset": "tpu-v5p", "ici_bandwidth_one_way_bytes_per_s": 1e15, "hop_latency_s": 0})";
// Compute and HBM thousands of times faster: computation negligible.
const char* kFastChips = R"({"preset": "tpu-v5p", "bf16_flops_per_s": 1e20, "hbm_bandwidth_bytes_per_s": 1e16})";

std::string model(std::uint64_t layers, std::uint64_t vocab = 8) {
  return R"({"layers": )" + std::to_string(layers) + R"(, "d_model": 1024, "heads": 8, "ffn": 4096, "vocab": )" +
         std::to_string(vocab) + R"(, "seq_len": 1024})";
}

std::string pipeline(const std::string& schedule, std::uint64_t p, std::uint64_t m, std::uint64_t layers) {
  return std::string(R"({"hardware": )") + kFastLinks + R"(, "mesh": {"P": )" + std::to_string(p) +
         R"(}, "training": {"model": )" + model(layers) + R"(, "global_batch": )" + std::to_string(m) +
         R"(, "parallelism": {"pipeline": "P", )" + schedule + "}}}";
}

Tick total(const Step& s, workloads::Role role) {
  Tick t;
  for (std::size_t i = 0; i < s.w.ops.size(); ++i)
    if (s.w.ops[i].site.role == role) t = t + s.run.ops[i].time();
  return t;
}

// The pipeline's pace is its slowest stage's compute; the optimizer step after
// the last backward is outside the bubble formula.
double bubble_ratio(const Step& s) {
  Tick slowest, optimizer;
  for (const reports::StageBreakdown& b : s.result.stages) {
    slowest = max(slowest, b.compute);
    optimizer = max(optimizer, b.optimizer);
  }
  return (s.result.step - optimizer).seconds() / slowest.seconds();
}

}  // namespace

TEST_CASE("Training step: 1F1B and GPipe take (m + p - 1) / m of the ideal compute time", "[training]") {
  for (const char* schedule : {R"("schedule": "1f1b")", R"("schedule": "gpipe")"}) {
    for (const auto& [p, m] : {std::pair{4u, 8u}, std::pair{4u, 16u}, std::pair{2u, 8u}}) {
      INFO(schedule << " p = " << p << ", m = " << m);
      const Step s = simulate(pipeline(schedule, p, m, 8));
      CHECK(s.w.training->microbatches == static_cast<std::uint64_t>(m));
      CHECK(bubble_ratio(s) == Approx(static_cast<double>(m + p - 1) / m).epsilon(0.01));
    }
  }
}

TEST_CASE("Training step: interleaved 1F1B takes (m + (p - 1)/v) / m of the ideal compute time", "[training]") {
  for (const auto& [p, m, v] : {std::tuple{4u, 8u, 2u}, std::tuple{4u, 8u, 4u}, std::tuple{2u, 4u, 2u}}) {
    INFO("p = " << p << ", m = " << m << ", v = " << v);
    const Step s = simulate(pipeline(R"("schedule": "interleaved", "virtual_stages": )" + std::to_string(v), p, m, 16));
    CHECK(bubble_ratio(s) == Approx((m + static_cast<double>(p - 1) / v) / m).epsilon(0.01));
  }
}

TEST_CASE("Training step: uneven stages, paced by the slowest stage, fill and drain through the others", "[training]") {
  // Layer counts per model chunk (in layer order), p stages of v chunks each.
  struct Case {
    const char* schedule;
    std::uint64_t p, m, v, layers;
    const char* plan;
    std::vector<std::uint64_t> chunks;
  };
  const Case cases[] = {
      {"1f1b", 4, 8, 1, 10, R"("stage_layers": [1, 3, 2, 4])", {1, 3, 2, 4}},
      {"gpipe", 4, 8, 1, 10, R"("stage_layers": [2, 1, 3, 4])", {2, 1, 3, 4}},
      {"1f1b", 4, 8, 1, 10, R"("stage_layers": [1, 3, 4, 2])", {1, 3, 4, 2}},
      {"1f1b", 4, 16, 1, 14, R"("first_stage_layers": 2, "last_stage_layers": 2)", {2, 5, 5, 2}},
      {"1f1b", 4, 8, 1, 14, R"("sharded_optimizer": false)", {3, 4, 4, 3}},  // the default split of 14 layers
      {"interleaved", 4, 8, 2, 14, R"("virtual_stages": 2)", {1, 2, 2, 2, 2, 2, 2, 1}},
  };
  for (const Case& c : cases) {
    INFO(c.schedule << " p = " << c.p << ", m = " << c.m << ", v = " << c.v << ", " << c.plan);
    const Step s =
        simulate(pipeline(std::string(R"("schedule": ")") + c.schedule + R"(", )" + c.plan, c.p, c.m, c.layers));
    CHECK(s.w.training->plan.chunk_layers == c.chunks);
    std::vector<std::uint64_t> stage(c.p, 0);
    for (std::uint64_t g = 0; g < c.p * c.v; ++g) stage[g % c.p] += c.chunks[g];
    const auto slowest = static_cast<std::uint64_t>(std::max_element(stage.begin(), stage.end()) - stage.begin());
    std::uint64_t before = 0;
    for (std::uint64_t st = 0; st < slowest; ++st) before += stage[st];
    const double m = static_cast<double>(c.m), most = static_cast<double>(stage[slowest]);
    const double rest = static_cast<double>(c.layers) - most;
    // Up to the end of the last backward pass (the optimizer steps follow).
    Tick last_backward;
    for (std::size_t i = 0; i < s.w.ops.size(); ++i)
      if (s.w.ops[i].site.pass == workloads::StepSite::Pass::Backward)
        last_backward = max(last_backward, s.run.ops[i].end);
    const double ratio = last_backward.seconds() / s.result.stages[slowest].compute.seconds();
    if (c.v == 1) {
      // The slowest stage computes m microbatches; the first waits for the
      // stages before it to forward it, the last's gradient for them to pass it
      // back: (m L_k + L_<k) / (m L_k) at least, (m L_k + L - L_k) / (m L_k)
      // (1F1B's (m + p - 1) / m generalised) at most, both when k is the last.
      CHECK(ratio >= (m * most + static_cast<double>(before)) / (m * most) * (1 - 1e-3));
      CHECK(ratio <= (m * most + rest) / (m * most) * (1 + 1e-3));
      if (slowest + 1 == c.p) CHECK(ratio == Approx((m * most + rest) / (m * most)).epsilon(0.01));
    } else {
      // Interleaved: the fill and drain cross chunks of the other stages.
      CHECK(ratio > 1);
      CHECK(ratio <= (m * most + rest) / (m * most));
    }
  }
}

TEST_CASE("Training step: with compute negligible, a TP step takes its collectives' simulated time", "[training]") {
  const Step s = simulate(std::string(R"({"hardware": )") + kFastChips + R"(, "mesh": {"T": 8}, "training": {"model": )" +
                          model(2) + R"(, "global_batch": 2, "parallelism": {"tensor": ["T"]}}})");
  const Tick tensor = total(s, workloads::Role::Tensor);
  const Tick compute = s.result.stages[0].compute + s.result.stages[0].optimizer;
  INFO("step " << s.result.step.seconds() << " s, tensor collectives " << tensor.seconds() << " s, compute "
               << compute.seconds() << " s");
  CHECK(compute.seconds() < 1e-3 * tensor.seconds());
  CHECK(s.result.step.seconds() == Approx((tensor + compute).seconds()).epsilon(1e-9));
  CHECK(s.result.stages[0].tensor == tensor);
}

TEST_CASE("Training step: overlapping the gradient reduction moves the step from the sum towards the max", "[training]") {
  // Data parallel over 8 chips of a slow line: the reductions are as long as the compute.
  const auto text = [](bool overlap) {
    return std::string(R"({"hardware": {"preset": "tpu-v5p", "ici_bandwidth_one_way_bytes_per_s": 2e9},
      "mesh": {"D": 8}, "training": {"model": )") + model(8, 1024) +
           R"(, "global_batch": 8, "parallelism": {"data": ["D"]}, "overlap": {"gradient_reduction": )" +
           (overlap ? "true" : "false") + "}}}";
  };
  const Step serial = simulate(text(false)), overlapped = simulate(text(true));
  const Tick compute = serial.result.stages[0].compute + serial.result.stages[0].optimizer;
  const Tick data = total(serial, workloads::Role::Data);
  INFO("compute " << compute.seconds() << " s, data " << data.seconds() << " s, serial "
                  << serial.result.step.seconds() << " s, overlapped " << overlapped.result.step.seconds() << " s");
  CHECK(serial.result.step.seconds() == Approx((compute + data).seconds()).epsilon(1e-6));
  CHECK(overlapped.result.step < serial.result.step);
  CHECK(overlapped.result.step >= max(compute, data));
  // All but the last layer's reduction hides under the backward pass.
  CHECK(overlapped.result.stages[0].data < data);
}

TEST_CASE("Training step: FSDP prefetch hides the weight gathers behind the previous layer", "[training]") {
  const auto text = [](bool prefetch) {
    return std::string(R"({"hardware": {"preset": "tpu-v5p", "ici_bandwidth_one_way_bytes_per_s": 2e10},
      "mesh": {"F": 8}, "training": {"model": )") + model(8, 1024) +
           R"(, "global_batch": 8, "parallelism": {"fsdp": ["F"]}, "overlap": {"fsdp_prefetch": )" +
           (prefetch ? "true" : "false") + "}}}";
  };
  const Step serial = simulate(text(false)), prefetched = simulate(text(true));
  INFO("serial " << serial.result.step.seconds() << " s (exposed fsdp " << serial.result.stages[0].fsdp.seconds()
                 << " s), prefetched " << prefetched.result.step.seconds() << " s (exposed fsdp "
                 << prefetched.result.stages[0].fsdp.seconds() << " s)");
  CHECK(prefetched.result.step < serial.result.step);
  CHECK(prefetched.result.stages[0].fsdp < serial.result.stages[0].fsdp);
  // Without prefetch every gather is exposed: the step is compute plus all of them.
  const Tick gathers = total(serial, workloads::Role::Fsdp);
  CHECK(serial.result.stages[0].fsdp.seconds() <= gathers.seconds());
}

TEST_CASE("Training step: the breakdown adds up to the step and MFU is model FLOPs over peak", "[training]") {
  const Step s = simulate(std::string(R"({"hardware": "tpu-v5p", "topology": {"shape": [2, 2, 2]},
    "mesh": {"P": 2, "T": 2, "D": 2}, "training": {"model": )") + model(4, 1024) +
                          R"(, "global_batch": 8, "parallelism": {"pipeline": "P", "tensor": ["T"], "data": ["D"],
    "sequence_parallel": true}}})");
  for (const reports::StageBreakdown& b : s.result.stages)
    CHECK(b.compute + b.tensor + b.expert + b.context + b.fsdp + b.data + b.pipeline + b.optimizer + b.idle ==
          s.result.step);
  CHECK(s.result.mfu == Approx(s.result.model_flops / (s.result.step.seconds() * 8 * 4.59e14)));
  CHECK(s.result.mfu > 0);
  CHECK(s.result.mfu < 1);
}

TEST_CASE("Training step: collective matmuls hide the sequence-parallel collectives under the GEMMs", "[training]") {
  // TP 4 with sequence parallelism on a ring of 4 v5p chips, GEMMs large
  // enough that each part's multiplication outlasts a ring step.
  const auto text = [](bool overlap) {
    return std::string(R"({"hardware": "tpu-v5p", "topology": {"shape": [4], "wraparound": true},
      "mesh": {"T": 4}, "training": {"model": {"layers": 2, "d_model": 8192, "heads": 64, "ffn": 32768, "vocab": 1024,
      "seq_len": 2048}, "global_batch": 1, "allow_oom": true, "parallelism": {"tensor": ["T"], "sequence_parallel": true},
      "overlap": {"tensor": )") + (overlap ? "true" : "false") + "}}}";
  };
  const Step serial = simulate(text(false)), overlapped = simulate(text(true));
  const Tick compute = serial.result.stages[0].compute + serial.result.stages[0].optimizer;
  const Tick tensor = total(serial, workloads::Role::Tensor);
  INFO("compute " << compute.seconds() << " s, tensor collectives " << tensor.seconds() << " s, serial "
                  << serial.result.step.seconds() << " s, overlapped " << overlapped.result.step.seconds()
                  << " s (exposed tensor " << overlapped.result.stages[0].tensor.seconds() << " s)");
  // Without overlap every collective is on the critical path: the sum.
  CHECK(serial.result.step.seconds() == Approx((compute + tensor).seconds()).epsilon(1e-6));
  CHECK(serial.result.stages[0].tensor == tensor);
  // With it, most of each collective runs under a GEMM part: towards the max.
  CHECK(overlapped.result.step < serial.result.step);
  CHECK(overlapped.result.stages[0].tensor.seconds() < 0.5 * tensor.seconds());
  CHECK(overlapped.result.step >= compute);
}
