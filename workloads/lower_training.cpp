// Lowers one training step to ops (docs/TRAINING.md): per pipeline stage, the
// passes of its schedule (forward and backward of each microbatch through the
// stage's layers), each layer as its local matmuls and elementwise kernels with
// the tensor-parallel collectives between them; FSDP gathers and reductions on a
// stream of their own; data-parallel gradient reductions per layer; the
// optimizer step. Ops run on their stage's chips only; stages hand activations
// and gradients to each other as sends between counterpart chips.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

#include "base/error.hpp"
#include "workloads/lowering.hpp"
#include "workloads/training_detail.hpp"

namespace meshsim::workloads::detail {

namespace {

using ChipList = std::shared_ptr<const std::vector<topology::ChipId>>;

struct Pass {
  bool forward = true;
  std::uint64_t chunk = 0;  // the stage's model chunk (0 .. v-1)
  std::uint64_t microbatch = 0;
};

// The order in which stage `s` of `p` runs its passes: GPipe (all forwards,
// then all backwards), 1F1B (p - s - 1 warm-up forwards, then one forward and
// one backward, then the remaining backwards) and Megatron's interleaved 1F1B
// (microbatches in groups of p through the v chunks; 2(p - s - 1) + (v - 1)p
// warm-up forwards).
std::vector<Pass> stage_schedule(Schedule schedule, std::uint64_t p, std::uint64_t s, std::uint64_t m,
                                 std::uint64_t v) {
  std::vector<Pass> out;
  if (schedule == Schedule::GPipe) {
    for (std::uint64_t j = 0; j < m; ++j) out.push_back({true, 0, j});
    for (std::uint64_t j = 0; j < m; ++j) out.push_back({false, 0, j});
    return out;
  }
  const std::uint64_t total = m * v;
  const auto virtual_pass = [&](std::uint64_t k, bool forward) {
    const std::uint64_t group = k / (p * v), in_group = k % (p * v);
    const std::uint64_t chunk = in_group / p;
    return Pass{forward, forward ? chunk : v - 1 - chunk, group * p + in_group % p};
  };
  const std::uint64_t warm =
      std::min(total, v == 1 ? p - s - 1 : 2 * (p - s - 1) + (v - 1) * p);
  for (std::uint64_t k = 0; k < warm; ++k) out.push_back(virtual_pass(k, true));
  for (std::uint64_t i = 0; warm + i < total; ++i) {
    out.push_back(virtual_pass(warm + i, true));
    out.push_back(virtual_pass(i, false));
  }
  for (std::uint64_t i = total - warm; i < total; ++i) out.push_back(virtual_pass(i, false));
  return out;
}

class StepLowerer {
 public:
  StepLowerer(Workload& w, Training& t, const Cursor& where)
      : w_(w), t_(t), m_(t.model), pointer_(where.pointer()), torus_(w.make_torus()) {}

  void run() {
    const std::uint64_t p = t_.pp, v = t_.plan.virtual_stages;
    layers_per_chunk_ = m_.layers / (p * v);
    build_stages();
    // Emit the stages' passes in an order in which every op's dependencies come
    // first: round robin, a stage waiting while the send it needs is missing.
    std::vector<std::vector<Pass>> schedules;
    for (std::uint64_t s = 0; s < p; ++s)
      schedules.push_back(stage_schedule(t_.plan.schedule, p, s, t_.microbatches, v));
    std::vector<std::size_t> next(p, 0);
    for (bool progress = true; progress;) {
      progress = false;
      for (std::uint64_t s = 0; s < p; ++s)
        while (next[s] < schedules[s].size() && ready(s, schedules[s][next[s]])) {
          run_pass(s, schedules[s][next[s]++]);
          progress = true;
        }
    }
    for (std::uint64_t s = 0; s < p; ++s)
      MESHSIM_ASSERT(next[s] == schedules[s].size(), "pipeline schedule cannot be ordered");
    for (std::uint64_t s = 0; s < p; ++s) optimizer_step(s);
    t_.lowered_model_flops = model_flops_;
    t_.lowered_hardware_flops = hardware_flops_;
  }

 private:
  // ------------------------------------------------------------ chips
  void build_stages() {
    const std::uint64_t p = t_.pp;
    stages_.assign(p, Stage{});
    coords_ = mesh_coordinates(w_, torus_);
    t_.chip_stage.assign(torus_.num_chips(), 0);
    if (p == 1) return;  // every op runs on every chip
    const auto axis = static_cast<std::size_t>(t_.plan.pipeline);
    std::vector<std::vector<topology::ChipId>> sets(p);
    for (topology::ChipId c = 0; c < torus_.num_chips(); ++c) {
      if (coords_[c].empty()) continue;
      sets[static_cast<std::size_t>(coords_[c][axis])].push_back(c);
      t_.chip_stage[c] = coords_[c][axis];
      chip_at_[coords_[c]] = c;
    }
    for (std::uint64_t s = 0; s < p; ++s) stages_[s].chips = std::make_shared<const std::vector<topology::ChipId>>(sets[s]);
  }
  // The chips of stage `from`, each with its counterpart on stage `to`.
  std::vector<std::pair<topology::ChipId, topology::ChipId>> pairs(std::uint64_t from, std::uint64_t to) const {
    std::vector<std::pair<topology::ChipId, topology::ChipId>> out;
    const auto axis = static_cast<std::size_t>(t_.plan.pipeline);
    for (topology::ChipId c : *stages_[from].chips) {
      std::vector<int> k = coords_[c];
      k[axis] = static_cast<int>(to);
      out.emplace_back(c, chip_at_.at(k));
    }
    return out;
  }
  ChipList union_of(std::uint64_t a, std::uint64_t b) const {
    std::vector<topology::ChipId> u(*stages_[a].chips);
    u.insert(u.end(), stages_[b].chips->begin(), stages_[b].chips->end());
    std::sort(u.begin(), u.end());
    return std::make_shared<const std::vector<topology::ChipId>>(std::move(u));
  }

  // ------------------------------------------------------------ emitting
  struct Stage {
    ChipList chips;
    std::optional<std::uint32_t> main, fsdp, data;  // the last op of each stream
    std::optional<std::uint32_t> main_before_layer;  // the main stream before the current layer began
    std::optional<std::uint32_t> main_before_previous_layer;
    std::vector<std::uint64_t> backward_done;  // per chunk: backward passes finished
  };
  enum class Stream { Main, Fsdp, Data, None };

  std::uint32_t emit(Op op, Role role, std::uint64_t stage, Stream stream, std::vector<std::uint32_t> deps = {},
                     bool recomputed = false) {
    Stage& st = stages_[stage];
    std::optional<std::uint32_t>* last = stream == Stream::Main   ? &st.main
                                         : stream == Stream::Fsdp ? &st.fsdp
                                         : stream == Stream::Data ? &st.data
                                                                  : nullptr;
    if (last && last->has_value()) deps.push_back(**last);
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    op.deps = std::move(deps);
    op.pointer = pointer_;
    if (!op.chips) op.chips = st.chips;
    if (op.kind == OpKind::Matmul) {
      const unsigned __int128 chips = op.chips ? op.chips->size() : torus_.num_chips();
      const unsigned __int128 f = 2 * static_cast<unsigned __int128>(op.batch) * op.m * op.k * op.n * chips;
      hardware_flops_ += f;
      if (!recomputed) model_flops_ += f;
    }
    const auto index = static_cast<std::uint32_t>(w_.ops.size());
    w_.ops.push_back(std::move(op));
    t_.op_roles.push_back(role);
    t_.op_stages.push_back(w_.ops.back().kind == OpKind::Send ? -1 : static_cast<int>(stage));
    if (last) *last = index;
    return index;
  }
  Op named(OpKind kind, const std::string& name) const {
    Op op;
    op.kind = kind;
    op.name = prefix_ + name;
    op.group = prefix_;
    op.dtype = t_.dtype;
    return op;
  }
  std::uint32_t matmul(std::uint64_t s, const std::string& name, std::uint64_t m, std::uint64_t k, std::uint64_t n,
                       std::uint64_t batch = 1, std::vector<std::uint32_t> deps = {}) {
    Op op = named(OpKind::Matmul, name);
    op.m = m, op.k = k, op.n = n, op.batch = batch;
    return emit(std::move(op), Role::Compute, s, Stream::Main, std::move(deps), recomputing_);
  }
  std::uint32_t elementwise(std::uint64_t s, const std::string& name, std::uint64_t bytes) {
    Op op = named(OpKind::Elementwise, name);
    op.hbm_bytes = bytes;
    return emit(std::move(op), Role::Compute, s, Stream::Main);
  }
  // A collective over a strategy's axes on stage s (V: bytes within one group).
  std::uint32_t collective(std::uint64_t s, const std::string& name, OpKind kind, const std::vector<int>& axes,
                           std::uint64_t bytes, Role role, Stream stream, std::vector<std::uint32_t> deps = {}) {
    Op op = named(kind, name);
    op.mesh_axes = axes;
    op.hw_axes = hardware_axes(w_, axes);
    op.bytes = std::max<std::uint64_t>(bytes, 1);
    return emit(std::move(op), role, s, stream, std::move(deps));
  }
  // The tensor-parallel collective after a row-parallel matmul (forward) or a
  // column-parallel one's input gradient (backward): an all-reduce, or with
  // sequence parallelism a reduce-scatter.
  void tensor_reduce(std::uint64_t s, const std::string& name) {
    if (t_.tp == 1) return;
    collective(s, name, t_.plan.sequence_parallel ? OpKind::ReduceScatter : OpKind::AllReduce, t_.plan.tensor,
               e_ * tokens() * m_.d_model, Role::Tensor, Stream::Main);
  }
  // With sequence parallelism: gather the sequence-split activations (or
  // gradients) before a tensor-parallel region.
  void tensor_gather(std::uint64_t s, const std::string& name) {
    if (t_.tp == 1 || !t_.plan.sequence_parallel) return;
    collective(s, name, OpKind::AllGather, t_.plan.tensor, e_ * tokens() * m_.d_model, Role::Tensor, Stream::Main);
  }

  // ------------------------------------------------------------ shapes
  std::uint64_t tokens() const { return t_.microbatch * m_.seq_len; }  // S = b s
  std::uint64_t sp() const { return t_.plan.sequence_parallel ? t_.tp : 1; }
  std::uint64_t keys() const { return t_.causal ? m_.seq_len / 2 : m_.seq_len; }
  std::uint64_t heads_local() const { return m_.heads / t_.tp; }
  std::uint64_t qkv_local() const { return (m_.heads + 2 * m_.kv_heads) / t_.tp * m_.head_dim; }
  std::uint64_t q_local() const { return heads_local() * m_.head_dim; }
  std::uint64_t ffn_local() const { return m_.ffn / t_.tp; }
  std::uint64_t up_local() const { return (m_.gated ? 2 : 1) * ffn_local(); }
  std::uint64_t vocab_local() const { return m_.vocab / t_.tp; }
  std::uint64_t layer_bytes() const {  // one layer's weights on one chip before FSDP
    const LayerParams l = layer_params(m_);
    return e_ * (l.sharded() / t_.tp + l.replicated);
  }
  std::uint64_t embedding_bytes() const { return e_ * vocab_local() * m_.d_model; }

  // ------------------------------------------------------------ passes
  std::uint64_t global_chunk(std::uint64_t s, std::uint64_t chunk) const { return chunk * t_.pp + s; }
  std::uint64_t last_chunk() const { return t_.pp * t_.plan.virtual_stages - 1; }

  bool ready(std::uint64_t s, const Pass& pass) const {
    const std::uint64_t g = global_chunk(s, pass.chunk);
    if (pass.forward) return g == 0 || sends_.count({true, g, pass.microbatch});
    return g == last_chunk() || sends_.count({false, g, pass.microbatch});
  }

  void run_pass(std::uint64_t s, const Pass& pass) {
    const std::uint64_t g = global_chunk(s, pass.chunk), j = pass.microbatch;
    const std::string dir = pass.forward ? "F" : "B";
    std::vector<std::uint32_t> in;
    if (pass.forward && g > 0) in.push_back(sends_.at({true, g, j}));
    if (!pass.forward && g < last_chunk()) in.push_back(sends_.at({false, g, j}));
    Stage& st = stages_[s];
    if (st.backward_done.empty()) st.backward_done.assign(t_.plan.virtual_stages, 0);
    const std::uint64_t first = g * layers_per_chunk_, end = first + layers_per_chunk_;
    if (pass.forward) {
      prefix_ = fmt::format("F{}.", j);
      if (g == 0) embedding_forward(s, in);
      for (std::uint64_t l = first; l < end; ++l) layer_forward(s, l, l == first && g > 0 ? in : std::vector<std::uint32_t>{});
      if (g == last_chunk()) head_forward(s);
      if (g < last_chunk()) send(s, g, j, true);
    } else {
      const bool last_microbatch = ++st.backward_done[pass.chunk] == t_.microbatches;
      prefix_ = fmt::format("B{}.", j);
      if (g == last_chunk()) head_backward(s, in);
      for (std::uint64_t l = end; l-- > first;) {
        const std::vector<std::uint32_t> deps = l + 1 == end && g < last_chunk() ? in : std::vector<std::uint32_t>{};
        layer_backward(s, l, deps);
        if (last_microbatch) data_reduce(s, fmt::format("dp.L{}", l), layer_bytes() / t_.fsdp);
      }
      if (g == 0) {
        prefix_ = fmt::format("B{}.", j);
        elementwise(s, "embed.bwd", 2 * e_ * tokens() * m_.d_model / sp());
        if (t_.fsdp > 1)
          collective(s, "embed.reduce", OpKind::ReduceScatter, t_.plan.fsdp, embedding_bytes(), Role::Fsdp,
                     Stream::Fsdp, {*st.main});
        if (last_microbatch) data_reduce(s, "dp.embed", embedding_bytes() / t_.fsdp);
      }
      if (g == last_chunk() && last_microbatch && (!m_.tied_embeddings || t_.pp > 1))
        data_reduce(s, "dp.head", embedding_bytes() / t_.fsdp);
      if (g > 0) send(s, g, j, false);
    }
  }

  // Activations (forward) or their gradients (backward) to the next chunk's stage.
  void send(std::uint64_t s, std::uint64_t g, std::uint64_t j, bool forward) {
    const std::uint64_t to_chunk = forward ? g + 1 : g - 1, to = to_chunk % t_.pp;
    Op op;
    op.kind = OpKind::Send;
    op.name = fmt::format("{}{}.send.{}to{}", forward ? "F" : "B", j, s, to);
    if (t_.plan.virtual_stages > 1) op.name += fmt::format(".c{}", to_chunk);
    op.group = op.name;
    op.dtype = t_.dtype;
    op.bytes = e_ * tokens() * m_.d_model / sp();
    op.pairs = pairs(s, to);
    op.src = op.pairs.front().first;
    op.dst = op.pairs.front().second;
    op.chips = union_of(s, to);
    sends_[{forward, to_chunk, j}] = emit(std::move(op), Role::Pipeline, s, Stream::None, {*stages_[s].main});
  }

  // FSDP: the layer's weights gathered over the FSDP axes before it runs, one
  // layer ahead when prefetching (the gather waits for the main stream to have
  // finished the layer before the previous one: two buffers).
  std::optional<std::uint32_t> fsdp_gather(std::uint64_t s, const std::string& name, std::uint64_t bytes) {
    if (t_.fsdp == 1) return std::nullopt;
    Stage& st = stages_[s];
    std::vector<std::uint32_t> deps;
    const auto& buffer_free = t_.overlap.fsdp_prefetch ? st.main_before_previous_layer : st.main;
    if (buffer_free) deps.push_back(*buffer_free);
    return collective(s, name, OpKind::AllGather, t_.plan.fsdp, bytes, Role::Fsdp, Stream::Fsdp, deps);
  }
  void begin_layer(std::uint64_t s) {
    Stage& st = stages_[s];
    st.main_before_previous_layer = st.main_before_layer;
    st.main_before_layer = st.main;
  }

  void embedding_forward(std::uint64_t s, const std::vector<std::uint32_t>&) {
    begin_layer(s);
    const auto gather = fsdp_gather(s, "embed.gather", embedding_bytes());
    Op op = named(OpKind::Elementwise, "embed");
    op.hbm_bytes = 2 * e_ * tokens() * m_.d_model / sp();
    emit(std::move(op), Role::Compute, s, Stream::Main, gather ? std::vector<std::uint32_t>{*gather} : std::vector<std::uint32_t>{});
    // The vocabulary-parallel lookup leaves partial sums over the TP group.
    tensor_reduce(s, "embed.reduce");
  }

  void layer_forward(std::uint64_t s, std::uint64_t l, std::vector<std::uint32_t> in) {
    begin_layer(s);
    const std::string saved = prefix_;
    prefix_ += fmt::format("L{}.", l);
    if (const auto gather = fsdp_gather(s, "gather", layer_bytes())) in.push_back(*gather);
    forward_ops(s, in);
    prefix_ = saved;
  }

  // One layer's forward kernels (also what full recompute re-runs).
  void forward_ops(std::uint64_t s, const std::vector<std::uint32_t>& in) {
    const std::uint64_t S = tokens(), h = m_.d_model, e = e_;
    {
      Op op = named(OpKind::Elementwise, "ln1");
      op.hbm_bytes = 2 * e * S * h / sp();
      emit(std::move(op), Role::Compute, s, Stream::Main, in);
    }
    tensor_gather(s, "ag1");
    matmul(s, "qkv", S, h, qkv_local());
    attention_core(s);
    matmul(s, "out", S, q_local(), h);
    tensor_reduce(s, "out.reduce");
    elementwise(s, "add_ln2", 5 * e * S * h / sp());  // residual add (read 2, write 1), norm (read 1, write 1)
    tensor_gather(s, "ag2");
    matmul(s, "up", S, h, up_local());
    elementwise(s, "act", (m_.gated ? 3 : 2) * e * S * ffn_local());
    matmul(s, "down", S, ffn_local(), h);
    tensor_reduce(s, "down.reduce");
    elementwise(s, "add", 3 * e * S * h / sp());
  }
  void attention_core(std::uint64_t s) {
    const std::uint64_t batch = t_.microbatch * heads_local(), q = m_.seq_len, k = keys();
    matmul(s, "qk", q, m_.head_dim, k, batch);
    elementwise(s, "softmax", 2 * e_ * batch * q * k);
    matmul(s, "pv", q, k, m_.head_dim, batch);
  }

  void layer_backward(std::uint64_t s, std::uint64_t l, const std::vector<std::uint32_t>& in) {
    begin_layer(s);
    const std::string saved = prefix_;
    prefix_ += fmt::format("L{}.", l);
    const std::uint64_t S = tokens(), h = m_.d_model, e = e_, sp_ = sp();
    std::vector<std::uint32_t> deps = in;
    if (const auto gather = fsdp_gather(s, "gather", layer_bytes())) deps.push_back(*gather);
    // Recompute: the whole forward, or only the attention core.
    if (t_.recompute == Recompute::Full) {
      prefix_ = saved + fmt::format("R.L{}.", l);
      recomputing_ = true;
      forward_ops(s, deps);
      recomputing_ = false;
      prefix_ = saved + fmt::format("L{}.", l);
      deps.clear();
    }
    Op first = named(OpKind::Elementwise, "add.bwd");  // the residual's gradient, passed on and added
    first.hbm_bytes = 3 * e * S * h / sp_;
    emit(std::move(first), Role::Compute, s, Stream::Main, deps);
    tensor_gather(s, "down.ag");  // backward of the forward's reduce-scatter
    matmul(s, "down.dx", S, h, ffn_local());
    matmul(s, "down.dw", ffn_local(), S, h);
    elementwise(s, "act.bwd", 2 * (m_.gated ? 3 : 2) * e * S * ffn_local());
    tensor_gather(s, "ag2.again");  // the norm's output, gathered again for up's weight gradient
    matmul(s, "up.dx", S, up_local(), h);
    matmul(s, "up.dw", h, S, up_local());
    tensor_reduce(s, "up.reduce");
    elementwise(s, "add_ln2.bwd", 2 * 5 * e * S * h / sp_);
    tensor_gather(s, "out.ag");
    matmul(s, "out.dx", S, h, q_local());
    matmul(s, "out.dw", q_local(), S, h);
    if (t_.recompute == Recompute::Selective) {
      prefix_ = saved + fmt::format("R.L{}.", l);
      recomputing_ = true;
      attention_core(s);
      recomputing_ = false;
      prefix_ = saved + fmt::format("L{}.", l);
    }
    const std::uint64_t batch = t_.microbatch * heads_local(), q = m_.seq_len, k = keys(), d = m_.head_dim;
    matmul(s, "pv.dp", q, d, k, batch);
    matmul(s, "pv.dv", k, q, d, batch);
    elementwise(s, "softmax.bwd", 2 * 2 * e * batch * q * k);
    matmul(s, "qk.dq", q, k, d, batch);
    matmul(s, "qk.dk", k, q, d, batch);
    tensor_gather(s, "ag1.again");
    matmul(s, "qkv.dx", S, qkv_local(), h);
    matmul(s, "qkv.dw", h, S, qkv_local());
    tensor_reduce(s, "qkv.reduce");
    elementwise(s, "ln1.bwd", 2 * 2 * e * S * h / sp_);
    if (t_.fsdp > 1)
      collective(s, "reduce", OpKind::ReduceScatter, t_.plan.fsdp, layer_bytes(), Role::Fsdp, Stream::Fsdp,
                 {*stages_[s].main});
    prefix_ = saved;
  }

  void head_forward(std::uint64_t s) {
    begin_layer(s);
    const std::uint64_t S = tokens(), h = m_.d_model;
    std::vector<std::uint32_t> deps;
    if (const auto gather = fsdp_gather(s, "head.gather", embedding_bytes())) deps.push_back(*gather);
    Op norm = named(OpKind::Elementwise, "final_norm");
    norm.hbm_bytes = 2 * e_ * S * h / sp();
    emit(std::move(norm), Role::Compute, s, Stream::Main, deps);
    tensor_gather(s, "head.ag");
    matmul(s, "head", S, h, vocab_local());
    // Cross-entropy over the vocabulary-parallel logits: the TP group agrees on
    // each token's maximum and sum (two fp32 values per token).
    elementwise(s, "loss", 2 * e_ * S * vocab_local());
    if (t_.tp > 1)
      collective(s, "loss.allreduce", OpKind::AllReduce, t_.plan.tensor, 8 * S, Role::Tensor, Stream::Main);
  }
  void head_backward(std::uint64_t s, const std::vector<std::uint32_t>& in) {
    const std::uint64_t S = tokens(), h = m_.d_model;
    std::vector<std::uint32_t> deps = in;
    if (const auto gather = fsdp_gather(s, "head.gather", embedding_bytes())) deps.push_back(*gather);
    Op loss = named(OpKind::Elementwise, "loss.bwd");
    loss.hbm_bytes = 2 * e_ * S * vocab_local();
    emit(std::move(loss), Role::Compute, s, Stream::Main, deps);
    matmul(s, "head.dx", S, vocab_local(), h);
    matmul(s, "head.dw", h, S, vocab_local());
    tensor_reduce(s, "head.reduce");
    elementwise(s, "final_norm.bwd", 2 * 2 * e_ * S * h / sp());
    if (t_.fsdp > 1)
      collective(s, "head.reduce_fsdp", OpKind::ReduceScatter, t_.plan.fsdp, embedding_bytes(), Role::Fsdp,
                 Stream::Fsdp, {*stages_[s].main});
  }

  // A data-parallel gradient reduction of `bytes` per chip: an all-reduce, or a
  // reduce-scatter when the optimizer is sharded. With overlap it is issued as
  // soon as its gradients are final; without, after the stage's last backward.
  void data_reduce(std::uint64_t s, const std::string& name, std::uint64_t bytes) {
    if (t_.dp == 1) return;
    Stage& st = stages_[s];
    std::vector<std::uint32_t> deps{*st.main};
    if (st.fsdp) deps.push_back(*st.fsdp);
    Op op;
    op.kind = t_.plan.sharded_optimizer ? OpKind::ReduceScatter : OpKind::AllReduce;
    op.name = t_.pp > 1 ? fmt::format("s{}.{}", s, name) : name;
    op.group = "gradients";
    op.mesh_axes = t_.plan.data;
    op.hw_axes = hardware_axes(w_, t_.plan.data);
    op.bytes = std::max<std::uint64_t>(bytes, 1);
    if (t_.overlap.gradient_reduction)
      emit(std::move(op), Role::Data, s, Stream::Data, deps);
    else
      deferred_[s].push_back(std::move(op));
  }

  void optimizer_step(std::uint64_t s) {
    Stage& st = stages_[s];
    for (Op& op : deferred_[s]) emit(std::move(op), Role::Data, s, Stream::Data, {*st.main});
    std::vector<std::uint32_t> deps{*st.main};
    if (st.fsdp) deps.push_back(*st.fsdp);
    if (st.data) deps.push_back(*st.data);
    const StageParams params = stage_params(t_, s);
    const std::uint64_t shards = t_.fsdp * (t_.plan.sharded_optimizer ? t_.dp : 1);
    Op op;
    op.kind = OpKind::Elementwise;
    op.name = t_.pp > 1 ? fmt::format("s{}.optimizer", s) : "optimizer";
    op.group = "optimizer";
    // Adam on the chip's shard: reads the fp32 master weight, momentum and
    // variance and the 16-bit gradient, writes the three fp32 values and the
    // 16-bit weight: 28 bytes per parameter.
    op.hbm_bytes = 28 * params.per_chip / shards;
    const std::uint32_t step = emit(std::move(op), Role::Optimizer, s, Stream::Main, deps);
    if (t_.plan.sharded_optimizer) {
      Op gather;
      gather.kind = OpKind::AllGather;
      gather.name = t_.pp > 1 ? fmt::format("s{}.param_gather", s) : "param_gather";
      gather.group = "optimizer";
      gather.mesh_axes = t_.plan.data;
      gather.hw_axes = hardware_axes(w_, t_.plan.data);
      gather.bytes = std::max<std::uint64_t>(e_ * params.per_chip / t_.fsdp, 1);
      emit(std::move(gather), Role::Data, s, Stream::Main, {step});
    }
  }

  Workload& w_;
  Training& t_;
  const ModelSpec& m_;
  std::string pointer_;
  topology::Torus torus_;
  std::vector<std::vector<int>> coords_;
  std::map<std::vector<int>, topology::ChipId> chip_at_;
  std::vector<Stage> stages_;
  std::map<std::tuple<bool, std::uint64_t, std::uint64_t>, std::uint32_t> sends_;  // (forward, to chunk, mb) -> op
  std::map<std::uint64_t, std::vector<Op>> deferred_;
  std::uint64_t layers_per_chunk_ = 1;
  std::uint64_t e_ = 2;
  std::string prefix_;
  bool recomputing_ = false;
  unsigned __int128 model_flops_ = 0, hardware_flops_ = 0;
};

std::string gigabytes(std::uint64_t b) { return fmt::format("{:.2f} GB", static_cast<double>(b) / 1e9); }

}  // namespace

void lower_training(Workload& w, Training& t, const Cursor& where) {
  t.formulas = step_formulas(t, w.hardware);
  const StepFormulas& f = t.formulas;
  if (f.peak_bytes > f.hbm_bytes && !t.allow_oom)
    where.fail(fmt::format("the step does not fit in HBM: {} per chip at peak (weights {}, gradients {}, optimizer "
                           "{}, activations {}, working buffers {}) > {} of {}; shard more (fsdp, tensor, pipeline), "
                           "recompute, use a smaller microbatch, or give \"allow_oom\": true to simulate anyway",
                           gigabytes(f.peak_bytes), gigabytes(f.weight_bytes), gigabytes(f.gradient_bytes),
                           gigabytes(f.optimizer_bytes), gigabytes(f.activation_bytes), gigabytes(f.working_bytes),
                           gigabytes(f.hbm_bytes), w.hardware.preset));
  StepLowerer(w, t, where).run();
}

}  // namespace meshsim::workloads::detail
