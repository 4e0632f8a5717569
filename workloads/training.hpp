#pragma once
// Training steps: a decoder-only transformer, a parallelism plan over the mesh
// axes, and what one optimizer step of it costs. parse_training() reads the
// workload's "training" section (docs/TRAINING.md) and lower_training() turns one
// step into lowered ops (local matmuls, elementwise kernels, collectives and
// stage-to-stage sends) that the engine runs hop by hop like any other workload.
// The FLOP and memory formulas here are the closed forms the tests check; the
// step time is never computed here: it emerges from the simulation.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace meshsim::workloads {

struct Workload;

struct ModelSpec {
  std::string name;            // the preset it came from, or "custom"
  std::uint64_t layers = 0;    // L
  std::uint64_t d_model = 0;   // h
  std::uint64_t heads = 0;     // a (query heads)
  std::uint64_t kv_heads = 0;  // MHA: = heads; GQA: fewer; MQA: 1
  std::uint64_t head_dim = 0;  // default h / a
  std::uint64_t ffn = 0;       // FFN hidden size (per matrix)
  bool gated = false;          // SwiGLU: gate and up matrices (three in all)
  std::uint64_t vocab = 0;     // V
  std::uint64_t seq_len = 0;   // s
  bool tied_embeddings = false;      // the LM head reuses the embedding matrix
  bool learned_positions = false;    // a learned position embedding of s x h (GPT); else rotary (no parameters)
  bool dropout = false;              // dropout masks are kept for the backward pass (Korthikanti's accounting)
  bool biases = false;               // linear layers and norms have biases (GPT); LLaMA has none
  // Mixture of experts: `experts` FFNs of `expert_ffn` in every `moe_every`-th
  // layer (layer l when (l + 1) % moe_every == 0), each token routed to `top_k` of
  // them; an expert takes at most capacity_factor x its fair share of tokens.
  std::uint64_t experts = 0;  // 0: dense
  std::uint64_t top_k = 1;
  std::uint64_t expert_ffn = 0;
  double capacity_factor = 1.0;
  std::uint64_t moe_every = 1;
  // GPT-J / PaLM's parallel block: attention and MLP read the same normed input
  // and their outputs are added (one norm, one tensor-parallel reduction).
  bool parallel_block = false;
  bool moe_layer(std::uint64_t l) const { return experts > 0 && (l + 1) % moe_every == 0; }
  std::uint64_t moe_layers() const { return experts > 0 ? layers / moe_every : 0; }
};

enum class Schedule { GPipe, OneFOneB, Interleaved };
enum class Recompute { None, Selective, Full };

struct Parallelism {
  std::vector<int> data, fsdp, tensor;  // mesh axes of each strategy
  std::vector<int> expert;              // experts split over these (they are data parallel for the rest)
  std::vector<int> context;             // the sequence split over these (ring attention)
  int pipeline = -1;                    // mesh axis, -1: none
  bool sequence_parallel = false;
  Schedule schedule = Schedule::OneFOneB;
  std::uint64_t virtual_stages = 1;  // v (interleaved 1F1B)
  bool sharded_optimizer = false;    // ZeRO-1 / distributed optimizer over the data axes
  // The layers of each model chunk, in layer order: chunk g = c p + s is stage
  // s's chunk c (p x v counts; one of all the layers without a pipeline). Even
  // unless the plan says otherwise (docs/TRAINING.md, "Uneven stages").
  std::vector<std::uint64_t> chunk_layers;
};

struct Overlap {
  bool gradient_reduction = true;  // data-parallel reductions issued per layer during the backward pass
  bool fsdp_prefetch = true;       // FSDP gathers issued one layer ahead
  bool tensor = false;             // collective matmuls: SP gathers and reduce-scatters in steps under the GEMMs
};

// The closed forms of one step (per step, per chip where said).
struct StepFormulas {
  std::uint64_t parameters = 0;             // N, the whole model
  long double model_flops = 0;              // the model's FLOPs per step (no recompute), whole cluster
  long double hardware_flops = 0;           // with recomputed forward passes
  double peak_flops_per_s = 0;              // the chip's dense peak for the dtype
  // Memory per chip (bytes), on the most loaded pipeline stage.
  std::uint64_t weight_bytes = 0, gradient_bytes = 0, optimizer_bytes = 0;
  std::uint64_t activation_bytes_per_layer = 0;  // one microbatch, one layer, under the recompute policy
  std::uint64_t activation_bytes = 0;            // kept across the schedule's microbatches in flight
  std::uint64_t peak_stage_layers = 0;           // the layers of the stage whose memory this is
  std::uint64_t working_bytes = 0;               // gathered FSDP layers, a recomputed layer's activations
  std::uint64_t peak_bytes = 0;
  std::uint64_t hbm_bytes = 0;
  double microbatches_in_flight = 0;  // on that stage
};

// What an op of a training step belongs to, for the step's breakdown.
enum class Role : std::uint8_t { None, Compute, Tensor, Fsdp, Data, Pipeline, Optimizer, Expert, Context };
const char* role_name(Role r);

// Where an op of a training step sits in the step: its part, its pass and
// microbatch, its layer and its kernel there, its role and its pipeline stage.
// lower_training.cpp sets it on every op it makes; the training verifier and
// the step's breakdown read it (never the op's name, which says the same for
// people: "B0.R.L3.qk", "s1.dp.L3.experts").
struct StepSite {
  enum class Part : std::uint8_t {
    None,              // not an op of a training step
    Layer,             // a kernel or collective of one layer (its FSDP gather and reduce-scatter too)
    Send,              // a pipeline stage's activations or gradients to the next
    Outside,           // the embedding, the head, the loss: in a pass, outside the layers
    LayerGradients,    // a data-parallel reduction of one layer's gradients
    OutsideGradients,  // ... of the embedding's or the head's
    Optimizer,         // the optimizer update and the sharded optimizer's parameter gather
  };
  enum class Pass : std::uint8_t { None, Forward, Backward };
  static constexpr std::uint32_t kNoKernel = ~std::uint32_t{0};
  Part part = Part::None;
  Pass pass = Pass::None;
  bool recompute = false;   // a forward kernel run again in the backward pass
  Role role = Role::None;   // what the step's breakdown counts it as
  std::int32_t stage = -1;  // its pipeline stage (-1: a send between two, or not a step's op)
  // Layer: the kernel within the layer, an index into Training::kernels
  // ("qkv", "down.dx", "gather"): a step has a few dozen kernels and millions
  // of ops, each of which is copied whole as the step is built and reduced.
  std::uint32_t kernel = kNoKernel;
  std::uint64_t microbatch = 0;  // with a pass
  std::uint64_t layer = 0;       // Layer and LayerGradients
  bool operator==(const StepSite&) const = default;
};

struct Training {
  ModelSpec model;
  Parallelism plan;
  Overlap overlap;
  Recompute recompute = Recompute::None;
  bool causal = true;
  std::string dtype = "bf16";
  // Gradients (their memory, reductions and optimizer reads): 16-bit as ZeRO and
  // PyTorch FSDP keep them, or fp32 as Megatron-LM accumulates them under bf16.
  std::uint64_t gradient_bytes = 2;
  std::uint64_t global_batch = 0;  // sequences per step
  std::uint64_t microbatch = 1;    // sequences per microbatch per replica
  bool allow_oom = false;
  // Derived.
  std::uint64_t dp = 1, fsdp = 1, tp = 1, pp = 1, ep = 1, cp = 1;
  // Tensor parallelism past the KV heads (tp > g) replicates them, as MaxText
  // and vLLM do: each chip holds one KV head, kept on tp / g chips.
  std::uint64_t kv_replicas = 1;
  std::uint64_t kv_heads_per_chip() const { return model.kv_heads * kv_replicas / tp; }
  std::uint64_t microbatches = 1;  // m, per replica
  StepFormulas formulas;
  // FLOPs of the lowered matmuls, summed over chips (the tests hold them to
  // the closed forms): without and with the recomputed ones.
  unsigned __int128 lowered_model_flops = 0, lowered_hardware_flops = 0;
  // The names of the layers' kernels, by StepSite::kernel.
  std::vector<std::string> kernels;
  std::string_view kernel_name(const StepSite& site) const {
    return site.kernel < kernels.size() ? std::string_view(kernels[site.kernel]) : std::string_view();
  }
  std::vector<int> chip_stage;       // per chip: its pipeline stage
};

std::string schedule_name(Schedule s);
std::string recompute_name(Recompute r);

}  // namespace meshsim::workloads
