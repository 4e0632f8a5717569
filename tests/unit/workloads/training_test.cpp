// Training steps, without simulating: the lowered matmuls' FLOPs against the
// published closed forms (Narayanan et al. 2021, eq. 3; PaLM's 6N + 12LHQT),
// parameters, Korthikanti et al. 2022's activation bytes (Table 2), the ZeRO
// byte counts and the pipeline schedules' orders and memory.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "workloads/training_formulas.hpp"
#include "workloads/workload.hpp"

using namespace meshsim;
using namespace meshsim::workloads;
using U = unsigned __int128;

namespace {

// A GPT-style model (MHA, FFN 4h, dropout, biases, tied embeddings, learned
// positions: what the published formulas assume), on a v5p mesh.
std::string gpt(const std::string& mesh, const std::string& plan, const std::string& extra = "",
                std::uint64_t layers = 8, std::uint64_t batch = 16) {
  return R"({"hardware": "tpu-v5p", "mesh": )" + mesh + R"(, "training": {
    "model": {"layers": )" + std::to_string(layers) + R"(, "d_model": 512, "heads": 8, "ffn": 2048, "vocab": 1024,
              "seq_len": 256, "tied_embeddings": true, "learned_positions": true, "dropout": true, "biases": true},
    "global_batch": )" + std::to_string(batch) + R"(, "microbatch": 1, "causal": false, "parallelism": )" + plan + extra +
         "}}";
}

const Training& training(const Workload& w) {
  REQUIRE(w.training);
  return *w.training;
}

// Narayanan et al. eq. 3: 72 B s L h^2 (1 + s/(6h) + V/(12 L h)) per iteration,
// 96 ... (1 + s/(6h) + V/(16 L h)) with full recompute; as integers.
U narayanan(U B, U s, U L, U h, U V, bool recompute) {
  return recompute ? 96 * B * s * L * h * h + 16 * B * L * s * s * h + 6 * B * s * h * V
                   : 72 * B * s * L * h * h + 12 * B * L * s * s * h + 6 * B * s * h * V;
}

}  // namespace

TEST_CASE("Training FLOPs: the lowered matmuls equal Narayanan's closed form exactly", "[training]") {
  const U B = 16, s = 256, L = 8, h = 512, V = 1024;
  struct Case {
    const char* mesh;
    const char* plan;
  };
  for (const Case& c : {Case{R"({"D": 4})", R"({"data": ["D"]})"},
                        Case{R"({"D": 2, "T": 2})", R"({"data": ["D"], "tensor": ["T"]})"},
                        Case{R"({"T": 4})", R"({"tensor": ["T"], "sequence_parallel": true})"},
                        Case{R"({"F": 2, "P": 2})", R"({"fsdp": ["F"], "pipeline": "P"})"},
                        Case{R"({"P": 2, "T": 2})", R"({"pipeline": "P", "schedule": "interleaved", "virtual_stages": 2, "tensor": ["T"]})"}}) {
    INFO(c.mesh << " " << c.plan);
    const Workload w = parse_workload(gpt(c.mesh, c.plan), "t.json");
    const Training& t = training(w);
    CHECK(t.lowered_model_flops == narayanan(B, s, L, h, V, false));
    CHECK(t.lowered_hardware_flops == t.lowered_model_flops);
    CHECK(step_flops(t).model == t.lowered_model_flops);
  }
  SECTION("full recompute counts the forward twice in hardware FLOPs only") {
    const Workload w = parse_workload(gpt(R"({"T": 2})", R"({"tensor": ["T"]})", R"(, "recompute": "full")"), "t.json");
    CHECK(training(w).lowered_model_flops == narayanan(B, s, L, h, V, false));
    CHECK(training(w).lowered_hardware_flops == narayanan(B, s, L, h, V, true));
    CHECK(step_flops(training(w)).hardware == narayanan(B, s, L, h, V, true));
  }
  SECTION("selective recompute adds the attention cores' forward: 4 B s^2 h per layer") {
    const Workload w = parse_workload(gpt(R"({"T": 2})", R"({"tensor": ["T"]})", R"(, "recompute": "selective")"), "t.json");
    CHECK(training(w).lowered_hardware_flops == narayanan(B, s, L, h, V, false) + 4 * B * s * s * h * L);
  }
}

TEST_CASE("Training FLOPs: causal attention halves the s^2 terms (PaLM's 12 L H Q T, halved)", "[training]") {
  std::string text = gpt(R"({"D": 2})", R"({"data": ["D"]})");
  text.replace(text.find(R"("causal": false)"), 15, R"("causal": true)");
  const Workload w = parse_workload(text, "t.json");
  const U B = 16, s = 256, L = 8, h = 512, V = 1024;
  // 6 N_matmul per token (N_matmul = 12 L h^2 + V h) + 12 L H Q (s/2) per token.
  const U tokens = B * s, n_matmul = 12 * L * h * h + V * h;
  CHECK(training(w).lowered_model_flops == 6 * n_matmul * tokens + 12 * L * h * (s / 2) * tokens);
}

TEST_CASE("Training FLOPs: GQA and SwiGLU (LLaMA-3-8B's shape) match 6N + attention exactly", "[training]") {
  const Workload w = parse_workload(R"({"hardware": "tpu-v5p", "mesh": {"T": 4, "P": 2}, "training": {
    "model": {"preset": "llama3-8b", "layers": 4, "seq_len": 512}, "global_batch": 4,
    "parallelism": {"tensor": ["T"], "pipeline": "P"}, "allow_oom": true}})", "t.json");
  const Training& t = training(w);
  const U h = 4096, kv = 8 * 128, ffn = 14336, L = 4, V = 128256, s = 512, tokens = 4 * s;
  const U n_matmul = L * (h * h + 2 * h * kv + h * h + 3 * h * ffn) + V * h;  // the head; the embedding is a lookup
  CHECK(t.lowered_model_flops == 6 * n_matmul * tokens + 12 * L * 32 * 128 * (s / 2) * tokens);
  // Parameters: the layers, the untied embedding and head, the final RMSNorm.
  CHECK(t.formulas.parameters == L * (h * h + 2 * h * kv + h * h + 3 * h * ffn + 2 * h) + 2 * V * h + h);
}

TEST_CASE("Training: tensor parallelism past the KV heads replicates them (parameters, FLOPs, memory, reductions)",
          "[training]") {
  // A GQA model of 8 heads, 2 KV heads, head_dim 64, SwiGLU; tensor parallelism of 8.
  const auto step = [](const std::string& mesh, const std::string& plan, const std::string& recompute = "none") {
    return parse_workload(R"({"hardware": "tpu-v5p", "mesh": )" + mesh + R"(, "training": {
      "model": {"layers": 2, "d_model": 512, "heads": 8, "kv_heads": 2, "ffn": 1024, "gated": true, "vocab": 1024,
                "seq_len": 256}, "global_batch": 4, "recompute": ")" +
                              recompute + R"(", "parallelism": )" + plan + "}}",
                          "t.json");
  };
  const U L = 2, h = 512, a = 8, g = 2, d = 64, f = 1024, V = 1024, s = 256, tokens = 4 * s, tp = 8, r = tp / g;
  const Workload w = step(R"({"T": 8})", R"({"tensor": ["T"]})");
  const Training& t = training(w);
  CHECK(t.kv_replicas == 4);
  CHECK(t.kv_heads_per_chip() == 1);
  // The model's parameters and FLOPs are the unreplicated model's.
  const Workload dp = step(R"({"D": 4})", R"({"data": ["D"]})");
  CHECK(t.formulas.parameters == training(dp).formulas.parameters);
  CHECK(t.formulas.parameters == L * (h * (a + 2 * g) * d + a * d * h + 3 * h * f + 2 * h) + 2 * V * h + h);
  CHECK(t.lowered_model_flops == training(dp).lowered_model_flops);
  CHECK(t.lowered_model_flops == step_flops(t).model);
  // The hardware's: every replica projects its keys and values, 6 FLOPs per
  // weight and token (8 when full recompute runs the forward pass again).
  const U replicas_kv = (r - 1) * 2 * h * g * d * L;
  CHECK(t.lowered_hardware_flops == t.lowered_model_flops + 6 * replicas_kv * tokens);
  CHECK(step_flops(t).hardware == t.lowered_hardware_flops);
  const Workload full = step(R"({"T": 8})", R"({"tensor": ["T"]})", "full");
  CHECK(training(full).lowered_hardware_flops == step_flops(training(full)).hardware);
  CHECK(step_flops(training(full)).hardware - step_flops(training(full)).model ==
        step_flops(training(full)).model / 3 - 2 * V * h * tokens + 8 * replicas_kv * tokens);
  // A chip holds its query heads' share, one whole KV head, and its FFN share.
  CHECK(stage_params(t, 0).per_chip ==
        L * ((h * (a / tp + 2) * d + a / tp * d * h + 3 * h * f / tp) + 2 * h) + 2 * V * h / tp + h);
  CHECK(activation_bytes(t, false).inside ==
        (2 * tokens / 4 * (a * d + 2 * g * r * d + a * d) + 2 * tokens / 4 * (2 * f + f)) / tp);
  // Each layer's K/V gradients summed over a head's 4 replicas, every
  // microbatch: 2 x 1 x 64 x 512 weights of 2 bytes; 2 groups of 4 chips along T.
  std::size_t reductions = 0;
  for (const Op& op : w.ops) {
    if (!op.name.ends_with("kv_grads.reduce")) continue;
    ++reductions;
    CHECK(op.kind == OpKind::AllReduce);
    CHECK(op.collective().bytes == 2 * 2 * d * h);
    REQUIRE(op.collective().groups);
    CHECK(*op.collective().groups == std::vector<std::vector<topology::ChipId>>{{0, 1, 2, 3}, {4, 5, 6, 7}});
  }
  CHECK(reductions == L * 4);
  // Over two tensor axes, the last of size 4: a collective over that axis.
  const Workload axes = step(R"({"T": 2, "R": 4})", R"({"tensor": ["T", "R"]})");
  for (const Op& op : axes.ops)
    if (op.name.ends_with("kv_grads.reduce")) CHECK(op.collective().mesh_axes == std::vector<int>{1});
  // Multi-query attention over a DGX node's 8 GPUs: one KV head on all 8, summed over the tensor axis.
  const Workload mqa = parse_workload(R"({"hardware": "h100-dgx", "mesh": {"T": 8}, "training": {"model": {
      "layers": 2, "d_model": 512, "heads": 8, "kv_heads": 1, "ffn": 1024, "vocab": 1024, "seq_len": 256},
      "global_batch": 4, "parallelism": {"tensor": ["T"]}}})",
                                      "t.json");
  CHECK(training(mqa).kv_replicas == 8);
  std::size_t over_t = 0;
  for (const Op& op : mqa.ops)
    if (op.name.ends_with("kv_grads.reduce") && op.collective().mesh_axes == std::vector<int>{0}) ++over_t;
  CHECK(over_t == L * 4);
}

TEST_CASE("Training parameters: GPT's 12 L h^2 (1 + 13/(12h) + (V + s)/(12 L h)), plus the final LayerNorm", "[training]") {
  const Workload w = parse_workload(gpt(R"({"D": 2})", R"({"data": ["D"]})"), "t.json");
  const std::uint64_t L = 8, h = 512, V = 1024, s = 256;
  CHECK(training(w).formulas.parameters == 12 * L * h * h + 13 * L * h + (V + s) * h + 2 * h);
}

TEST_CASE("Training memory: Korthikanti et al.'s activation bytes per layer, exactly", "[training]") {
  const std::uint64_t s = 256, b = 1, h = 512, a = 8;
  const auto per_layer = [&](const std::string& mesh, const std::string& plan, const std::string& recompute) {
    return training(parse_workload(gpt(mesh, plan, R"(, "recompute": ")" + recompute + "\""), "t.json"))
        .formulas.activation_bytes_per_layer;
  };
  const std::uint64_t sbh = s * b * h, core = 5 * a * s * s * b;
  CHECK(per_layer(R"({"D": 2})", R"({"data": ["D"]})", "none") == 34 * sbh + core);
  for (std::uint64_t t : {2u, 4u}) {
    INFO("t = " << t);
    const std::string mesh = R"({"T": )" + std::to_string(t) + "}";
    CHECK(per_layer(mesh, R"({"tensor": ["T"]})", "none") == 10 * sbh + 24 * sbh / t + core / t);
    CHECK(per_layer(mesh, R"({"tensor": ["T"], "sequence_parallel": true})", "none") == 34 * sbh / t + core / t);
    CHECK(per_layer(mesh, R"({"tensor": ["T"]})", "selective") == 10 * sbh + 24 * sbh / t);
    CHECK(per_layer(mesh, R"({"tensor": ["T"], "sequence_parallel": true})", "selective") == 34 * sbh / t);
    CHECK(per_layer(mesh, R"({"tensor": ["T"]})", "full") == 2 * sbh);
  }
}

TEST_CASE("Training memory: ZeRO's 2 + 2 + 12 bytes per parameter, split by the sharding", "[training]") {
  const auto memory = [](const std::string& mesh, const std::string& plan) {
    const Workload w = parse_workload(gpt(mesh, plan), "t.json");
    return std::pair{training(w).formulas, stage_params(training(w), 0).per_chip};
  };
  SECTION("data parallel, unsharded: 16 bytes per parameter") {
    const auto [f, n] = memory(R"({"D": 4})", R"({"data": ["D"]})");
    CHECK(n == training(parse_workload(gpt(R"({"D": 4})", R"({"data": ["D"]})"), "t.json")).formulas.parameters);
    CHECK(f.weight_bytes == 2 * n);
    CHECK(f.gradient_bytes == 2 * n);
    CHECK(f.optimizer_bytes == 12 * n);
  }
  SECTION("sharded optimizer (ZeRO-1) over N_d = 4: 4 + 12 / N_d") {
    const auto [f, n] = memory(R"({"D": 4})", R"({"data": ["D"], "sharded_optimizer": true})");
    CHECK(f.weight_bytes + f.gradient_bytes == 4 * n);
    CHECK(f.optimizer_bytes == 12 * n / 4);
  }
  SECTION("FSDP (ZeRO-3) over N_d = 4: 16 / N_d") {
    const auto [f, n] = memory(R"({"F": 4})", R"({"fsdp": ["F"]})");
    CHECK(f.weight_bytes == 2 * n / 4);
    CHECK(f.gradient_bytes == 2 * n / 4);
    CHECK(f.optimizer_bytes == 12 * n / 4);
  }
}

TEST_CASE("Training: uneven stages, as Llama 3 and Megatron split them; each stage runs and holds its own layers",
          "[training]") {
  const auto plan_of = [](std::uint64_t p, const std::string& plan, std::uint64_t layers) {
    return parse_workload(gpt(fmt::format(R"({{"P": {}}})", p), R"({"pipeline": "P", )" + plan + "}", "", layers, 16),
                          "t.json");
  };
  // Llama 3 405B: 126 layers over 16 stages, the first and the last one fewer.
  const Workload llama = plan_of(16, R"("schedule": "1f1b")", 126);
  std::vector<std::uint64_t> expected(16, 8);
  expected.front() = expected.back() = 7;
  CHECK(training(llama).plan.chunk_layers == expected);
  CHECK(training(plan_of(16, R"("first_stage_layers": 7, "last_stage_layers": 7)", 126)).plan.chunk_layers == expected);
  // Megatron's first and last stages with interleaving: each stage's layers over its chunks.
  CHECK(training(plan_of(4, R"("first_stage_layers": 2, "last_stage_layers": 2, "schedule": "interleaved",
                           "virtual_stages": 2)",
                         20))
            .plan.chunk_layers == std::vector<std::uint64_t>{1, 4, 4, 1, 1, 4, 4, 1});
  const Workload listed = plan_of(4, R"("stage_layers": [1, 3, 5, 2])", 11);
  const Training& t = training(listed);
  // Each stage's lowered layer ops are its layers, and its parameters theirs.
  const LayerParams lp = layer_params(t.model, false);
  const std::uint64_t h = t.model.d_model, per_layer = lp.sharded() + lp.replicated;
  std::uint64_t first = 0;
  for (std::uint64_t st = 0; st < 4; ++st) {
    INFO("stage " << st);
    std::set<std::uint64_t> ran;
    for (const Op& op : listed.ops)
      if (op.site.part == StepSite::Part::Layer && op.site.stage == static_cast<std::int32_t>(st))
        ran.insert(op.site.layer);
    std::vector<std::uint64_t> layers(t.plan.chunk_layers[st]);
    for (std::uint64_t k = 0; k < layers.size(); ++k) layers[k] = first + k;
    first += layers.size();
    CHECK(std::vector<std::uint64_t>(ran.begin(), ran.end()) == layers);
    CHECK(stage_layers(t, st) == layers);
    // The embedding and positions on the first stage; the final norm and the
    // (tied, so copied) head on the last.
    const std::uint64_t outside = st == 0   ? t.model.vocab * h + t.model.seq_len * h
                                  : st == 3 ? 2 * h + t.model.vocab * h
                                            : 0;
    CHECK(stage_params(t, st).per_chip == layers.size() * per_layer + outside);
  }
  // Memory: the stage with the most layers (each counted with the first stage's microbatches in flight).
  CHECK(t.formulas.peak_stage_layers == 5);
}

TEST_CASE("Training memory: microbatches in flight under each pipeline schedule", "[training]") {
  const auto in_flight = [](const std::string& plan) {
    return training(parse_workload(gpt(R"({"P": 4})", plan, "", 16, 16), "t.json")).formulas.microbatches_in_flight;
  };
  CHECK(in_flight(R"({"pipeline": "P", "schedule": "gpipe"})") == 16);
  CHECK(in_flight(R"({"pipeline": "P", "schedule": "1f1b"})") == 4);
  CHECK(in_flight(R"({"pipeline": "P", "schedule": "interleaved", "virtual_stages": 2})") ==
        Approx(4 * (1 + 3.0 / 8)));
  // The first stage holds L/p layers of that many microbatches.
  const Workload w = parse_workload(gpt(R"({"P": 4})", R"({"pipeline": "P"})", "", 16, 16), "t.json");
  CHECK(training(w).formulas.activation_bytes == 4 * (16 / 4) * training(w).formulas.activation_bytes_per_layer);
  // Stage s: 1F1B's p - s, interleaving's 2(p - s - 1) + (v - 1) p + 1 chunk passes over v chunks.
  const Training& t = training(w);
  for (std::uint64_t s = 0; s < 4; ++s) CHECK(microbatches_in_flight(t, s) == static_cast<double>(4 - s));
  const Workload interleaved = parse_workload(
      gpt(R"({"P": 4})", R"({"pipeline": "P", "schedule": "interleaved", "virtual_stages": 2})", "", 16, 16), "t.json");
  const Training& i = training(interleaved);
  for (std::uint64_t s = 0; s < 4; ++s)
    CHECK(microbatches_in_flight(i, s) == Approx((2.0 * (3 - static_cast<double>(s)) + 4 + 1) / 2));
  // Uneven stages: 1, 1, 2 and 12 layers; the last stage holds one microbatch
  // of 12 layers, more than stage 0's 4 of 1 layer: the most loaded.
  const Workload uneven =
      parse_workload(gpt(R"({"P": 4})", R"({"pipeline": "P", "stage_layers": [1, 1, 2, 12]})", "", 16, 16), "t.json");
  const Training& u = training(uneven);
  CHECK(u.formulas.peak_stage_layers == 12);
  CHECK(u.formulas.microbatches_in_flight == 1);
  CHECK(u.formulas.activation_bytes == 12 * u.formulas.activation_bytes_per_layer);
}

TEST_CASE("Training lowering: pipeline ops run on their stage's chips, sends pair counterparts", "[training]") {
  const Workload w = parse_workload(gpt(R"({"D": 2, "P": 2})", R"({"data": ["D"], "pipeline": "P"})"), "t.json");
  std::size_t sends = 0;
  for (const Op& op : w.ops) {
    REQUIRE(op.chips);
    if (op.kind == OpKind::Send) {
      ++sends;
      CHECK(op.send().pairs.size() == 2);  // every chip of the stage to its counterpart
      CHECK(op.chips->size() == 4);
      continue;
    }
    CHECK(op.chips->size() == 2);
  }
  CHECK(sends == 2 * 8);  // forward and backward over the one boundary, 16 / 2 = 8 microbatches
  for (std::size_t i = 0; i < w.ops.size(); ++i)
    for (std::uint32_t d : w.ops[i].deps) CHECK(d < i);
}

TEST_CASE("Training schedules: every pass once, 1F1B's warm-up of p - s - 1 forwards", "[training]") {
  // Stage orders are checked through the lowered op names: the passes' first ops.
  const Workload w = parse_workload(gpt(R"({"P": 4})", R"({"pipeline": "P"})", "", 4, 8), "t.json");
  std::vector<std::string> stage0;
  for (std::size_t i = 0; i < w.ops.size(); ++i)
    if (w.ops[i].site.stage == 0 && (w.ops[i].name.ends_with(".embed") || w.ops[i].name.ends_with("L0.ln1.bwd")))
      stage0.push_back(w.ops[i].name.substr(0, w.ops[i].name.find('.')));
  const std::vector<std::string> expected{"F0", "F1", "F2", "F3", "B0", "F4", "B1", "F5", "B2", "F6", "B3", "F7",
                                          "B4", "B5", "B6", "B7"};
  CHECK(stage0 == expected);
}

TEST_CASE("Training: inconsistent plans are one clear error each", "[training]") {
  const auto error = [](const std::string& text) {
    try {
      parse_workload(text, "t.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(error(gpt(R"({"T": 3})", R"({"tensor": ["T"]})")) ==
        "t.json:/training/parallelism: heads 8 are not divisible by the tensor-parallel degree 3");
  CHECK(
      error(gpt(R"({"P": 3})", R"({"pipeline": "P", "schedule": "interleaved", "virtual_stages": 4})", "", 8, 18)) ==
      "t.json:/training/parallelism: layers 8 are fewer than the pipeline's model chunks: stages x virtual stages = 3 "
      "x 4");
  CHECK(error(R"({"hardware": "tpu-v5p", "mesh": {"T": 4}, "training": {"model": {"layers": 2, "d_model": 512,
        "heads": 12, "kv_heads": 6, "head_dim": 64, "ffn": 1024, "vocab": 1024, "seq_len": 256}, "global_batch": 4,
        "parallelism": {"tensor": ["T"]}}})") ==
        "t.json:/training/parallelism: kv_heads 6 are neither divisible by the tensor-parallel degree 4 nor a divisor "
        "of it (a chip holds g / tp KV heads, or one KV head replicated on tp / g chips)");
  CHECK(error(R"({"hardware": "h100-dgx", "mesh": {"T": 8}, "training": {"model": {"layers": 2, "d_model": 512,
        "heads": 8, "kv_heads": 2, "ffn": 1024, "vocab": 1024, "seq_len": 256}, "global_batch": 4,
        "parallelism": {"tensor": ["T"]}}})") ==
        "t.json:/training/parallelism: tensor parallelism of 8 over 2 KV heads replicates each on 4 GPUs, whose "
        "gradients are summed over them: on a GPU fabric the last tensor axes must span exactly those 4 GPUs");
  CHECK(error(gpt(R"({"D": 3})", R"({"data": ["D"]})")) ==
        "t.json:/training/global_batch: global_batch 16 is not divisible by data-parallel replicas x microbatch = 3 "
        "x 1 (data 3 x fsdp 1)");
  CHECK(error(gpt(R"({"D": 2, "T": 2})", R"({"data": ["D", "T"], "tensor": ["T"]})")) ==
        "t.json:/training/parallelism/data: mesh axis T is given to both tensor and data: each axis takes one "
        "strategy");
  CHECK(error(gpt(R"({"D": 2, "T": 2})", R"({"data": ["D"]})")) ==
        "t.json:/training/parallelism/data: mesh axis T takes no strategy: list it under one of data, fsdp, tensor, "
        "pipeline, expert or context (the strategies must cover the mesh)");
}

TEST_CASE("Training FLOPs: mixture of experts counts the router and top_k experts per token, not the padding", "[training]") {
  const auto text = [](double capacity) {
    return R"({"hardware": "tpu-v5p", "mesh": {"E": 4, "T": 2}, "training": {
      "model": {"layers": 4, "d_model": 256, "heads": 4, "ffn": 1024, "vocab": 512, "seq_len": 128, "gated": true,
                "experts": 8, "top_k": 2, "moe_every": 2, "capacity_factor": )" +
           std::to_string(capacity) + R"(},
      "global_batch": 8, "parallelism": {"expert": ["E"], "tensor": ["T"], "sequence_parallel": true}}})";
  };
  const U h = 256, ffn = 1024, L = 4, V = 512, s = 128, tokens = 8 * s, E = 8, k = 2;
  const U attention_weights = 4 * h * h;  // MHA: Q, K, V, O
  const U dense = attention_weights + 3 * h * ffn, moe = attention_weights + h * E + k * 3 * h * ffn;
  const U expected = 6 * ((L / 2) * dense + (L / 2) * moe + V * h) * tokens + 12 * L * h * (s / 2) * tokens;
  for (double capacity : {1.0, 1.25}) {
    INFO("capacity factor " << capacity);
    const Workload w = parse_workload(text(capacity), "t.json");
    CHECK(training(w).lowered_model_flops == expected);
    CHECK(step_flops(training(w)).model == expected);
    if (capacity > 1) CHECK(training(w).lowered_hardware_flops > expected);  // the padded rows
  }
  // Parameters: every expert counts, the router too.
  const Workload w = parse_workload(text(1.0), "t.json");
  CHECK(training(w).formulas.parameters ==
        (L / 2) * (dense + 2 * h) + (L / 2) * (attention_weights + h * E + E * 3 * h * ffn + 2 * h) + 2 * V * h + h);
}

TEST_CASE("Training FLOPs: context parallelism and collective matmuls move work, not FLOPs", "[training]") {
  const U B = 16, s = 256, L = 8, h = 512, V = 1024;
  for (const char* plan : {R"({"context": ["C"], "data": ["D"]})",
                           R"({"context": ["C"], "tensor": ["D"], "sequence_parallel": true})"}) {
    INFO(plan);
    const Workload w = parse_workload(gpt(R"({"C": 4, "D": 2})", plan), "t.json");
    CHECK(training(w).lowered_model_flops == narayanan(B, s, L, h, V, false));
  }
  const Workload w = parse_workload(
      gpt(R"({"T": 4})", R"({"tensor": ["T"], "sequence_parallel": true})", R"(, "overlap": {"tensor": true})"), "t.json");
  CHECK(training(w).lowered_model_flops == narayanan(B, s, L, h, V, false));
}

TEST_CASE("Training memory: context parallelism splits every layer's activations", "[training]") {
  const auto per_layer = [](const std::string& mesh, const std::string& plan) {
    return training(parse_workload(gpt(mesh, plan), "t.json")).formulas.activation_bytes_per_layer;
  };
  CHECK(per_layer(R"({"C": 4})", R"({"context": ["C"]})") == per_layer(R"({"D": 4})", R"({"data": ["D"]})") / 4);
}

TEST_CASE("Training: the parallel attention+MLP block has the same FLOPs, one norm and one TP reduction", "[training]") {
  const auto text = [](bool parallel) {
    return std::string(R"({"hardware": "tpu-v5p", "mesh": {"T": 4}, "training": {
      "model": {"layers": 4, "d_model": 256, "heads": 4, "ffn": 1024, "vocab": 512, "seq_len": 128,
                "parallel_block": )") + (parallel ? "true" : "false") + R"(},
      "global_batch": 4, "parallelism": {"tensor": ["T"], "sequence_parallel": true}}})";
  };
  const Workload serial = parse_workload(text(false), "t.json"), parallel = parse_workload(text(true), "t.json");
  CHECK(training(parallel).lowered_model_flops == training(serial).lowered_model_flops);
  CHECK(training(parallel).lowered_model_flops == step_flops(training(parallel)).model);
  CHECK(training(parallel).formulas.parameters == training(serial).formulas.parameters - 4 * 256);
  const auto count = [](const Workload& w, OpKind kind) {
    std::size_t n = 0;
    for (const Op& op : w.ops) n += op.kind == kind && op.name.starts_with("F0.L0.") ? 1u : 0u;
    return n;
  };
  // Forward of a layer: one gather and one reduce-scatter instead of two each.
  CHECK(count(serial, OpKind::AllGather) == 2);
  CHECK(count(serial, OpKind::ReduceScatter) == 2);
  CHECK(count(parallel, OpKind::AllGather) == 1);
  CHECK(count(parallel, OpKind::ReduceScatter) == 1);
}

TEST_CASE("Training: the global batch in tokens is a whole number of sequences", "[training]") {
  const Workload w = parse_workload(
      R"({"hardware": "tpu-v5p", "mesh": {"D": 2}, "training": {
      "model": {"layers": 2, "d_model": 256, "heads": 4, "ffn": 1024, "vocab": 512, "seq_len": 128},
      "global_batch_tokens": 1024}})",
      "t.json");
  CHECK(training(w).global_batch == 8);
  CHECK(training(w).microbatches == 4);
}

TEST_CASE("Training memory: Megatron's fp32 gradients, 18 bytes per parameter, 6 + 12/d with its distributed optimizer", "[training]") {
  const auto memory = [](const std::string& plan) {
    const Workload w = parse_workload(gpt(R"({"D": 4})", plan, R"(, "gradient_dtype": "fp32")"), "t.json");
    return std::pair{training(w).formulas, stage_params(training(w), 0).per_chip};
  };
  {
    const auto [f, n] = memory(R"({"data": ["D"]})");
    CHECK(f.weight_bytes + f.gradient_bytes + f.optimizer_bytes == 18 * n);
  }
  const auto [f, n] = memory(R"({"data": ["D"], "sharded_optimizer": true})");
  CHECK(f.weight_bytes + f.gradient_bytes == 6 * n);
  CHECK(f.optimizer_bytes == 12 * n / 4);
  // The gradient reductions move fp32: twice the bf16 bytes.
  const Workload fp32 = parse_workload(gpt(R"({"D": 4})", R"({"data": ["D"]})", R"(, "gradient_dtype": "fp32")"), "t.json");
  const Workload bf16 = parse_workload(gpt(R"({"D": 4})", R"({"data": ["D"]})"), "t.json");
  for (std::size_t i = 0; i < fp32.ops.size(); ++i)
    if (fp32.ops[i].group == "gradients") CHECK(fp32.ops[i].comm_bytes() == 2 * bf16.ops[i].comm_bytes());
}

TEST_CASE("Training ops: every op's site says what its name says", "[training]") {
  const std::string moe = R"({"hardware": "tpu-v5p", "mesh": {"E": 2, "D": 2, "T": 2}, "training": {
      "model": {"layers": 4, "d_model": 256, "heads": 4, "ffn": 1024, "vocab": 512, "seq_len": 128, "gated": true,
                "experts": 4, "top_k": 2, "moe_every": 2},
      "global_batch": 8, "parallelism": {"expert": ["E"], "data": ["D"], "tensor": ["T"], "sequence_parallel": true,
                                         "sharded_optimizer": true}}})";
  const std::vector<std::string> texts = {
      gpt(R"({"P": 2, "D": 2})", R"({"pipeline": "P", "data": ["D"]})", R"(, "recompute": "full")", 4, 8),
      gpt(R"({"P": 2, "T": 2})", R"({"pipeline": "P", "schedule": "interleaved", "virtual_stages": 2, "tensor": ["T"]})",
          R"(, "recompute": "selective")", 8, 8),
      gpt(R"({"F": 2, "D": 2})", R"({"fsdp": ["F"], "data": ["D"], "sharded_optimizer": true})",
          R"(, "overlap": {"gradient_reduction": false})", 2, 8),
      gpt(R"({"C": 2, "T": 2})", R"({"context": ["C"], "tensor": ["T"], "sequence_parallel": true})",
          R"(, "overlap": {"tensor": true})", 2, 4),
      moe,
  };
  using Part = StepSite::Part;
  const std::regex outside_gradients(R"((s\d+\.)?dp\.(embed|head)(\..*)?)");
  std::set<Part> every;
  for (const std::string& text : texts) {
    const Workload w = parse_workload(text, "t.json");
    std::set<Part> parts;
    for (const Op& op : w.ops) {
      INFO(op.name);
      const StepSite& site = op.site;
      parts.insert(site.part);
      const std::string pass = fmt::format("{}{}.", site.pass == StepSite::Pass::Forward ? 'F' : 'B', site.microbatch);
      CHECK((site.part == Part::Layer) == (site.kernel != StepSite::kNoKernel));
      CHECK((site.part == Part::Layer || !site.recompute));
      switch (site.part) {
        case Part::Layer:
          CHECK(op.name == pass + (site.recompute ? "R." : "") + fmt::format("L{}.", site.layer) +
                            std::string(training(w).kernel_name(site)));
          break;
        case Part::Send:
          CHECK(op.name.starts_with(pass + "send."));
          break;
        case Part::Outside:
          CHECK(op.name.starts_with(pass));
          CHECK_FALSE(std::regex_match(op.name, std::regex(R"([FB]\d+\.(R\.)?L\d+\..*)")));
          break;
        case Part::LayerGradients:
          CHECK(std::regex_match(op.name, std::regex(fmt::format(R"((s\d+\.)?dp\.L{}(\..*)?)", site.layer))));
          break;
        case Part::OutsideGradients:
          CHECK(std::regex_match(op.name, outside_gradients));
          break;
        case Part::Optimizer:
          CHECK((op.name.ends_with("optimizer") || op.name.ends_with("param_gather")));
          break;
        case Part::None:
          FAIL("an op of a training step without its site");
      }
    }
    CHECK(parts.count(Part::Layer));
    CHECK(parts.count(Part::Outside));
    CHECK(parts.count(Part::Optimizer));
    every.insert(parts.begin(), parts.end());
  }
  // Every kind of place is met by some step.
  CHECK(every.size() == 6);
}
