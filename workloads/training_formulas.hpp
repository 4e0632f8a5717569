#pragma once
// The closed forms of a training step (docs/TRAINING.md): parameters, FLOPs,
// activation and stage memory. Lowering, the step's report, `explain` and the
// search read them; the tests hold the lowered step to them.
#include <cstdint>
#include <vector>

#include "workloads/training.hpp"
#include "workloads/workload.hpp"

namespace meshsim::workloads {

// Parameters of one transformer layer, by the matrices tensor parallelism
// shards (with their column-parallel biases) and what it replicates.
struct LayerParams {
  std::uint64_t qkv = 0, out = 0, up = 0, down = 0;  // up and down: a dense layer's FFN
  std::uint64_t replicated = 0;  // norm weights (and biases), the row-parallel biases
  std::uint64_t router = 0;      // an MoE layer's router (replicated)
  std::uint64_t experts = 0;     // an MoE layer's experts, all of them (split over the expert axes)
  std::uint64_t sharded() const;
};
LayerParams layer_params(const ModelSpec& m, bool moe);
// The K/V projection parameters (weights and biases) a tensor-parallel group
// holds beyond the model's, per layer, when it replicates the KV heads
// (Training::kv_replicas): (r - 1) copies of them.
std::uint64_t replicated_kv_params(const Training& t);
// One chip's part of a layer's tensor-parallel matrices, with its KV replicas.
std::uint64_t sharded_per_chip(const Training& t, const LayerParams& lp);
// N: every layer, the embeddings (input, untied head, learned positions), the final norm.
std::uint64_t model_parameters(const ModelSpec& m);

// FLOPs per step, whole cluster, exact: 6 per matmul weight per token (forward
// 2, backward 4) plus attention's 12 x keys x heads x head_dim per token and
// layer (keys = s, or s/2 causal); `hardware` adds the recomputed forward work.
struct StepFlops {
  unsigned __int128 model = 0, hardware = 0;
};
StepFlops step_flops(const Training& t);

// Activation bytes of one layer for one microbatch on one chip (Korthikanti et
// al. 2022's accounting, generalised to GQA, gated FFNs and no dropout).
struct ActivationBytes {
  std::uint64_t outside = 0;  // outside the tensor-parallel regions (split by SP)
  std::uint64_t inside = 0;   // inside them (split by TP)
  std::uint64_t core = 0;     // the attention core's s^2 terms (split by TP; dropped by selective recompute)
  std::uint64_t input = 0;    // the layer's input (all that full recompute keeps)
  std::uint64_t kept = 0;     // what the recompute policy keeps
};
ActivationBytes activation_bytes(const Training& t, bool moe);
// Token copies an MoE layer sends to experts from `tokens` tokens (top_k each,
// padded to the capacity factor).
std::uint64_t dispatched_tokens(const Training& t, std::uint64_t tokens);
// The layers [first, end) of model chunk g = c p + s (Parallelism::chunk_layers;
// an even split where the plan has none).
struct LayerRange {
  std::uint64_t first = 0, end = 0;
};
LayerRange chunk_range(const Training& t, std::uint64_t g);
// The layers stage `stage` holds (all its chunks').
std::vector<std::uint64_t> stage_layers(const Training& t, std::uint64_t stage);
// The most layers a stage holds.
std::uint64_t most_stage_layers(const Training& t);
// How many microbatches' activations the first stage holds at once.
// How many microbatches' activations stage `stage` holds at once (of its
// layers): GPipe all m; 1F1B the p - s it runs forward before its first
// backward; interleaved 1F1B its warm-up chunk passes and one more, 2(p - s - 1)
// + (v - 1) p + 1, over its v chunks; at most m. Without a pipeline, 1 (m
// under GPipe). The report's figure is the peak stage's.
double microbatches_in_flight(const Training& t, std::uint64_t stage = 0);

struct StageParams {
  std::uint64_t layers = 0;
  std::uint64_t per_chip = 0;  // parameters one chip of the stage holds before FSDP sharding
  std::uint64_t dense_per_chip = 0, expert_per_chip = 0;  // of which outside and inside the experts
};
StageParams stage_params(const Training& t, std::uint64_t stage);
StepFormulas step_formulas(const Training& t, const Hardware& hw);

}  // namespace meshsim::workloads
