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
#include "workloads/training_formulas.hpp"

namespace meshsim::workloads::detail {

namespace {

using ChipList = std::shared_ptr<const std::vector<topology::ChipId>>;

// The site of an op of microbatch j's forward or backward pass, outside a layer.
StepSite pass_site(StepSite::Part part, bool forward, std::uint64_t j) {
  StepSite site;
  site.part = part;
  site.pass = forward ? StepSite::Pass::Forward : StepSite::Pass::Backward;
  site.microbatch = j;
  return site;
}

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

}  // namespace

std::vector<int> kv_replica_axes(const Workload& w, const Training& t) {
  std::uint64_t product = 1;
  std::vector<int> out;
  for (auto it = t.plan.tensor.rbegin(); it != t.plan.tensor.rend() && product < t.kv_replicas; ++it) {
    product *= static_cast<std::uint64_t>(w.mesh[static_cast<std::size_t>(*it)].size);
    out.insert(out.begin(), *it);
  }
  if (t.kv_replicas == 1 || product != t.kv_replicas) return {};
  return out;
}

namespace {

class StepLowerer {
 public:
  StepLowerer(Workload& w, Training& t, const SourceRef& where)
      : w_(w), t_(t), m_(t.model), pointer_(where.pointer), torus_(w.make_torus()) {}

  void run() {
    const std::uint64_t p = t_.pp, v = t_.plan.virtual_stages;
    build_stages();
    build_kv_groups();
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
    for (topology::ChipId c = 0; c < torus_.num_chips(); ++c)
      if (!coords_[c].empty()) chip_at_[coords_[c]] = c;
    // Gradients of the weights outside the experts are summed over every axis
    // that splits the batch or the sequence; the experts' over those but the
    // expert axes (each expert lives on one chip of them).
    for (const std::vector<int>* axes : {&t_.plan.data, &t_.plan.context}) {
      dense_reduce_axes_.insert(dense_reduce_axes_.end(), axes->begin(), axes->end());
      expert_reduce_axes_.insert(expert_reduce_axes_.end(), axes->begin(), axes->end());
    }
    dense_reduce_axes_.insert(dense_reduce_axes_.end(), t_.plan.expert.begin(), t_.plan.expert.end());
    // Tensor parallelism does not split the experts: each TP chip runs its own
    // (sequence-parallel) tokens through whole experts, so their gradients are
    // summed over the tensor axes too.
    expert_reduce_axes_.insert(expert_reduce_axes_.end(), t_.plan.tensor.begin(), t_.plan.tensor.end());
    std::sort(dense_reduce_axes_.begin(), dense_reduce_axes_.end());
    std::sort(expert_reduce_axes_.begin(), expert_reduce_axes_.end());
    if (p == 1) return;  // every op runs on every chip
    const auto axis = static_cast<std::size_t>(t_.plan.pipeline);
    std::vector<std::vector<topology::ChipId>> sets(p);
    for (topology::ChipId c = 0; c < torus_.num_chips(); ++c) {
      if (coords_[c].empty()) continue;
      sets[static_cast<std::size_t>(coords_[c][axis])].push_back(c);
      t_.chip_stage[c] = coords_[c][axis];
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
  // Every chip of stage `s` to the next chip of its ring over `axes` (their
  // coordinates read as one number, the first axis major).
  std::vector<std::pair<topology::ChipId, topology::ChipId>> ring_pairs(std::uint64_t s,
                                                                        const std::vector<int>& axes) const {
    std::vector<std::pair<topology::ChipId, topology::ChipId>> out;
    const auto each = [&](topology::ChipId c) {
      std::vector<int> k = coords_[c];
      // Add one to the combined coordinate, carrying from the last axis.
      for (std::size_t i = axes.size(); i-- > 0;) {
        const auto a = static_cast<std::size_t>(axes[i]);
        if (++k[a] < w_.mesh[a].size) break;
        k[a] = 0;
      }
      out.emplace_back(c, chip_at_.at(k));
    };
    if (stages_[s].chips)
      for (topology::ChipId c : *stages_[s].chips) each(c);
    else
      for (topology::ChipId c = 0; c < torus_.num_chips(); ++c) each(c);
    return out;
  }
  // A send of `bytes` from every chip of stage s to its ring neighbour over `axes`.
  std::uint32_t ring_send(std::uint64_t s, const std::string& name, const std::vector<int>& axes, std::uint64_t bytes,
                          Role role, std::vector<std::uint32_t> deps) {
    Op op = named(OpKind::Send, name);
    SendOp& body = op.send();
    body.bytes = std::max<std::uint64_t>(bytes, 1);
    body.pairs = ring_pairs(s, axes);
    body.src = body.pairs.front().first;
    body.dst = body.pairs.front().second;
    return emit(std::move(op), role, s, Stream::None, std::move(deps));
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
    // Replicated KV heads without axes of their own: the stage's replica groups.
    std::shared_ptr<const std::vector<std::vector<topology::ChipId>>> kv_groups;
    std::optional<std::uint32_t> main, fsdp, fsdp_reduce, data;  // the last op of each stream
    std::optional<std::uint32_t> main_before_layer;  // the main stream before the current layer began
    std::optional<std::uint32_t> main_before_previous_layer;
    std::vector<std::uint64_t> backward_done;  // per chunk: backward passes finished
  };
  // As PyTorch FSDP and Megatron-LM issue them: the compute stream, FSDP's
  // all-gathers and its reduce-scatters on streams of their own, the
  // data-parallel reductions on another; a send or ring step on none.
  enum class Stream { Main, Fsdp, FsdpReduce, Data, None };

  std::uint32_t emit(Op op, Role role, std::uint64_t stage, Stream stream, std::vector<std::uint32_t> deps = {},
                     bool recomputed = false) {
    Stage& st = stages_[stage];
    std::optional<std::uint32_t>* last = stream == Stream::Main   ? &st.main
                                         : stream == Stream::Fsdp ? &st.fsdp
                                         : stream == Stream::FsdpReduce ? &st.fsdp_reduce
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
      const MatmulOp& mm = op.matmul();
      const unsigned __int128 f = 2 * static_cast<unsigned __int128>(mm.batch) * mm.m * mm.k * mm.n * chips;
      hardware_flops_ += f;
      // An expert's matmul also multiplies the padding up to its capacity: the
      // model's FLOPs count only the routed tokens.
      if (!recomputed) model_flops_ += useful_ ? f / useful_->second * useful_->first : f;
    }
    op.site.role = role;
    op.site.stage = role == Role::Pipeline ? -1 : static_cast<int>(stage);
    const auto index = static_cast<std::uint32_t>(w_.ops.size());
    w_.ops.push_back(std::move(op));
    if (last) *last = index;
    return index;
  }
  Op named(OpKind kind, const std::string& name) {
    Op op(kind);
    op.name = prefix_ + name;
    op.group = prefix_;
    if (kind == OpKind::Matmul) op.matmul().dtype = t_.dtype;
    if (kind == OpKind::Elementwise) op.elementwise().dtype = t_.dtype;
    op.site = site_;
    if (site_.part == StepSite::Part::Layer) op.site.kernel = kernel_id(name);
    return op;
  }
  // The index of a layer's kernel in Training::kernels (added when new).
  std::uint32_t kernel_id(const std::string& name) {
    const auto [it, fresh] = kernel_ids_.try_emplace(name, static_cast<std::uint32_t>(t_.kernels.size()));
    if (fresh) t_.kernels.push_back(name);
    return it->second;
  }
  // The ops that follow belong to microbatch j's forward or backward pass,
  // outside the layers (named F{j}.* or B{j}.*) ...
  void enter_pass(bool forward, std::uint64_t j) {
    prefix_ = fmt::format("{}{}.", forward ? 'F' : 'B', j);
    site_ = pass_site(StepSite::Part::Outside, forward, j);
  }
  // ... to its layer l (`pass_prefix`: the pass's names; F{j}.L{l}.*, or
  // recomputed B{j}.R.L{l}.*) ...
  void enter_layer(const std::string& pass_prefix, std::uint64_t l, bool recompute) {
    prefix_ = pass_prefix + fmt::format("{}L{}.", recompute ? "R." : "", l);
    site_.part = StepSite::Part::Layer;
    site_.layer = l;
    site_.recompute = recompute;
  }
  // ... and again to the pass, outside the layers.
  void leave_layer(const std::string& pass_prefix) {
    prefix_ = pass_prefix;
    site_.part = StepSite::Part::Outside;
    site_.layer = 0;
    site_.recompute = false;
  }
  std::uint32_t matmul(std::uint64_t s, const std::string& name, std::uint64_t m, std::uint64_t k, std::uint64_t n,
                       std::uint64_t batch = 1, std::vector<std::uint32_t> deps = {}) {
    Op op = named(OpKind::Matmul, name);
    MatmulOp& mm = op.matmul();
    mm.m = m, mm.k = k, mm.n = n, mm.batch = batch;
    return emit(std::move(op), Role::Compute, s, Stream::Main, std::move(deps), site_.recompute);
  }
  // An expert matmul of `batch` experts, each over expert_rows() tokens (the
  // capacity; m for the forward and dX products, k for dW), of which `useful`
  // in all carry routed tokens.
  std::uint32_t expert_matmul(std::uint64_t s, const std::string& name, std::uint64_t batch, std::uint64_t m,
                              std::uint64_t k, std::uint64_t n, std::uint64_t useful) {
    useful_ = std::pair{useful, batch * expert_rows()};
    const std::uint32_t id = matmul(s, name, m, k, n, batch);
    useful_.reset();
    return id;
  }
  // The QKV projection's matmuls, made by `make`: with replicated KV heads the
  // model's FLOPs count the model's K and V columns, the hardware's every
  // replica's too.
  template <class Make>
  void qkv_matmuls(Make&& make) {
    if (t_.kv_replicas > 1) useful_ = std::pair{(m_.heads + 2 * m_.kv_heads) * m_.head_dim, qkv_local() * t_.tp};
    make();
    useful_.reset();
  }
  std::uint32_t elementwise(std::uint64_t s, const std::string& name, std::uint64_t bytes) {
    Op op = named(OpKind::Elementwise, name);
    op.elementwise().hbm_bytes = bytes;
    return emit(std::move(op), Role::Compute, s, Stream::Main);
  }
  // A collective over a strategy's axes on stage s (V: bytes within one group).
  std::uint32_t collective(std::uint64_t s, const std::string& name, OpKind kind, const std::vector<int>& axes,
                           std::uint64_t bytes, Role role, Stream stream, std::vector<std::uint32_t> deps = {}) {
    Op op = named(kind, name);
    CollectiveOp& c = op.collective();
    set_comm_axes(w_, c, axes, stages_[s].chips.get(), &factor_groups_);
    c.bytes = std::max<std::uint64_t>(bytes, 1);
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
  // S: a microbatch's tokens on one chip (b s, or b s / cp: context parallelism
  // splits every sequence), before sequence parallelism splits them further.
  std::uint64_t tokens() const { return t_.microbatch * m_.seq_len / t_.cp; }
  std::uint64_t queries() const { return m_.seq_len / t_.cp; }  // per sequence, on one chip
  std::uint64_t sp() const { return t_.plan.sequence_parallel ? t_.tp : 1; }
  // Keys a query attends to: s, or s/2 on average under a causal mask.
  std::uint64_t keys() const { return t_.causal ? m_.seq_len / 2 : m_.seq_len; }
  std::uint64_t heads_local() const { return m_.heads / t_.tp; }
  std::uint64_t qkv_local() const { return (heads_local() + 2 * t_.kv_heads_per_chip()) * m_.head_dim; }
  std::uint64_t q_local() const { return heads_local() * m_.head_dim; }
  std::uint64_t ffn_local() const { return m_.ffn / t_.tp; }
  std::uint64_t up_local() const { return (m_.gated ? 2 : 1) * ffn_local(); }
  std::uint64_t vocab_local() const { return m_.vocab / t_.tp; }
  // One layer's weights on one chip before FSDP: outside the experts, and the
  // chip's experts.
  std::uint64_t dense_layer_bytes(std::uint64_t l) const {
    const LayerParams p = layer_params(m_, m_.moe_layer(l));
    return e_ * (sharded_per_chip(t_, p) + p.replicated + p.router);
  }
  std::uint64_t expert_layer_bytes(std::uint64_t l) const {
    return e_ * layer_params(m_, m_.moe_layer(l)).experts / t_.ep;
  }
  std::uint64_t layer_bytes(std::uint64_t l) const { return dense_layer_bytes(l) + expert_layer_bytes(l); }
  // The gradients of weights of `weight_bytes` (16-bit): in the gradient dtype.
  std::uint64_t grads(std::uint64_t weight_bytes) const { return weight_bytes / e_ * t_.gradient_bytes; }
  // The first stage's weights besides its layers: the vocabulary-parallel
  // embedding and learned positions; the last stage's: the final norm and the
  // LM head (untied, or the tied copy a pipeline keeps on its last stage).
  std::uint64_t embedding_bytes() const {
    return e_ * (vocab_local() * m_.d_model + (m_.learned_positions ? m_.seq_len * m_.d_model : 0));
  }
  bool separate_head() const { return !m_.tied_embeddings || t_.pp > 1; }
  std::uint64_t head_bytes() const {
    return e_ * ((separate_head() ? vocab_local() * m_.d_model : 0) + (m_.biases ? 2 : 1) * m_.d_model);
  }

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
    std::vector<std::uint32_t> in;
    if (pass.forward && g > 0) in.push_back(sends_.at({true, g, j}));
    if (!pass.forward && g < last_chunk()) in.push_back(sends_.at({false, g, j}));
    Stage& st = stages_[s];
    if (st.backward_done.empty()) st.backward_done.assign(t_.plan.virtual_stages, 0);
    const auto [first, end] = chunk_range(t_, g);
    if (pass.forward) {
      enter_pass(true, j);
      if (g == 0) embedding_forward(s);
      for (std::uint64_t l = first; l < end; ++l) layer_forward(s, l, l == first && g > 0 ? in : std::vector<std::uint32_t>{});
      if (g == last_chunk()) head_forward(s);
      if (g < last_chunk()) send(s, g, j, true);
    } else {
      const bool last_microbatch = ++st.backward_done[pass.chunk] == t_.microbatches;
      enter_pass(false, j);
      if (g == last_chunk()) head_backward(s, in);
      for (std::uint64_t l = end; l-- > first;) {
        const std::vector<std::uint32_t> deps = l + 1 == end && g < last_chunk() ? in : std::vector<std::uint32_t>{};
        layer_backward(s, l, deps);
        if (last_microbatch) {
          data_reduce(s, fmt::format("dp.L{}", l), grads(dense_layer_bytes(l)) / t_.fsdp, dense_reduce_axes_, l);
          if (m_.moe_layer(l))
            data_reduce(s, fmt::format("dp.L{}.experts", l), grads(expert_layer_bytes(l)) / t_.fsdp,
                        expert_reduce_axes_, l);
        }
      }
      if (g == 0) {
        enter_pass(false, j);
        // The vocabulary-parallel lookup's weight gradient needs every token's
        // output gradient: with sequence parallelism, gathered first.
        tensor_gather(s, "embed.ag");
        elementwise(s, "embed.bwd", 2 * e_ * tokens() * m_.d_model);
        if (t_.fsdp > 1)
          collective(s, "embed.reduce", OpKind::ReduceScatter, t_.plan.fsdp, grads(embedding_bytes()), Role::Fsdp,
                     Stream::FsdpReduce, {*st.main});
        if (last_microbatch) data_reduce(s, "dp.embed", grads(embedding_bytes()) / t_.fsdp, dense_reduce_axes_);
      }
      if (g == last_chunk() && last_microbatch) data_reduce(s, "dp.head", grads(head_bytes()) / t_.fsdp, dense_reduce_axes_);
      if (g > 0) send(s, g, j, false);
    }
  }

  // Activations (forward) or their gradients (backward) to the next chunk's stage.
  void send(std::uint64_t s, std::uint64_t g, std::uint64_t j, bool forward) {
    const std::uint64_t to_chunk = forward ? g + 1 : g - 1, to = to_chunk % t_.pp;
    Op op(OpKind::Send);
    op.name = fmt::format("{}{}.send.{}to{}", forward ? "F" : "B", j, s, to);
    if (t_.plan.virtual_stages > 1) op.name += fmt::format(".c{}", to_chunk);
    op.group = op.name;
    op.site = pass_site(StepSite::Part::Send, forward, j);
    SendOp& body = op.send();
    body.bytes = e_ * tokens() * m_.d_model / sp();
    body.pairs = pairs(s, to);
    body.src = body.pairs.front().first;
    body.dst = body.pairs.front().second;
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

  void embedding_forward(std::uint64_t s) {
    begin_layer(s);
    const auto gather = fsdp_gather(s, "embed.gather", embedding_bytes());
    Op op = named(OpKind::Elementwise, "embed");
    op.elementwise().hbm_bytes = 2 * e_ * tokens() * m_.d_model;  // every token's row (partial sums over the TP group)
    emit(std::move(op), Role::Compute, s, Stream::Main, gather ? std::vector<std::uint32_t>{*gather} : std::vector<std::uint32_t>{});
    // The vocabulary-parallel lookup leaves partial sums over the TP group.
    tensor_reduce(s, "embed.reduce");
  }

  void layer_forward(std::uint64_t s, std::uint64_t l, std::vector<std::uint32_t> in) {
    begin_layer(s);
    const std::string saved = prefix_;
    enter_layer(saved, l, false);
    if (const auto gather = fsdp_gather(s, "gather", layer_bytes(l))) in.push_back(*gather);
    forward_ops(s, l, in);
    leave_layer(saved);
  }

  // One layer's forward kernels (also what full recompute re-runs).
  void forward_ops(std::uint64_t s, std::uint64_t l, const std::vector<std::uint32_t>& in) {
    const std::uint64_t S = tokens(), h = m_.d_model, e = e_;
    {
      Op op = named(OpKind::Elementwise, "ln1");
      op.elementwise().hbm_bytes = 2 * e * S * h / sp();
      emit(std::move(op), Role::Compute, s, Stream::Main, in);
    }
    if (m_.parallel_block) {
      // Both branches read the one gathered norm output; their row-parallel
      // partial sums are added and reduced once.
      qkv_matmuls([&] { gathered_matmul(s, "ag1", "qkv", h, qkv_local()); });
      attention_forward(s);
      matmul(s, "out", S, q_local(), h);
      matmul(s, "up", S, h, up_local());
      elementwise(s, "act", (m_.gated ? 3 : 2) * e * S * ffn_local());
      reduced_matmul(s, "down", "block.reduce", ffn_local(), h);
      elementwise(s, "add", 4 * e * S * h / sp());  // x + attention + MLP
      return;
    }
    qkv_matmuls([&] { gathered_matmul(s, "ag1", "qkv", h, qkv_local()); });
    attention_forward(s);
    reduced_matmul(s, "out", "out.reduce", q_local(), h);
    elementwise(s, "add_ln2", 5 * e * S * h / sp());  // residual add (read 2, write 1), norm (read 1, write 1)
    if (m_.moe_layer(l)) {
      moe_forward(s);
    } else {
      gathered_matmul(s, "ag2", "up", h, up_local());
      elementwise(s, "act", (m_.gated ? 3 : 2) * e * S * ffn_local());
      reduced_matmul(s, "down", "down.reduce", ffn_local(), h);
    }
    elementwise(s, "add", 3 * e * S * h / sp());
  }

  // A column-parallel matmul of the gathered activations [S, k] x [k, n]: with
  // sequence parallelism its all-gather first, or with collective matmuls
  // (overlap.tensor) in tp steps, each multiplying the part that has arrived
  // while the next part comes from the ring neighbour.
  void gathered_matmul(std::uint64_t s, const std::string& gather, const std::string& name, std::uint64_t k,
                       std::uint64_t n) {
    if (!t_.overlap.tensor) {
      tensor_gather(s, gather);
      matmul(s, name, tokens(), k, n);
      return;
    }
    const std::uint64_t part = tokens() / t_.tp;
    const std::uint32_t before = *stages_[s].main;  // the part the chip holds is ready
    std::optional<std::uint32_t> arrived;
    for (std::uint64_t i = 0; i < t_.tp; ++i) {
      std::optional<std::uint32_t> next;
      if (i + 1 < t_.tp) {
        // Forward the part that arrived last (or the chip's own) while multiplying.
        std::vector<std::uint32_t> deps{before};
        if (arrived) deps.push_back(*arrived);
        next = ring_send(s, fmt::format("{}.step{}", gather, i), t_.plan.tensor, e_ * part * m_.d_model, Role::Tensor,
                         deps);
      }
      matmul(s, fmt::format("{}.part{}", name, i), part, k, n, 1,
             arrived ? std::vector<std::uint32_t>{*arrived} : std::vector<std::uint32_t>{});
      arrived = next;
    }
  }
  // A row-parallel matmul [S, k] x [k, n] whose partial sums are reduced over
  // the TP group (all-reduce, or reduce-scatter with sequence parallelism); with
  // collective matmuls in tp steps, each part's partial sum passed on to be
  // added to the next chip's while it computes its own.
  void reduced_matmul(std::uint64_t s, const std::string& name, const std::string& reduce, std::uint64_t k,
                      std::uint64_t n) {
    if (!t_.overlap.tensor) {
      matmul(s, name, tokens(), k, n);
      tensor_reduce(s, reduce);
      return;
    }
    const std::uint64_t part = tokens() / t_.tp;
    std::optional<std::uint32_t> passed;
    for (std::uint64_t i = 0; i < t_.tp; ++i) {
      const std::uint32_t mm = matmul(s, fmt::format("{}.part{}", name, i), part, k, n);
      if (i + 1 == t_.tp) break;
      std::vector<std::uint32_t> deps{mm};
      if (passed) deps.push_back(*passed);
      passed = ring_send(s, fmt::format("{}.step{}", reduce, i), t_.plan.tensor, e_ * part * m_.d_model, Role::Tensor,
                         deps);
    }
    // The chip's own part is complete once the last partial sum has arrived.
    Op done = named(OpKind::Elementwise, reduce + ".add");
    done.elementwise().hbm_bytes = 3 * e_ * part * m_.d_model;
    emit(std::move(done), Role::Compute, s, Stream::Main, {*passed});
  }

  // Attention: QK^T, softmax, PV per local head; with context parallelism as a
  // ring (each chip holds s/cp queries; the keys and values of the cp parts go
  // round the ring, one part a step, while the chip works on the part it has).
  void attention_forward(std::uint64_t s) { attention_core(s); }
  void attention_core(std::uint64_t s) {
    const std::uint64_t batch = t_.microbatch * heads_local(), q = queries(), k = keys() / t_.cp;
    const std::uint32_t before = *stages_[s].main;  // the chip's own keys and values are ready
    std::optional<std::uint32_t> arrived;
    for (std::uint64_t r = 0; r < t_.cp; ++r) {
      const std::string step = t_.cp > 1 ? fmt::format(".r{}", r) : "";
      std::optional<std::uint32_t> next;
      if (r + 1 < t_.cp) {
        // Pass on the part that arrived last (or the chip's own) while computing.
        std::vector<std::uint32_t> deps{before};
        if (arrived) deps.push_back(*arrived);
        next = ring_send(s, fmt::format("kv.send{}", r), t_.plan.context, kv_part_bytes(), Role::Context, deps);
      }
      matmul(s, "qk" + step, q, m_.head_dim, k, batch,
             arrived ? std::vector<std::uint32_t>{*arrived} : std::vector<std::uint32_t>{});
      elementwise(s, "softmax" + step, 2 * e_ * batch * q * k);
      matmul(s, "pv" + step, q, k, m_.head_dim, batch);
      arrived = next;
    }
  }
  // The keys and values of one chip's part of the sequence (local KV heads).
  std::uint64_t kv_part_bytes() const {
    return 2 * e_ * t_.microbatch * queries() * t_.kv_heads_per_chip() * m_.head_dim;
  }
  // The ring backward: the keys and values go round as in the forward pass;
  // each part's dK and dV accumulate as it travels (a chip adds its share, then
  // passes the part on) and come home after cp steps.
  void attention_backward(std::uint64_t s) {
    const std::uint64_t batch = t_.microbatch * heads_local(), q = queries(), k = keys() / t_.cp, d = m_.head_dim;
    const std::uint32_t before = *stages_[s].main;
    std::optional<std::uint32_t> kv, dkv;  // the last sends of each
    for (std::uint64_t r = 0; r < t_.cp; ++r) {
      const std::string step = t_.cp > 1 ? fmt::format(".r{}", r) : "";
      std::optional<std::uint32_t> next_kv;
      if (r + 1 < t_.cp) {
        std::vector<std::uint32_t> deps{before};
        if (kv) deps.push_back(*kv);
        next_kv = ring_send(s, fmt::format("kv.send{}", r), t_.plan.context, kv_part_bytes(), Role::Context, deps);
      }
      matmul(s, "pv.dp" + step, q, d, k, batch, kv ? std::vector<std::uint32_t>{*kv} : std::vector<std::uint32_t>{});
      matmul(s, "pv.dv" + step, k, q, d, batch);
      elementwise(s, "softmax.bwd" + step, 2 * 2 * e_ * batch * q * k);
      matmul(s, "qk.dq" + step, q, k, d, batch);
      const std::uint32_t last = matmul(s, "qk.dk" + step, k, q, d, batch);
      if (t_.cp > 1) {
        std::vector<std::uint32_t> deps{last};
        if (dkv) deps.push_back(*dkv);
        dkv = ring_send(s, fmt::format("dkv.send{}", r), t_.plan.context, kv_part_bytes(), Role::Context, deps);
      }
      kv = next_kv;
    }
    if (dkv) emit_join(s, "kv.done", *dkv);
  }
  // An elementwise no-op that orders the main stream after `op` (the last
  // gradients of a ring have come home).
  std::uint32_t emit_join(std::uint64_t s, const std::string& name, std::uint32_t op) {
    Op done = named(OpKind::Elementwise, name);
    done.elementwise().hbm_bytes = 2 * kv_part_bytes();  // the arriving dK, dV added to the chip's own
    return emit(std::move(done), Role::Compute, s, Stream::Main, {op});
  }

  // Mixture of experts on the chip's tokens (split by SP when TP > 1): the
  // router, the dispatch all-to-all over the expert axes, every local expert's
  // FFN on its tokens (capacity-padded), the combine all-to-all, the weighted sum.
  std::uint64_t moe_tokens() const { return tokens() / sp(); }
  std::uint64_t moe_dispatched() const { return dispatched_tokens(t_, moe_tokens()); }
  std::uint64_t local_experts() const { return m_.experts / t_.ep; }
  std::uint64_t expert_rows() const {  // tokens per local expert, padded
    return (moe_dispatched() + local_experts() - 1) / local_experts();
  }
  std::uint64_t expert_up() const { return (m_.gated ? 2 : 1) * m_.expert_ffn; }
  void expert_all_to_all(std::uint64_t s, const std::string& name) {
    if (t_.ep == 1) return;
    // V: what the whole group holds: every chip's dispatched tokens.
    collective(s, name, OpKind::AllToAll, t_.plan.expert, t_.ep * e_ * moe_dispatched() * m_.d_model, Role::Expert,
               Stream::Main);
  }
  void moe_forward(std::uint64_t s) {
    const std::uint64_t T = moe_tokens(), h = m_.d_model, E = m_.experts, routed = T * m_.top_k;
    matmul(s, "router", T, h, E);
    elementwise(s, "route", 2 * e_ * T * E);  // softmax and top-k over the logits
    expert_all_to_all(s, "dispatch");
    expert_matmul(s, "experts.up", local_experts(), expert_rows(), h, expert_up(), routed);
    elementwise(s, "experts.act", (m_.gated ? 3 : 2) * e_ * moe_dispatched() * m_.expert_ffn);
    expert_matmul(s, "experts.down", local_experts(), expert_rows(), m_.expert_ffn, h, routed);
    expert_all_to_all(s, "combine");
    elementwise(s, "combine.sum", e_ * (moe_dispatched() + T) * h);
  }
  void moe_backward(std::uint64_t s) {
    const std::uint64_t T = moe_tokens(), h = m_.d_model, E = m_.experts, routed = T * m_.top_k;
    elementwise(s, "combine.sum.bwd", 2 * e_ * (moe_dispatched() + T) * h);
    expert_all_to_all(s, "combine.bwd");
    expert_matmul(s, "experts.down.dx", local_experts(), expert_rows(), h, m_.expert_ffn, routed);
    expert_matmul(s, "experts.down.dw", local_experts(), m_.expert_ffn, expert_rows(), h, routed);
    elementwise(s, "experts.act.bwd", 2 * (m_.gated ? 3 : 2) * e_ * moe_dispatched() * m_.expert_ffn);
    expert_matmul(s, "experts.up.dx", local_experts(), expert_rows(), expert_up(), h, routed);
    expert_matmul(s, "experts.up.dw", local_experts(), h, expert_rows(), expert_up(), routed);
    expert_all_to_all(s, "dispatch.bwd");
    elementwise(s, "route.bwd", 2 * 2 * e_ * T * E);
    matmul(s, "router.dx", T, E, h);
    matmul(s, "router.dw", h, T, E);
  }

  // A column-parallel matmul's backward: its input gradient [S, n] x [n, h]
  // reduced over the TP group, and its weight gradient [h, S] x [S, n], which
  // with sequence parallelism needs the forward's input gathered again. With
  // collective matmuls the reduction runs in steps under the dX parts and the
  // gather under dX (issued before it, as Megatron-LM does).
  void input_gradient(std::uint64_t s, const std::string& again, const std::string& dx, const std::string& reduce,
                      std::uint64_t n, const std::string& dw) {
    if (t_.overlap.tensor) {
      const std::uint32_t gather = collective(s, again, OpKind::AllGather, t_.plan.tensor,
                                              e_ * tokens() * m_.d_model, Role::Tensor, Stream::None,
                                              {*stages_[s].main});
      reduced_matmul(s, dx, reduce, n, m_.d_model);
      matmul(s, dw, m_.d_model, tokens(), n, 1, {gather});
      return;
    }
    tensor_gather(s, again);
    matmul(s, dx, tokens(), n, m_.d_model);
    matmul(s, dw, m_.d_model, tokens(), n);
    tensor_reduce(s, reduce);
  }

  // Selective recompute: the attention core once more, before its backward
  // (its ops named R.L<l>.*, counted in hardware FLOPs only).
  void recompute_attention(std::uint64_t s, const std::string& saved, std::uint64_t l) {
    if (t_.recompute != Recompute::Selective) return;
    enter_layer(saved, l, true);
    attention_core(s);
    enter_layer(saved, l, false);
  }

  // The parallel block's backward: the output gradient gathered once feeds both
  // branches; the input gradients of QKV and up are partial sums, added and
  // reduced once; both weight gradients need the norm's output gathered again.
  void parallel_block_backward(std::uint64_t s, const std::string& saved, std::uint64_t l) {
    const std::uint64_t S = tokens(), h = m_.d_model, e = e_;
    gathered_matmul(s, "block.ag", "down.dx", h, ffn_local());
    matmul(s, "down.dw", ffn_local(), S, h);
    elementwise(s, "act.bwd", 2 * (m_.gated ? 3 : 2) * e * S * ffn_local());
    tensor_gather(s, "ag1.again");
    matmul(s, "up.dx", S, up_local(), h);
    matmul(s, "up.dw", h, S, up_local());
    matmul(s, "out.dx", S, h, q_local());
    matmul(s, "out.dw", q_local(), S, h);
    recompute_attention(s, saved, l);
    attention_backward(s);
    qkv_matmuls([&] {
      matmul(s, "qkv.dx", S, qkv_local(), h);
      matmul(s, "qkv.dw", h, S, qkv_local());
    });
    tensor_reduce(s, "block.dx.reduce");
    elementwise(s, "ln1.bwd", 2 * 2 * e * S * h / sp());
    layer_gradients_done(s, l);
  }

  void layer_backward(std::uint64_t s, std::uint64_t l, const std::vector<std::uint32_t>& in) {
    begin_layer(s);
    const std::string saved = prefix_;
    enter_layer(saved, l, false);
    const std::uint64_t S = tokens(), h = m_.d_model, e = e_, sp_ = sp();
    std::vector<std::uint32_t> deps = in;
    if (const auto gather = fsdp_gather(s, "gather", layer_bytes(l))) deps.push_back(*gather);
    // Recompute: the whole forward, or only the attention core.
    if (t_.recompute == Recompute::Full) {
      enter_layer(saved, l, true);
      forward_ops(s, l, deps);
      enter_layer(saved, l, false);
      deps.clear();
    }
    Op first = named(OpKind::Elementwise, "add.bwd");  // the residual's gradient, passed on and added
    first.elementwise().hbm_bytes = 3 * e * S * h / sp_;
    emit(std::move(first), Role::Compute, s, Stream::Main, deps);
    if (m_.parallel_block) {
      parallel_block_backward(s, saved, l);
      leave_layer(saved);
      return;
    }
    if (m_.moe_layer(l)) {
      moe_backward(s);
    } else {
      gathered_matmul(s, "down.ag", "down.dx", h, ffn_local());  // backward of the forward's reduce-scatter
      matmul(s, "down.dw", ffn_local(), S, h);
      elementwise(s, "act.bwd", 2 * (m_.gated ? 3 : 2) * e * S * ffn_local());
      // (ag2.again: the norm's output, gathered again for up's weight gradient)
      input_gradient(s, "ag2.again", "up.dx", "up.reduce", up_local(), "up.dw");
    }
    elementwise(s, "add_ln2.bwd", 2 * 5 * e * S * h / sp_);
    gathered_matmul(s, "out.ag", "out.dx", h, q_local());
    matmul(s, "out.dw", q_local(), S, h);
    recompute_attention(s, saved, l);
    attention_backward(s);
    qkv_matmuls([&] { input_gradient(s, "ag1.again", "qkv.dx", "qkv.reduce", qkv_local(), "qkv.dw"); });
    elementwise(s, "ln1.bwd", 2 * 2 * e * S * h / sp_);
    layer_gradients_done(s, l);
    leave_layer(saved);
  }

  // After a layer's backward: with sequence parallelism each chip's gradients
  // of the weights the TP group replicates (norms, row-parallel biases, an MoE
  // router) cover its own tokens only, so they are all-reduced over the group
  // (Megatron-LM does the same); with FSDP the gradients are reduce-scattered.
  void layer_gradients_done(std::uint64_t s, std::uint64_t l) {
    if (t_.kv_replicas > 1) kv_replica_reduce(s);
    if (t_.tp > 1 && t_.plan.sequence_parallel) {
      const LayerParams lp = layer_params(m_, m_.moe_layer(l));
      collective(s, "norm_grads.reduce", OpKind::AllReduce, t_.plan.tensor, grads(e_ * (lp.replicated + lp.router)),
                 Role::Tensor, Stream::Main);
    }
    if (t_.fsdp > 1)
      collective(s, "reduce", OpKind::ReduceScatter, t_.plan.fsdp, grads(layer_bytes(l)), Role::Fsdp, Stream::FsdpReduce,
                 {*stages_[s].main});
  }

  // Replicated KV heads: each replica of a head holds a partial gradient of its
  // K and V projections (its own queries' share); the replicas sum them every
  // microbatch, as the tensor axes sum the norm gains' with sequence
  // parallelism. Over the axes that hold the replicas, or their groups.
  void kv_replica_reduce(std::uint64_t s) {
    const std::uint64_t bytes =
        grads(e_ * 2 * t_.kv_heads_per_chip() * m_.head_dim * (m_.d_model + (m_.biases ? 1 : 0)));
    if (!kv_axes_.empty()) {
      collective(s, "kv_grads.reduce", OpKind::AllReduce, kv_axes_, bytes, Role::Tensor, Stream::Main);
      return;
    }
    Op op = named(OpKind::AllReduce, "kv_grads.reduce");
    CollectiveOp& c = op.collective();
    c.bytes = bytes;
    c.groups = stages_[s].kv_groups;
    emit(std::move(op), Role::Tensor, s, Stream::Main);
  }
  // The replica groups of each stage: chips that differ only in their tensor
  // rank, within one block of kv_replicas ranks, in rank order.
  void build_kv_groups() {
    kv_axes_ = kv_replica_axes(w_, t_);
    if (t_.kv_replicas == 1 || !kv_axes_.empty()) return;
    MESHSIM_ASSERT(!w_.hardware.gpu, "replicated KV heads on a GPU fabric need axes of their own");
    std::map<std::vector<int>, std::vector<std::pair<std::uint64_t, topology::ChipId>>> blocks;
    for (topology::ChipId c = 0; c < torus_.num_chips(); ++c) {
      if (coords_[c].empty()) continue;
      std::uint64_t rank = 0;
      std::vector<int> key = coords_[c];
      for (int a : t_.plan.tensor) {
        const auto i = static_cast<std::size_t>(a);
        rank = rank * static_cast<std::uint64_t>(w_.mesh[i].size) + static_cast<std::uint64_t>(key[i]);
        key[i] = 0;
      }
      key.push_back(static_cast<int>(rank / t_.kv_replicas));
      blocks[key].emplace_back(rank, c);
    }
    std::vector<std::vector<std::vector<topology::ChipId>>> per_stage(t_.pp);
    for (auto& [key, members] : blocks) {
      std::sort(members.begin(), members.end());
      std::vector<topology::ChipId> group;
      for (const auto& [rank, chip] : members) group.push_back(chip);
      per_stage[static_cast<std::size_t>(t_.chip_stage[group.front()])].push_back(std::move(group));
    }
    for (std::uint64_t s = 0; s < t_.pp; ++s)
      stages_[s].kv_groups =
          std::make_shared<const std::vector<std::vector<topology::ChipId>>>(std::move(per_stage[s]));
  }

  void head_forward(std::uint64_t s) {
    begin_layer(s);
    const std::uint64_t S = tokens(), h = m_.d_model;
    std::vector<std::uint32_t> deps;
    if (const auto gather = fsdp_gather(s, "head.gather", head_bytes())) deps.push_back(*gather);
    Op norm = named(OpKind::Elementwise, "final_norm");
    norm.elementwise().hbm_bytes = 2 * e_ * S * h / sp();
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
    begin_layer(s);
    const std::uint64_t S = tokens(), h = m_.d_model;
    std::vector<std::uint32_t> deps = in;
    if (const auto gather = fsdp_gather(s, "head.gather", head_bytes())) deps.push_back(*gather);
    Op loss = named(OpKind::Elementwise, "loss.bwd");
    loss.elementwise().hbm_bytes = 2 * e_ * S * vocab_local();
    emit(std::move(loss), Role::Compute, s, Stream::Main, deps);
    matmul(s, "head.dx", S, vocab_local(), h);
    matmul(s, "head.dw", h, S, vocab_local());
    tensor_reduce(s, "head.reduce");
    elementwise(s, "final_norm.bwd", 2 * 2 * e_ * S * h / sp());
    // The final norm's gain gradient covers the chip's own tokens under
    // sequence parallelism: summed over the TP group like the layers' norms.
    if (t_.tp > 1 && t_.plan.sequence_parallel)
      collective(s, "final_norm_grads.reduce", OpKind::AllReduce, t_.plan.tensor,
                 grads(e_ * (m_.biases ? 2 : 1) * m_.d_model), Role::Tensor, Stream::Main);
    if (t_.fsdp > 1)
      collective(s, "head.reduce_fsdp", OpKind::ReduceScatter, t_.plan.fsdp, grads(head_bytes()), Role::Fsdp,
                 Stream::FsdpReduce, {*stages_[s].main});
  }

  // The gradient reduction of `bytes` per chip over `axes` (the data axes and,
  // for weights they replicate, the expert and context axes): an all-reduce; with
  // a sharded optimizer a reduce-scatter over the data axes (the optimizer's
  // shards) and an all-reduce of the shard over the rest. With overlap it is
  // issued as soon as its gradients are final; without, after the stage's last
  // backward pass.
  void data_reduce(std::uint64_t s, const std::string& name, std::uint64_t bytes, const std::vector<int>& axes,
                   std::optional<std::uint64_t> layer = std::nullopt) {
    if (axes_product(w_, axes) == 1) return;
    const std::string base = t_.pp > 1 ? fmt::format("s{}.{}", s, name) : name;
    const auto reduction = [&](OpKind kind, const std::string& op_name, const std::vector<int>& over, std::uint64_t v) {
      Op op(kind);
      op.name = op_name;
      op.group = "gradients";
      op.site.part = layer ? StepSite::Part::LayerGradients : StepSite::Part::OutsideGradients;
      op.site.layer = layer.value_or(0);
      CollectiveOp& c = op.collective();
      set_comm_axes(w_, c, over, stages_[s].chips.get(), &factor_groups_);
      c.bytes = std::max<std::uint64_t>(v, 1);
      if (t_.overlap.gradient_reduction) {
        Stage& st = stages_[s];
        std::vector<std::uint32_t> deps{*st.main};
        if (st.fsdp_reduce) deps.push_back(*st.fsdp_reduce);
        emit(std::move(op), Role::Data, s, Stream::Data, deps);
      } else {
        deferred_[s].push_back(std::move(op));
      }
    };
    if (!t_.plan.sharded_optimizer) {
      reduction(OpKind::AllReduce, base, axes, bytes);
      return;
    }
    std::vector<int> rest;
    for (int a : axes)
      if (std::find(t_.plan.data.begin(), t_.plan.data.end(), a) == t_.plan.data.end()) rest.push_back(a);
    reduction(OpKind::ReduceScatter, base, t_.plan.data, bytes);
    if (axes_product(w_, rest) > 1) reduction(OpKind::AllReduce, base + ".rest", rest, bytes / t_.dp);
  }

  void optimizer_step(std::uint64_t s) {
    Stage& st = stages_[s];
    for (Op& op : deferred_[s]) {
      std::vector<std::uint32_t> after{*st.main};
      if (st.fsdp_reduce) after.push_back(*st.fsdp_reduce);
      emit(std::move(op), Role::Data, s, Stream::Data, after);
    }
    std::vector<std::uint32_t> deps{*st.main};
    if (st.fsdp) deps.push_back(*st.fsdp);
    if (st.fsdp_reduce) deps.push_back(*st.fsdp_reduce);
    if (st.data) deps.push_back(*st.data);
    const StageParams params = stage_params(t_, s);
    const std::uint64_t shards = t_.fsdp * (t_.plan.sharded_optimizer ? t_.dp : 1);
    Op op(OpKind::Elementwise);
    op.name = t_.pp > 1 ? fmt::format("s{}.optimizer", s) : "optimizer";
    op.group = "optimizer";
    op.site.part = StepSite::Part::Optimizer;
    // Adam on the chip's shard: reads the fp32 master weight, momentum and
    // variance and the gradient, writes the three fp32 values and the 16-bit
    // weight: 26 bytes per parameter and the gradient's 2 or 4.
    op.elementwise().hbm_bytes = (26 + t_.gradient_bytes) * params.per_chip / shards;
    const std::uint32_t step = emit(std::move(op), Role::Optimizer, s, Stream::Main, deps);
    if (t_.plan.sharded_optimizer) {
      Op gather(OpKind::AllGather);
      gather.name = t_.pp > 1 ? fmt::format("s{}.param_gather", s) : "param_gather";
      gather.group = "optimizer";
      gather.site.part = StepSite::Part::Optimizer;
      CollectiveOp& c = gather.collective();
      set_comm_axes(w_, c, t_.plan.data, stages_[s].chips.get(), &factor_groups_);
      c.bytes = std::max<std::uint64_t>(e_ * params.per_chip / t_.fsdp, 1);
      emit(std::move(gather), Role::Data, s, Stream::Main, {step});
    }
  }

  Workload& w_;
  Training& t_;
  FactorGroupsCache factor_groups_;  // collectives over mesh axes that take part of a torus axis
  const ModelSpec& m_;
  std::string pointer_;
  topology::Torus torus_;
  std::vector<std::vector<int>> coords_;
  std::map<std::vector<int>, topology::ChipId> chip_at_;
  std::vector<Stage> stages_;
  std::map<std::tuple<bool, std::uint64_t, std::uint64_t>, std::uint32_t> sends_;  // (forward, to chunk, mb) -> op
  std::map<std::uint64_t, std::vector<Op>> deferred_;
  std::vector<int> dense_reduce_axes_, expert_reduce_axes_;  // where gradients are summed
  std::vector<int> kv_axes_;  // replicated KV heads: the axes of a head's replicas (kv_replica_axes)
  std::optional<std::pair<std::uint64_t, std::uint64_t>> useful_;  // (routed, capacity) of an expert matmul
  std::uint64_t e_ = 2;
  std::string prefix_;  // the names of the ops being made: "F0.L3." (site_ says the same)
  StepSite site_;
  std::map<std::string, std::uint32_t> kernel_ids_;  // Training::kernels by name
  unsigned __int128 model_flops_ = 0, hardware_flops_ = 0;
};

std::string gigabytes(std::uint64_t b) { return fmt::format("{:.2f} GB", static_cast<double>(b) / 1e9); }

}  // namespace

void check_training(const Workload& w, Training& t, const SourceRef& where) {
  t.formulas = step_formulas(t, w.hardware);
  const StepFormulas& f = t.formulas;
  if (f.peak_bytes > f.hbm_bytes && !t.allow_oom)
    where.fail(fmt::format("the step does not fit in HBM: {} per chip at peak (weights {}, gradients {}, optimizer "
                           "{}, activations {}, working buffers {}) > {} of {}; shard more (fsdp, tensor, pipeline), "
                           "recompute, use a smaller microbatch, or give \"allow_oom\": true to simulate anyway",
                           gigabytes(f.peak_bytes), gigabytes(f.weight_bytes), gigabytes(f.gradient_bytes),
                           gigabytes(f.optimizer_bytes), gigabytes(f.activation_bytes), gigabytes(f.working_bytes),
                           gigabytes(f.hbm_bytes), w.hardware.preset));
  // Every microbatch passes every layer twice (forward, backward): refuse a
  // step whose ops alone would take gigabytes before it is lowered (the run's
  // own size limits are checked later, on the ops).
  const std::uint64_t per_layer = 64 + 12 * t.cp + (t.overlap.tensor ? 8 * t.tp : 0);
  const unsigned __int128 ops =
      static_cast<unsigned __int128>(t.microbatches) * (t.model.layers * per_layer + 64) + 8 * t.model.layers;
  if (ops > kMaxTrainingOps)
    where.fail(fmt::format("the step would lower to about {} ops ({} microbatches per replica through {} layers), "
                           "more than meshsim's limit of {}: use fewer, larger microbatches or fewer layers",
                           static_cast<std::uint64_t>(std::min<unsigned __int128>(ops, ~std::uint64_t{0})),
                           t.microbatches, t.model.layers, kMaxTrainingOps));
  // Ring steps (collective matmuls' tp steps, ring attention's cp) are sends
  // that pair every chip of the stage with its neighbour, 8 bytes a pair.
  const std::uint64_t ring_per_layer = 12 * (t.cp > 1 ? t.cp : 0) + (t.overlap.tensor ? 8 * t.tp : 0);
  const unsigned __int128 pair_bytes = static_cast<unsigned __int128>(t.microbatches) * t.model.layers *
                                       ring_per_layer * (w.make_torus().num_chips() / t.pp) * 8;
  if (pair_bytes > kMaxRingPairBytes)
    where.fail(
        fmt::format("the step's ring steps ({} per layer and microbatch{}) would hold about {:.1f} GB of chip "
                    "pairs, more than meshsim's limit of {:.1f} GB: {}fewer microbatches or layers",
                    ring_per_layer, t.overlap.tensor ? ": collective matmuls over the tensor axes" : "",
                    static_cast<double>(pair_bytes) / 1e9, static_cast<double>(kMaxRingPairBytes) / 1e9,
                    t.overlap.tensor ? "give \"overlap\": {\"tensor\": false}, a smaller tensor degree, or " : ""));
}

void lower_training(Workload& w, Training& t, const SourceRef& where) { StepLowerer(w, t, where).run(); }

}  // namespace meshsim::workloads::detail
