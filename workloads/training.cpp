// The "training" section: model presets, the parallelism plan, its checks, and
// the step's closed forms (FLOPs, memory). The lowering is lower_training.cpp.
#include "workloads/training.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/error.hpp"
#include "workloads/lowering.hpp"
#include "workloads/json_frontend.hpp"
#include "workloads/training_detail.hpp"

namespace meshsim::workloads {

const char* role_name(Role r) {
  switch (r) {
    case Role::None: return "other";
    case Role::Compute: return "compute";
    case Role::Tensor: return "tensor";
    case Role::Fsdp: return "fsdp";
    case Role::Data: return "data";
    case Role::Pipeline: return "pipeline";
    case Role::Optimizer: return "optimizer";
    case Role::Expert: return "expert";
    case Role::Context: return "context";
  }
  return "?";
}

std::string schedule_name(Schedule s) {
  switch (s) {
    case Schedule::GPipe: return "gpipe";
    case Schedule::OneFOneB: return "1f1b";
    case Schedule::Interleaved: return "interleaved";
  }
  return "?";
}

std::string recompute_name(Recompute r) {
  switch (r) {
    case Recompute::None: return "none";
    case Recompute::Selective: return "selective";
    case Recompute::Full: return "full";
  }
  return "?";
}

namespace detail {

namespace {

// Model presets. Every value is the published architecture:
//  gpt3-175b: Brown et al. 2020 ("Language Models are Few-Shot Learners"),
//    Table 2.1 (96 layers, d_model 12288, 96 heads of 128, context 2048); FFN 4 x
//    d_model, learned position embeddings, tied input/output embeddings and
//    dropout as in GPT-2; vocabulary 51200 = GPT-2's 50257 padded as Megatron-LM
//    does (Narayanan et al. 2021, arXiv 2104.04473, Table 1 uses V = 51200).
//  llama3-8b, llama3-70b, llama3-405b: Llama Team, "The Llama 3 Herd of Models"
//    (arXiv 2407.21783), Table 3 (layers, model dimension, FFN dimension,
//    attention heads, 8 key/value heads, vocabulary 128,000 -> 128256 in the
//    released tokenizer config); SwiGLU, RMSNorm, rotary positions, no biases,
//    untied embeddings, sequence length 8192.
//  mixtral-8x7b: Jiang et al. 2024, "Mixtral of Experts" (arXiv 2401.04088),
//    Table 1 (dim 4096, 32 layers, head_dim 128, hidden_dim 14336, 32 heads, 8
//    KV heads, context 32768, vocabulary 32000, 8 experts, top 2), every layer
//    an MoE of SwiGLU experts; capacity factor 1 (dropless routing, balanced).
struct ModelPreset {
  const char* name;
  ModelSpec spec;
};

ModelSpec gpt(std::uint64_t layers, std::uint64_t h, std::uint64_t heads, std::uint64_t seq) {
  ModelSpec m;
  m.layers = layers, m.d_model = h, m.heads = heads, m.kv_heads = heads, m.head_dim = h / heads;
  m.ffn = 4 * h, m.gated = false, m.vocab = 51200, m.seq_len = seq;
  m.tied_embeddings = true, m.learned_positions = true, m.dropout = true, m.biases = true;
  return m;
}

ModelSpec llama(std::uint64_t layers, std::uint64_t h, std::uint64_t heads, std::uint64_t ffn) {
  ModelSpec m;
  m.layers = layers, m.d_model = h, m.heads = heads, m.kv_heads = 8, m.head_dim = h / heads;
  m.ffn = ffn, m.gated = true, m.vocab = 128256, m.seq_len = 8192;
  return m;
}

ModelSpec mixtral() {
  ModelSpec m = llama(32, 4096, 32, 14336);
  m.vocab = 32000, m.seq_len = 32768;
  m.experts = 8, m.top_k = 2, m.expert_ffn = 14336;
  return m;
}

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = {
      {"gpt3-175b", gpt(96, 12288, 96, 2048)},
      {"llama3-8b", llama(32, 4096, 32, 14336)},
      {"llama3-70b", llama(80, 8192, 64, 28672)},
      {"llama3-405b", llama(126, 16384, 128, 53248)},
      {"mixtral-8x7b", mixtral()},
  };
  return presets;
}

std::string model_preset_names() {
  std::string s;
  for (const ModelPreset& p : model_presets()) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

}  // namespace

}  // namespace detail

ModelSpec parse_model(const Cursor& c) {
  ModelSpec m;
  m.name = "custom";
  if (c.raw().is_string()) {
    const std::string name = c.as_string();
    for (const detail::ModelPreset& p : detail::model_presets())
      if (name == p.name) {
        m = p.spec;
        m.name = name;
        return m;
      }
    c.fail(fmt::format("unknown model preset '{}' (known: {})", name, detail::model_preset_names()));
  }
  c.expect_object();
  c.only_keys({"preset", "layers", "d_model", "heads", "kv_heads", "head_dim", "ffn", "gated", "vocab", "seq_len",
               "tied_embeddings", "learned_positions", "dropout", "biases", "experts", "top_k", "expert_ffn",
               "capacity_factor", "moe_every", "parallel_block"});
  bool preset = false;
  if (auto p = c.find("preset")) {
    if (!p->raw().is_string()) p->fail(fmt::format("expected a model preset name ({})", detail::model_preset_names()));
    m = parse_model(*p);
    preset = true;
  }
  constexpr std::uint64_t kMaxDim = std::uint64_t{1} << 24;
  const auto dim = [&](const char* key, std::uint64_t& field, std::uint64_t max) {
    if (auto v = c.find(key))
      field = v->as_positive_u64(max);
    else if (!preset && field == 0)
      c.fail(fmt::format("missing \"{}\" (or give a \"preset\": {})", key, detail::model_preset_names()));
  };
  const std::uint64_t heads_before = m.heads, d_before = m.d_model;
  dim("layers", m.layers, 4096);
  dim("d_model", m.d_model, kMaxDim);
  dim("heads", m.heads, 65536);
  if (auto v = c.find("kv_heads")) m.kv_heads = v->as_positive_u64(65536);
  else if (!preset) m.kv_heads = m.heads;
  if (auto v = c.find("head_dim")) m.head_dim = v->as_positive_u64(65536);
  else if (!preset || m.heads != heads_before || m.d_model != d_before) {
    if (m.d_model % m.heads != 0)
      c.fail(fmt::format("d_model {} is not divisible by heads {}: give \"head_dim\"", m.d_model, m.heads));
    m.head_dim = m.d_model / m.heads;
  }
  dim("ffn", m.ffn, kMaxDim);
  dim("vocab", m.vocab, kMaxDim);
  dim("seq_len", m.seq_len, kMaxDim);
  const auto flag = [&](const char* key, bool& field) {
    if (auto v = c.find(key)) field = v->as_bool();
  };
  flag("gated", m.gated);
  flag("tied_embeddings", m.tied_embeddings);
  flag("learned_positions", m.learned_positions);
  flag("dropout", m.dropout);
  flag("biases", m.biases);
  flag("parallel_block", m.parallel_block);
  if (auto v = c.find("experts")) m.experts = v->as_positive_u64(65536);
  if (auto v = c.find("top_k")) m.top_k = v->as_positive_u64(65536);
  if (auto v = c.find("expert_ffn")) m.expert_ffn = v->as_positive_u64(kMaxDim);
  if (auto v = c.find("capacity_factor")) {
    m.capacity_factor = v->as_positive_double(64);
    if (m.capacity_factor < 1) v->fail(fmt::format("capacity_factor {:g} must be at least 1", m.capacity_factor));
  }
  if (auto v = c.find("moe_every")) m.moe_every = v->as_positive_u64(4096);
  if (m.experts > 0 && m.expert_ffn == 0) m.expert_ffn = m.ffn;
  if (m.experts == 0)
    for (const char* key : {"top_k", "expert_ffn", "capacity_factor", "moe_every"})
      if (auto v = c.find(key)) v->fail(fmt::format("\"{}\" needs \"experts\" (a mixture-of-experts model)", key));
  if (m.parallel_block && m.experts > 0)
    c.at("parallel_block").fail("a parallel attention+MLP block with mixture-of-experts layers is not modelled");
  if (m.top_k > m.experts && m.experts > 0)
    (c.find("top_k") ? *c.find("top_k") : c).fail(fmt::format("top_k {} is more than the {} experts", m.top_k, m.experts));
  if (m.kv_heads > m.heads || m.heads % m.kv_heads != 0)
    (c.find("kv_heads") ? *c.find("kv_heads") : c)
        .fail(fmt::format("kv_heads {} must divide heads {} (MHA: equal, GQA: a divisor, MQA: 1)", m.kv_heads,
                          m.heads));
  return m;
}

namespace {

// A strategy's axes: one mesh axis name, or a list of them.
StrategySpec read_strategy(const Cursor& c) {
  StrategySpec s;
  s.given = true;
  s.where = c.ref();
  if (c.raw().is_string()) {
    s.axes.push_back({c.as_string(), c.ref()});
    return s;
  }
  for (const Cursor& e : c.elements()) s.axes.push_back({e.as_string(), e.ref()});
  return s;
}

}  // namespace

TrainingSpec read_training(const Cursor& c) {
  c.expect_object();
  c.only_keys({"model", "global_batch", "global_batch_tokens", "microbatch", "dtype", "gradient_dtype", "causal",
               "parallelism", "recompute", "overlap", "allow_oom"});
  TrainingSpec t;
  t.where = c.ref();
  const Cursor model = c.at("model");
  t.model = parse_model(model);
  t.model_at = model.ref();
  // The batch in sequences, or in tokens (a whole number of sequences).
  const std::optional<Cursor> sequences = c.find("global_batch"), tokens = c.find("global_batch_tokens");
  if (sequences && tokens) tokens->fail("give one of \"global_batch\" (sequences) and \"global_batch_tokens\"");
  if (tokens) {
    t.global_batch_tokens = tokens->as_positive_u64(std::uint64_t{1} << 50);
    t.batch_at = tokens->ref();
  } else {
    const Cursor batch = c.at("global_batch");
    t.global_batch = batch.as_positive_u64(std::uint64_t{1} << 30);
    t.batch_at = batch.ref();
  }
  if (auto v = c.find("microbatch")) t.microbatch = v->as_positive_u64(std::uint64_t{1} << 20);
  if (auto v = c.find("dtype")) t.dtype = v->as_string();
  if (auto v = c.find("gradient_dtype")) {
    const std::string g = v->as_string();
    if (g == "fp32") t.gradient_bytes = 4;
    else if (g != "bf16" && g != "fp16") v->fail(fmt::format("gradient_dtype '{}': expected bf16, fp16 or fp32", g));
  }
  if (auto v = c.find("causal")) t.causal = v->as_bool();
  if (auto v = c.find("allow_oom")) t.allow_oom = v->as_bool();
  if (auto v = c.find("recompute")) {
    const std::string r = v->as_string();
    if (r == "none") t.recompute = Recompute::None;
    else if (r == "selective") t.recompute = Recompute::Selective;
    else if (r == "full") t.recompute = Recompute::Full;
    else v->fail(fmt::format("recompute '{}': expected none, selective or full", r));
  }
  if (auto o = c.find("overlap")) {
    o->expect_object();
    o->only_keys({"gradient_reduction", "fsdp_prefetch", "tensor"});
    if (auto v = o->find("gradient_reduction")) t.overlap.gradient_reduction = v->as_bool();
    if (auto v = o->find("fsdp_prefetch")) t.overlap.fsdp_prefetch = v->as_bool();
    if (auto v = o->find("tensor")) {
      t.overlap.tensor = v->as_bool();
      t.overlap_tensor_at = v->ref();
    }
  }
  if (auto pc = c.find("parallelism")) {
    TrainingSpec::Plan& p = t.parallelism;
    pc->expect_object();
    pc->only_keys({"data", "fsdp", "tensor", "sequence_parallel", "pipeline", "schedule", "virtual_stages",
                   "sharded_optimizer", "expert", "context", "stage_layers", "first_stage_layers",
                   "last_stage_layers"});
    p.given = true;
    p.where = pc->ref();
    if (auto v = pc->find("tensor")) p.tensor = read_strategy(*v);
    if (auto v = pc->find("fsdp")) p.fsdp = read_strategy(*v);
    if (auto v = pc->find("expert")) p.expert = read_strategy(*v);
    if (auto v = pc->find("context")) p.context = read_strategy(*v);
    if (auto v = pc->find("pipeline")) {
      if (!v->raw().is_string()) v->fail("expected one mesh axis name (a string)");
      p.pipeline = read_strategy(*v);
    }
    if (auto v = pc->find("data")) p.data = read_strategy(*v);
    if (auto v = pc->find("sequence_parallel")) {
      p.sequence_parallel = v->as_bool();
      p.sequence_parallel_at = v->ref();
    }
    if (auto v = pc->find("sharded_optimizer")) {
      p.sharded_optimizer = v->as_bool();
      p.sharded_optimizer_at = v->ref();
    }
    if (auto v = pc->find("schedule")) {
      const std::string s = v->as_string();
      if (s == "gpipe") p.schedule = Schedule::GPipe;
      else if (s == "1f1b") p.schedule = Schedule::OneFOneB;
      else if (s == "interleaved") p.schedule = Schedule::Interleaved;
      else v->fail(fmt::format("schedule '{}': expected gpipe, 1f1b or interleaved", s));
      p.schedule_at = v->ref();
    }
    if (auto v = pc->find("virtual_stages")) {
      p.virtual_stages = v->as_positive_u64(1024);
      p.virtual_stages_at = v->ref();
    }
    if (auto v = pc->find("stage_layers")) {
      for (const Cursor& e : v->elements()) p.stage_layers.push_back(e.as_positive_u64(1u << 20));
      p.stage_layers_at = v->ref();
    }
    if (auto v = pc->find("first_stage_layers")) {
      p.first_stage_layers = v->as_positive_u64(1u << 20);
      p.first_stage_layers_at = v->ref();
    }
    if (auto v = pc->find("last_stage_layers")) {
      p.last_stage_layers = v->as_positive_u64(1u << 20);
      p.last_stage_layers_at = v->ref();
    }
  }
  return t;
}

// ---------------------------------------------------------------- formulas

LayerParams layer_params(const ModelSpec& m, bool moe) {
  LayerParams p;
  const std::uint64_t h = m.d_model, q = m.heads * m.head_dim, kv = m.kv_heads * m.head_dim;
  p.qkv = h * (q + 2 * kv) + (m.biases ? q + 2 * kv : 0);
  p.out = q * h;
  // Replicated in tensor parallelism: the norms (one in a parallel block) and
  // the row-parallel biases.
  p.replicated = (m.parallel_block ? 1 : 2) * (m.biases ? 2 * h : h) + (m.biases ? h : 0);
  if (moe) {
    // The router and the experts (split over the expert axes, not by TP).
    const std::uint64_t up = m.gated ? 2 * m.expert_ffn : m.expert_ffn;
    p.router = h * m.experts;
    p.experts = m.experts * (h * up + m.expert_ffn * h + (m.biases ? up + h : 0));
    return p;
  }
  const std::uint64_t up = m.gated ? 2 * m.ffn : m.ffn;
  p.up = h * up + (m.biases ? up : 0);
  p.down = m.ffn * h;
  if (m.biases) p.replicated += h;  // the down projection's bias
  return p;
}

std::uint64_t LayerParams::sharded() const { return qkv + out + up + down; }

std::uint64_t replicated_kv_params(const Training& t) {
  const ModelSpec& m = t.model;
  return (t.kv_replicas - 1) * 2 * m.kv_heads * m.head_dim * (m.d_model + (m.biases ? 1 : 0));
}

std::uint64_t sharded_per_chip(const Training& t, const LayerParams& lp) {
  return (lp.sharded() + replicated_kv_params(t)) / t.tp;
}

std::uint64_t model_parameters(const ModelSpec& m) {
  const std::uint64_t h = m.d_model;
  std::uint64_t n = 0;
  for (std::uint64_t l = 0; l < m.layers; ++l) {
    const LayerParams p = layer_params(m, m.moe_layer(l));
    n += p.sharded() + p.replicated + p.router + p.experts;
  }
  n += m.vocab * h;                              // input embedding
  if (!m.tied_embeddings) n += m.vocab * h;      // LM head
  if (m.learned_positions) n += m.seq_len * h;   // position embedding
  n += m.biases ? 2 * h : h;                     // final norm
  return n;
}

StepFlops step_flops(const Training& t) {
  const ModelSpec& m = t.model;
  using U = unsigned __int128;
  const U tokens = U{t.global_batch} * m.seq_len;
  // Keys per query: all s, or s/2 on average under a causal mask.
  const U keys = t.causal ? m.seq_len / 2 : m.seq_len;
  // Per token and layer, forward: 2 FLOPs per weight a token meets in a matmul
  // (biases are additions, not counted; an MoE token meets the router and
  // top_k experts) and QK^T and PV: 2 x 2 x keys x heads x head_dim.
  const U attention_weights = U{m.d_model} * m.heads * m.head_dim + 2 * U{m.d_model} * m.kv_heads * m.head_dim +
                              U{m.heads} * m.head_dim * m.d_model;
  const U dense_mlp = U{m.d_model} * m.ffn * (m.gated ? 3 : 2);
  const U moe_mlp = U{m.d_model} * m.experts + U{m.top_k} * m.d_model * m.expert_ffn * (m.gated ? 3 : 2);
  const U attention = 4 * keys * m.heads * m.head_dim;
  U forward = 0;
  for (std::uint64_t l = 0; l < m.layers; ++l)
    forward += 2 * (attention_weights + (m.moe_layer(l) ? moe_mlp : dense_mlp)) + attention;
  const U head_forward = 2 * U{m.d_model} * m.vocab;
  StepFlops f;
  f.model = tokens * (3 * (forward + head_forward));
  U recomputed = 0;
  if (t.recompute == Recompute::Full) recomputed = forward;
  if (t.recompute == Recompute::Selective) recomputed = m.layers * attention;
  // Replicated KV heads: each replica projects its keys and values (forward 2,
  // backward 4 FLOPs per weight and token; recomputed with full recompute).
  const U replicated_kv = 2 * U{m.d_model} * m.kv_heads * m.head_dim * (t.kv_replicas - 1) * m.layers;
  f.hardware = f.model + tokens * recomputed + tokens * replicated_kv * (t.recompute == Recompute::Full ? 8 : 6);
  return f;
}

std::uint64_t dispatched_tokens(const Training& t, std::uint64_t tokens) {
  const ModelSpec& m = t.model;
  // Copies of the chip's tokens sent to experts, padded to the capacity.
  return static_cast<std::uint64_t>(std::ceil(static_cast<double>(tokens * m.top_k) * m.capacity_factor));
}

ActivationBytes activation_bytes(const Training& t, bool moe) {
  const ModelSpec& m = t.model;
  const std::uint64_t e = 2;  // 16-bit activations
  const std::uint64_t s = m.seq_len / t.cp, b = t.microbatch, h = m.d_model, tp = t.tp;
  const std::uint64_t sp = t.plan.sequence_parallel ? tp : 1;  // what divides the parts outside the TP regions
  // (K and V of every KV head the TP group holds, its replicas too.)
  const std::uint64_t sb = s * b, q = m.heads * m.head_dim, kv = m.kv_heads * t.kv_replicas * m.head_dim;
  ActivationBytes a;
  // Outside the tensor-parallel regions: both norms' inputs, the QKV and MLP
  // inputs (the norms' outputs), the two dropout masks after the projections.
  a.outside = (2 * e * sb * h + e * sb * h + e * sb * h + (m.dropout ? 2 * sb * h : 0)) / sp;
  // A parallel block has one norm, whose output both branches read.
  if (m.parallel_block) a.outside = (e * sb * h + e * sb * h + (m.dropout ? 2 * sb * h : 0)) / sp;
  // Inside, split by TP: Q, K, V, the out-projection's input, and (dense) the up
  // projection's outputs and the activation's output.
  a.inside = (e * sb * q + 2 * e * sb * kv + e * sb * q) / tp;
  if (moe) {
    // The router's logits, the dispatched tokens, each expert's up outputs and
    // activation output, the expert outputs to combine (tokens split by SP).
    const std::uint64_t d = dispatched_tokens(t, sb / sp);
    const std::uint64_t up = m.gated ? 2 * m.expert_ffn : m.expert_ffn;
    a.inside += e * (sb / sp) * m.experts + e * d * (h + up + m.expert_ffn + h);
  } else {
    const std::uint64_t up = m.gated ? 2 * m.ffn : m.ffn;
    a.inside += (e * sb * up + e * sb * m.ffn) / tp;
  }
  // The attention core: softmax output; with dropout also its mask and output.
  // (With context parallelism a chip's s/cp queries meet all s keys over the ring.)
  a.core = (e + (m.dropout ? 1 + e : 0)) * m.heads * s * (s * t.cp) * b / tp;
  a.input = e * sb * h / sp;
  switch (t.recompute) {
    case Recompute::None: a.kept = a.outside + a.inside + a.core; break;
    case Recompute::Selective: a.kept = a.outside + a.inside; break;
    case Recompute::Full: a.kept = a.input; break;
  }
  return a;
}

double microbatches_in_flight(const Training& t, std::uint64_t stage) {
  const double p = static_cast<double>(t.pp), m = static_cast<double>(t.microbatches);
  const double v = static_cast<double>(t.plan.virtual_stages), s = static_cast<double>(stage);
  // GPipe runs every forward pass before the first backward, with or without
  // stages; without stages the others take one microbatch at a time. No
  // schedule holds more than its m microbatches. (Stage 0 of the interleaved
  // schedule: p (1 + (p - 1) / (p v)), Narayanan et al.'s.)
  switch (t.plan.schedule) {
    case Schedule::GPipe: return m;
    case Schedule::OneFOneB:
      return t.pp == 1 ? 1 : std::min(p - s, m);
    case Schedule::Interleaved:
      return t.pp == 1 ? 1 : std::min((2 * (p - s - 1) + (v - 1) * p + 1) / v, m);
  }
  return 1;
}

LayerRange chunk_range(const Training& t, std::uint64_t g) {
  const std::vector<std::uint64_t>& n = t.plan.chunk_layers;
  if (n.empty()) {
    const std::uint64_t per_chunk = t.model.layers / (t.pp * t.plan.virtual_stages);
    return {g * per_chunk, (g + 1) * per_chunk};
  }
  MESHSIM_ASSERT(g < n.size(), "a model chunk of the plan");
  LayerRange r;
  for (std::uint64_t k = 0; k < g; ++k) r.first += n[k];
  r.end = r.first + n[g];
  return r;
}

std::vector<std::uint64_t> stage_layers(const Training& t, std::uint64_t stage) {
  std::vector<std::uint64_t> out;
  for (std::uint64_t c = 0; c < t.plan.virtual_stages; ++c) {
    const LayerRange r = chunk_range(t, c * t.pp + stage);
    for (std::uint64_t l = r.first; l < r.end; ++l) out.push_back(l);
  }
  return out;
}

std::uint64_t most_stage_layers(const Training& t) {
  std::uint64_t most = 0;
  for (std::uint64_t s = 0; s < t.pp; ++s) most = std::max<std::uint64_t>(most, stage_layers(t, s).size());
  return most;
}

StageParams stage_params(const Training& t, std::uint64_t stage) {
  const ModelSpec& m = t.model;
  StageParams p;
  for (std::uint64_t l : stage_layers(t, stage)) {
    const LayerParams lp = layer_params(m, m.moe_layer(l));
    ++p.layers;
    // Per chip: sharded matrices over TP, replicated norms and router, experts over EP.
    p.dense_per_chip += sharded_per_chip(t, lp) + lp.replicated + lp.router;
    p.expert_per_chip += lp.experts / t.ep;
  }
  const std::uint64_t h = m.d_model;
  if (stage == 0) {  // the input embedding (vocabulary-parallel) and positions
    p.dense_per_chip += m.vocab * h / t.tp + (m.learned_positions ? m.seq_len * h : 0);
  }
  if (stage + 1 == t.pp) {  // the final norm and the LM head (untied, or the tied copy with a pipeline)
    p.dense_per_chip += m.biases ? 2 * h : h;
    if (!m.tied_embeddings || t.pp > 1) p.dense_per_chip += m.vocab * h / t.tp;
  }
  p.per_chip = p.dense_per_chip + p.expert_per_chip;
  return p;
}

StepFormulas step_formulas(const Training& t, const Hardware& hw) {
  StepFormulas f;
  f.parameters = model_parameters(t.model);
  const StepFlops flops = step_flops(t);
  f.model_flops = static_cast<long double>(flops.model);
  f.hardware_flops = static_cast<long double>(flops.hardware);
  f.peak_flops_per_s = hw.chip.bf16_flops_per_s;
  const std::uint64_t opt_shards = t.fsdp * (t.plan.sharded_optimizer ? t.dp : 1);
  for (std::uint64_t s = 0; s < t.pp; ++s) {
    const StageParams p = stage_params(t, s);
    const std::uint64_t weights = 2 * p.per_chip / t.fsdp, grads = t.gradient_bytes * p.per_chip / t.fsdp;
    const std::uint64_t opt = 12 * p.per_chip / opt_shards;
    std::uint64_t kept = 0, largest_layer = 0, largest_full = 0;
    for (std::uint64_t l : stage_layers(t, s)) {
      const bool moe = t.model.moe_layer(l);
      const ActivationBytes a = activation_bytes(t, moe);
      kept += a.kept;
      const LayerParams lp = layer_params(t.model, moe);
      largest_layer =
          std::max(largest_layer, 2 * (sharded_per_chip(t, lp) + lp.replicated + lp.router + lp.experts / t.ep));
      largest_full = std::max(largest_full, a.outside + a.inside + a.core);
    }
    // The stage's layers' activations, for as many microbatches as are in flight.
    const double in_flight = microbatches_in_flight(t, s);
    const auto acts = static_cast<std::uint64_t>(static_cast<double>(kept) * in_flight);
    std::uint64_t working = 0;
    // FSDP: the gathered weights of the unit in use (a layer, or the first
    // stage's embedding, or the last stage's head), and of the next one when
    // prefetched.
    const std::uint64_t h = t.model.d_model, vocab = t.model.vocab / t.tp;
    std::uint64_t unit = largest_layer;
    if (s == 0) unit = std::max(unit, 2 * (vocab * h + (t.model.learned_positions ? t.model.seq_len * h : 0)));
    // (The last stage's unit: the head when it has its own, and the final norm.)
    if (s + 1 == t.pp)
      unit = std::max(unit, 2 * ((!t.model.tied_embeddings || t.pp > 1 ? vocab * h : 0) + (t.model.biases ? 2 : 1) * h));
    if (t.fsdp > 1) working += (t.overlap.fsdp_prefetch ? 2 : 1) * unit;
    // Full recompute: one layer's activations are rebuilt for its backward pass.
    if (t.recompute == Recompute::Full) working += largest_full;
    // The last stage: one microbatch's logits (16-bit) and their fp32 softmax
    // for the loss's backward, over the chip's vocabulary shard.
    if (s + 1 == t.pp) working += (2 + 4) * (t.model.seq_len / t.cp) * t.microbatch * vocab;
    const std::uint64_t peak = weights + grads + opt + acts + working;
    if (s == 0 || peak > f.peak_bytes) {
      f.weight_bytes = weights, f.gradient_bytes = grads, f.optimizer_bytes = opt;
      f.activation_bytes = acts, f.working_bytes = working, f.peak_bytes = peak;
      f.microbatches_in_flight = in_flight;
      f.peak_stage_layers = stage_layers(t, s).size();
      f.activation_bytes_per_layer = kept / std::max<std::uint64_t>(f.peak_stage_layers, 1);
    }
  }
  f.hbm_bytes = hw.chip.hbm_bytes;
  return f;
}

}  // namespace meshsim::workloads
