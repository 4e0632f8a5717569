// The builder (spec.hpp): a typed spec checked and lowered into a Workload. The
// JSON frontend (workload.cpp, training.cpp) reads text into the spec and calls
// these; so do the search, the importers and calibration, without JSON.
#include "workloads/spec.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>

#include "topology/gpu_preset.hpp"
#include "topology/preset.hpp"
#include "workloads/lowering.hpp"
#include "workloads/time_bound.hpp"
#include "workloads/training_detail.hpp"

namespace meshsim::workloads {

using topology::AxisSpec;

namespace {

// An integer the JSON frontend has read within [lo, hi]; a spec built in memory
// is held to the same range, with the same message.
void check_in(std::int64_t v, std::int64_t lo, std::int64_t hi, const SourceRef& where) {
  if (v < lo || v > hi) where.fail(fmt::format("expected an integer in [{}, {}], got {}", lo, hi, v));
}

bool is_name(const std::string& name) {
  bool ok = !name.empty() && std::isalpha(static_cast<unsigned char>(name[0]));
  for (char ch : name) ok = ok && std::isalnum(static_cast<unsigned char>(ch));
  return ok;
}

// Maps mesh axes onto consecutive hardware axes (w.topology), in order: each
// takes whole axes or a divisor of what is left of one (its inner part first,
// as Megatron's rank order and JAX's device meshes have it). On GPUs that
// hardware axis is split into its factors (w.topology gets one axis per
// factor), which changes no chip's id (first axis fastest) and no link: the
// GPUs of a node share one NVLink switch and the nodes one fat tree. On a TPU
// the torus keeps its axes and links, and the mesh axis holds its factors
// (MeshAxis::factors): the chips at a stride along the torus axis.
void map_mesh(Workload& w, const MeshSpec& mesh) {
  const std::vector<AxisSpec> hardware = w.topology;
  w.written_shape.clear();
  for (const AxisSpec& a : hardware) w.written_shape.push_back(a.size);
  const std::vector<int>& shape = w.written_shape;
  std::uint64_t chips = 1;
  for (int sz : shape) chips *= static_cast<std::uint64_t>(sz);
  // How the errors name the topology: "4x4x4", "4 nodes x 8 GPUs", or on a node
  // grid "4x2 nodes x 8 GPUs".
  const std::vector<int> nodes = shape.size() > 1 ? std::vector<int>(shape.begin() + 1, shape.end()) : std::vector<int>{1};
  const std::string topo = w.hardware.gpu ? fmt::format("{} nodes x {} GPUs", fmt::join(nodes, "x"), shape[0])
                                          : w.make_torus().shape_string();
  std::vector<std::string> names;  // the hardware axes' names as written
  for (std::size_t a = 0; a < hardware.size(); ++a)
    names.push_back(w.hardware.gpu ? gpu_axis_name(w, static_cast<int>(a))
                                   : w.make_torus().axis_name(static_cast<int>(a)));
  const auto hw_name = [&](std::size_t a) { return names[a]; };
  w.topology.clear();
  std::size_t hw = 0;                                  // the hardware axis being taken
  int left = hardware.empty() ? 1 : hardware[0].size;  // what is left of it (its outer part)
  const auto take = [&](MeshAxis& axis, int size) {
    if (w.hardware.gpu) {
      // A factor of a GPU axis becomes an axis of the grid (no wraparound on a GPU grid).
      AxisSpec piece = hardware[hw];
      piece.size = size;
      axis.factors.push_back({static_cast<int>(w.topology.size()), 1, size});
      axis.hw_axes.push_back(static_cast<int>(w.topology.size()));
      w.topology.push_back(piece);
    } else {
      // A torus axis keeps its links: the mesh axis takes the chips at a stride of it.
      const int stride = hardware[hw].size / left;
      axis.factors.push_back({static_cast<int>(hw), stride, size});
      if (axis.hw_axes.empty() || axis.hw_axes.back() != static_cast<int>(hw))
        axis.hw_axes.push_back(static_cast<int>(hw));
      axis.whole = axis.whole && size == hardware[hw].size;
    }
    left /= size;
    if (left == 1 && ++hw < hardware.size()) left = hardware[hw].size;
  };
  // A TPU mesh axis may take a divisor of what is left of a torus axis (not
  // on a twisted torus, whose wraparounds shift other axes, nor of the slices).
  const bool split = w.hardware.gpu || !w.twisted;
  for (const MeshAxisSpec& m : mesh.axes) {
    MeshAxis axis{m.name, m.size, {}, {}, true};
    std::uint64_t need = static_cast<std::uint64_t>(m.size);
    while (need > 1) {
      if (hw == hardware.size())
        m.where.fail(
            fmt::format("the mesh has more chips than the topology {} ({} chips); no hardware axes are left for mesh "
                        "axis {} of size {}",
                        topo, chips, m.name, m.size));
      const auto r = static_cast<std::uint64_t>(left);
      if (need % r == 0) {
        take(axis, left);
        need /= r;
        continue;
      }
      if (split && r % need == 0 && !hardware[hw].switched) {
        take(axis, static_cast<int>(need));
        need = 1;
        continue;
      }
      if (w.hardware.gpu && hardware[hw].in_node)
        m.where.fail(
            fmt::format("mesh axis {} of size {} cuts the {}-GPU nodes unevenly: a mesh axis takes a divisor "
                        "of the node's GPUs left ({}) or a multiple of them ({})",
                        m.name, m.size, shape[0], left, topo));
      if (w.hardware.gpu)
        m.where.fail(
            fmt::format("mesh axis {} of size {} cuts node axis {} ({} nodes) unevenly: a mesh axis takes a "
                        "divisor of the nodes left on it ({}) or a multiple of them ({})",
                        m.name, m.size, hw_name(hw), hardware[hw].size, left, topo));
      if (hardware[hw].switched || w.twisted)
        m.where.fail(fmt::format(
            "mesh axis {} of size {} does not cover whole hardware axes of the {} topology ({})", m.name, m.size, topo,
            w.twisted ? "on a twisted torus a mesh axis takes whole axes" : "a mesh axis takes whole slices"));
      m.where.fail(
          fmt::format("mesh axis {} of size {} cuts hardware axis {} unevenly: a mesh axis takes a divisor of "
                      "what is left of it ({}) or a multiple of that ({} topology)",
                      m.name, m.size, hw_name(hw), left, topo));
    }
    w.mesh.push_back(std::move(axis));
  }
  std::uint64_t mesh_chips = 1;
  for (const MeshAxisSpec& m : mesh.axes) mesh_chips *= static_cast<std::uint64_t>(m.size);
  if (hw < hardware.size() && left < hardware[hw].size && left > 1)
    mesh.where.fail(
        fmt::format("the mesh has {} chips but the topology {} has {}; no mesh axis is left for {} of "
                    "hardware axis {} of size {}",
                    mesh_chips, topo, chips, left, hw_name(hw), hardware[hw].size));
  for (; hw < hardware.size(); ++hw) {
    if (hardware[hw].size != 1)
      mesh.where.fail(
          fmt::format("the mesh has {} chips but the topology {} has {}; no mesh axis is left for hardware "
                      "axis {} of size {}",
                      mesh_chips, topo, chips, hw_name(hw), hardware[hw].size));
    w.topology.push_back(hardware[hw]);
  }
  if (!w.hardware.gpu) w.topology = hardware;  // a torus is not split: its mesh axes take factors of it
  if (w.topology.size() > static_cast<std::size_t>(topology::kMaxTorusAxes))
    mesh.where.fail(fmt::format("the mesh axes split the {} hardware axes into {}; meshsim supports at most {}", topo,
                                w.topology.size(), topology::kMaxTorusAxes));
}

// A GPU cluster: hardware axes (GPU within its node, node), or (GPU, node0,
// node1, ...) on a node grid.
void gpu_topology(Workload& w, const TopologySpec& topo, const MeshSpec& mesh, std::uint64_t mesh_chips) {
  const auto per_node = static_cast<std::uint64_t>(w.hardware.gpus_per_node);
  std::uint64_t nodes = 0;
  std::vector<int> grid;
  if (topo.given) {
    if (topo.node_grid) {
      for (std::size_t i = 0; i < topo.nodes.size(); ++i) check_in(topo.nodes[i], 1, kMaxAxisSize, topo.nodes_at.child(i));
      grid = topo.nodes;
      if (grid.empty() || grid.size() > 3)
        topo.nodes_at.fail(
            fmt::format("expected 1 to 3 node axes (the nodes as a grid, first axis fastest), got {}", grid.size()));
      nodes = 1;
      for (int g : grid) nodes *= static_cast<std::uint64_t>(g);
    } else {
      if (topo.nodes.size() != 1)
        topo.nodes_at.fail(fmt::format("expected one number of nodes (or a list: a grid of nodes), got {} numbers",
                                       topo.nodes.size()));
      check_in(topo.nodes[0], 1, kMaxChips, topo.nodes_at);
      nodes = static_cast<std::uint64_t>(topo.nodes[0]);
    }
    if (per_node * nodes > kMaxChips)
      topo.nodes_at.fail(fmt::format("{} GPUs is more than meshsim supports ({})", per_node * nodes, kMaxChips));
  } else {
    if (mesh_chips % per_node != 0)
      mesh.where.fail(fmt::format("the mesh has {} GPUs, not a whole number of {} nodes of {} GPUs", mesh_chips,
                                  w.hardware.preset, per_node));
    nodes = mesh_chips / per_node;
  }
  if (per_node * nodes > kMaxChips)
    mesh.where.fail(fmt::format("{} GPUs is more than meshsim supports ({})", per_node * nodes, kMaxChips));
  w.topology = {AxisSpec{static_cast<int>(per_node), false, false, /*in_node=*/true}};
  if (grid.empty())
    grid.push_back(static_cast<int>(nodes));
  else
    w.node_grid = true;
  for (int g : grid) w.topology.push_back(AxisSpec{g, false});
}

// A TPU slice (or several, over the data-center network).
void tpu_topology(Workload& w, const TopologySpec& topo, const MeshSpec& mesh) {
  const topology::Preset* preset = topology::find_preset(w.hardware.preset);
  MESHSIM_ASSERT(preset != nullptr, "a TPU's hardware is a preset's");
  std::vector<int> shape;
  if (topo.given) {
    for (std::size_t i = 0; i < topo.shape.size(); ++i) check_in(topo.shape[i], 1, kMaxAxisSize, topo.shape_at.child(i));
    shape = topo.shape;
    if (shape.empty()) topo.shape_at.fail("expected at least one axis");
    if (static_cast<int>(shape.size()) > preset->max_axes)
      topo.shape_at.fail(fmt::format("{} has a {}D interconnect; got {} axes", preset->name, preset->max_axes,
                                     shape.size()));
  } else {
    for (const MeshAxisSpec& m : mesh.axes) {
      if (m.size > kMaxAxisSize)
        m.where.fail(fmt::format("a torus axis has at most {} chips, got {}", kMaxAxisSize, m.size));
      shape.push_back(m.size);
    }
    if (static_cast<int>(shape.size()) > preset->max_axes)
      mesh.where.fail(fmt::format("{} has a {}D interconnect; got {} mesh axes (give \"topology\" to map them)",
                                  preset->name, preset->max_axes, shape.size()));
  }
  // Multislice: that many slices of this shape over the data-center network.
  const int slices = topo.given ? topo.slices : 1;
  if (topo.slices_at) check_in(slices, 1, kMaxAxisSize, *topo.slices_at);
  std::uint64_t chips = static_cast<std::uint64_t>(slices);
  for (int s : shape) chips *= static_cast<std::uint64_t>(s);
  if (chips > kMaxChips)
    (topo.given ? (slices > 1 ? *topo.slices_at : topo.shape_at) : mesh.where)
        .fail(fmt::format("{} chips is more than meshsim supports ({})", chips, kMaxChips));

  std::vector<bool> wrap = topology::default_wraparound(preset->wrap_rule, shape);
  if (topo.given && topo.wraparound) {
    if (topo.wraparound->size() != shape.size())
      topo.wraparound_at.fail(fmt::format("expected {} values (one per axis of the shape), got {}", shape.size(),
                                          topo.wraparound->size()));
    wrap = *topo.wraparound;
  }
  for (std::size_t a = 0; a < shape.size(); ++a) w.topology.push_back(AxisSpec{shape[a], wrap[a] && shape[a] > 1});
  if (topo.given && topo.twisted_at) {
    w.twisted = topo.twisted;
    if (w.twisted) {
      const std::string why = topology::Torus::twist_error(w.topology);
      std::string got;
      bool open = false;
      for (const AxisSpec& a : w.topology) {
        got += fmt::format("{}{}", got.empty() ? "" : "x", a.size);
        open = open || !a.wraparound;
      }
      if (open && why.find("wraps") != std::string::npos) got += " with an axis without wraparound";
      if (!why.empty()) topo.twisted_at->fail(fmt::format("{} (got {})", why, got));
    }
  }
  if (slices > 1) w.topology.push_back(AxisSpec{slices, true, /*switched=*/true});
}

}  // namespace

void build_system(Workload& w, Hardware hardware, const TopologySpec& topology, const MeshSpec& mesh) {
  w.hardware = std::move(hardware);
  w.topology.clear();
  w.mesh.clear();
  w.twisted = false;
  w.node_grid = false;
  for (std::size_t i = 0; i < mesh.axes.size(); ++i) {
    const MeshAxisSpec& m = mesh.axes[i];
    if (!is_name(m.name))
      m.where.fail(fmt::format("mesh axis name '{}' must be a letter followed by letters or digits", m.name));
    check_in(m.size, 1, kMaxChips, m.where);
    for (std::size_t j = 0; j < i; ++j)
      if (mesh.axes[j].name == m.name) m.where.fail(fmt::format("mesh axis {} is given twice", m.name));
  }
  if (mesh.axes.empty()) mesh.where.fail("expected at least one mesh axis, e.g. {\"X\": 16}");
  std::uint64_t mesh_chips = 1;
  for (const MeshAxisSpec& m : mesh.axes) mesh_chips *= static_cast<std::uint64_t>(m.size);
  if (w.hardware.gpu)
    gpu_topology(w, topology, mesh, mesh_chips);
  else
    tpu_topology(w, topology, mesh);
  map_mesh(w, mesh);
}

// ---------------------------------------------------------------- training

namespace {

std::vector<int> strategy_axes(const Workload& w, const StrategySpec& s) {
  std::vector<int> out;
  for (const AxisRef& e : s.axes) {
    const int a = detail::mesh_axis_index(w, e.name);
    if (a < 0) e.where.fail(fmt::format("unknown mesh axis '{}' (mesh axes: {})", e.name, detail::known_axes(w)));
    if (std::find(out.begin(), out.end(), a) != out.end())
      e.where.fail(fmt::format("mesh axis {} is listed twice", e.name));
    out.push_back(a);
  }
  return out;
}

void check_model(const ModelSpec& m, const SourceRef& where) {
  for (std::uint64_t v : {m.layers, m.d_model, m.heads, m.kv_heads, m.head_dim, m.ffn, m.vocab, m.seq_len, m.top_k,
                          m.moe_every})
    if (v == 0) where.fail("every dimension of the model is a positive integer");
  if (m.kv_heads > m.heads || m.heads % m.kv_heads != 0)
    where.fail(fmt::format("kv_heads {} must divide heads {} (MHA: equal, GQA: a divisor, MQA: 1)", m.kv_heads,
                           m.heads));
}

// The layers of each model chunk (Parallelism::chunk_layers) of `layers` over
// p stages of sp.virtual_stages chunks: as listed, or Megatron's first and
// last stages with the others even, or even; where the layers do not divide,
// every chunk takes the same but for one fewer in some, the outermost first
// (chunk 0, the last, chunk 1, ...: the first and last stages also hold the
// embedding and the head, as Llama 3's 126 layers over 16 stages do).
std::vector<std::uint64_t> chunk_layers(const TrainingSpec::Plan& sp, std::uint64_t layers, std::uint64_t p,
                                        const SourceRef& where) {
  const std::uint64_t v = sp.virtual_stages, chunks = p * v;
  const bool ends = sp.first_stage_layers_at || sp.last_stage_layers_at;
  if ((sp.stage_layers_at || ends) && p == 1)
    (sp.stage_layers_at         ? *sp.stage_layers_at
     : sp.first_stage_layers_at ? *sp.first_stage_layers_at
                                : *sp.last_stage_layers_at)
        .fail("stage layer counts need a \"pipeline\" axis of 2 or more stages");
  std::vector<std::uint64_t> out;
  if (sp.stage_layers_at) {
    const SourceRef& at = *sp.stage_layers_at;
    if (ends) at.fail("give \"stage_layers\" or \"first_stage_layers\" / \"last_stage_layers\", not both");
    if (sp.stage_layers.size() != chunks)
      at.fail(
          fmt::format("expected {} layer counts (one per model chunk: {} stages x {} virtual stages, in layer "
                      "order), got {}",
                      chunks, p, v, sp.stage_layers.size()));
    out = sp.stage_layers;
    std::uint64_t sum = 0;
    for (std::uint64_t n : out) sum += n;
    if (sum != layers) at.fail(fmt::format("the stage layers sum to {} but the model has {} layers", sum, layers));
    return out;
  }
  if (ends) {
    // Per stage, then each stage's layers split evenly over its v chunks.
    std::vector<std::uint64_t> stage(p, 0);
    std::vector<bool> given(p, false);
    std::uint64_t rest = layers, others = p;
    const auto take = [&](std::uint64_t s, std::uint64_t n, const SourceRef& at) {
      if (n > rest) at.fail(fmt::format("{} layers are more than the model's {} left for this stage", n, rest));
      stage[s] = n, given[s] = true, rest -= n, --others;
    };
    if (sp.first_stage_layers_at) take(0, sp.first_stage_layers, *sp.first_stage_layers_at);
    if (sp.last_stage_layers_at) take(p - 1, sp.last_stage_layers, *sp.last_stage_layers_at);
    const SourceRef& at = sp.last_stage_layers_at ? *sp.last_stage_layers_at : *sp.first_stage_layers_at;
    if (others == 0 && rest != 0)
      at.fail(fmt::format("the first and last stages hold {} of the {} layers; with 2 stages they must hold all",
                          layers - rest, layers));
    if (others > 0 && (rest % others != 0 || rest == 0))
      at.fail(fmt::format("the other {} layers do not split evenly over the other {} stages (give \"stage_layers\")",
                          rest, others));
    for (std::uint64_t s = 0; s < p; ++s)
      if (!given[s]) stage[s] = rest / others;
    for (std::uint64_t s = 0; s < p; ++s)
      if (stage[s] % v != 0)
        (s == 0 && sp.first_stage_layers_at ? *sp.first_stage_layers_at : at)
            .fail(fmt::format("stage {}'s {} layers do not split evenly over its {} virtual stages", s, stage[s], v));
    out.assign(chunks, 0);
    for (std::uint64_t c = 0; c < v; ++c)
      for (std::uint64_t s = 0; s < p; ++s) out[c * p + s] = stage[s] / v;
    return out;
  }
  if (layers < chunks)
    where.fail(fmt::format("layers {} are fewer than the pipeline's model chunks: stages x virtual stages = {} x {}",
                           layers, p, v));
  out.assign(chunks, layers / chunks + 1);
  for (std::uint64_t k = 0; k < chunks - layers % chunks; ++k) --out[k % 2 == 0 ? k / 2 : chunks - 1 - k / 2];
  return out;
}

// The plan resolved on w's mesh and checked against the model: every shard and
// stage whole, the batch a whole number of microbatches per replica.
// Long: every check of a plan against the model in the order the errors are
// documented (docs/TRAINING.md), each a few lines with its message.
// NOLINTNEXTLINE(readability-function-size)
Training resolve_training(const Workload& w, const TrainingSpec& s) {
  Training t;
  t.model = s.model;
  check_model(t.model, s.model_at);
  if (s.global_batch_tokens > 0) {
    const std::uint64_t n = s.global_batch_tokens;
    if (n % t.model.seq_len != 0)
      s.batch_at.fail(fmt::format("{} tokens are not a whole number of sequences of {}", n, t.model.seq_len));
    t.global_batch = n / t.model.seq_len;
    if (t.global_batch > (std::uint64_t{1} << 30)) s.batch_at.fail("more than 2^30 sequences");
  } else {
    if (s.global_batch == 0) s.batch_at.fail("expected a positive integer, got 0");
    t.global_batch = s.global_batch;
  }
  if (s.microbatch == 0) s.where.child("microbatch").fail("expected a positive integer, got 0");
  t.microbatch = s.microbatch;
  if (s.dtype != "bf16" && s.dtype != "fp16")
    s.where.child("dtype").fail(fmt::format("training dtype '{}': expected bf16 or fp16", s.dtype));
  t.dtype = s.dtype;
  if (s.gradient_bytes != 2 && s.gradient_bytes != 4)
    s.where.child("gradient_dtype").fail("gradients are 16-bit (bf16, fp16) or fp32");
  t.gradient_bytes = s.gradient_bytes;
  t.causal = s.causal;
  t.allow_oom = s.allow_oom;
  t.recompute = s.recompute;
  t.overlap = s.overlap;

  // The plan: each mesh axis belongs to one strategy; the rest are data parallel.
  const TrainingSpec::Plan& sp = s.parallelism;
  Parallelism& p = t.plan;
  std::vector<std::string> owner(w.mesh.size());
  const auto claim = [&](const std::vector<int>& axes, const char* strategy, const SourceRef& where) {
    for (int a : axes) {
      auto& o = owner[static_cast<std::size_t>(a)];
      if (!o.empty())
        where.fail(fmt::format("mesh axis {} is given to both {} and {}: each axis takes one strategy",
                               w.mesh[static_cast<std::size_t>(a)].name, o, strategy));
      o = strategy;
    }
  };
  if (sp.tensor.given) claim(p.tensor = strategy_axes(w, sp.tensor), "tensor", sp.tensor.where);
  if (sp.fsdp.given) claim(p.fsdp = strategy_axes(w, sp.fsdp), "fsdp", sp.fsdp.where);
  if (sp.expert.given) {
    claim(p.expert = strategy_axes(w, sp.expert), "expert", sp.expert.where);
    if (t.model.experts == 0)
      sp.expert.where.fail("expert parallelism needs a mixture-of-experts model (\"experts\" in the model)");
  }
  if (sp.context.given) claim(p.context = strategy_axes(w, sp.context), "context", sp.context.where);
  if (sp.pipeline.given) {
    const std::vector<int> axes = strategy_axes(w, sp.pipeline);
    if (axes.size() != 1) sp.pipeline.where.fail("expected one mesh axis name (a string)");
    claim(axes, "pipeline", sp.pipeline.where);
    p.pipeline = axes.front();
  }
  if (sp.data.given) claim(p.data = strategy_axes(w, sp.data), "data", sp.data.where);
  p.sequence_parallel = sp.sequence_parallel;
  p.sharded_optimizer = sp.sharded_optimizer;
  p.schedule = sp.schedule;
  if (sp.schedule_at && p.pipeline < 0) sp.schedule_at->fail("a schedule needs a \"pipeline\" axis");
  if (sp.virtual_stages == 0) sp.where.child("virtual_stages").fail("expected a positive integer, got 0");
  p.virtual_stages = sp.virtual_stages;
  if (p.virtual_stages > 1 && p.schedule != Schedule::Interleaved)
    sp.virtual_stages_at.value_or(sp.where.child("virtual_stages"))
        .fail("virtual_stages > 1 needs \"schedule\": \"interleaved\"");
  if (p.sequence_parallel && p.tensor.empty())
    sp.sequence_parallel_at.value_or(sp.where.child("sequence_parallel"))
        .fail("sequence parallelism needs \"tensor\" axes");
  // Unclaimed axes of size > 1 are data parallel when "data" is not given; when
  // it is, every axis must be covered.
  for (std::size_t a = 0; a < w.mesh.size(); ++a) {
    if (!owner[a].empty() || w.mesh[a].size == 1) continue;
    if (sp.data.given)
      sp.data.where.fail(fmt::format("mesh axis {} takes no strategy: list it under one of data, fsdp, tensor, "
                                     "pipeline, expert or context (the strategies must cover the mesh)",
                                     w.mesh[a].name));
    p.data.push_back(static_cast<int>(a));
  }
  if (p.schedule == Schedule::Interleaved && p.virtual_stages < 2 && sp.given)
    sp.where.fail("the interleaved schedule needs \"virtual_stages\" of 2 or more");

  t.dp = detail::axes_product(w, p.data);
  t.fsdp = detail::axes_product(w, p.fsdp);
  t.tp = detail::axes_product(w, p.tensor);
  t.pp = p.pipeline < 0 ? 1 : static_cast<std::uint64_t>(w.mesh[static_cast<std::size_t>(p.pipeline)].size);
  t.ep = detail::axes_product(w, p.expert);
  t.cp = detail::axes_product(w, p.context);

  // Divisibility: every shard and stage must be whole.
  const SourceRef& where = sp.given ? sp.where : s.where;
  const ModelSpec& m = t.model;
  if (m.heads % t.tp != 0)
    where.fail(fmt::format("heads {} are not divisible by the tensor-parallel degree {}", m.heads, t.tp));
  if (t.tp > m.kv_heads && t.tp % m.kv_heads == 0) {
    t.kv_replicas = t.tp / m.kv_heads;  // one KV head a chip, replicated (training.hpp)
  } else if (m.kv_heads % t.tp != 0) {
    where.fail(
        fmt::format("kv_heads {} are neither divisible by the tensor-parallel degree {} nor a divisor of it (a "
                    "chip holds g / tp KV heads, or one KV head replicated on tp / g chips)",
                    m.kv_heads, t.tp));
  }
  if (m.ffn % t.tp != 0) where.fail(fmt::format("ffn {} is not divisible by the tensor-parallel degree {}", m.ffn, t.tp));
  if (m.vocab % t.tp != 0)
    where.fail(fmt::format("vocab {} is not divisible by the tensor-parallel degree {} (pad it)", m.vocab, t.tp));
  const std::uint64_t halves = t.causal && t.cp > 1 ? 2 : 1;
  if (m.seq_len % (t.cp * halves) != 0)
    where.fail(fmt::format("seq_len {} is not divisible by {} x the context-parallel degree {} (each chip holds an "
                           "equal part of every sequence{})",
                           m.seq_len, halves, t.cp, halves == 2 ? ", and causal attention halves each part's keys" : ""));
  if (p.sequence_parallel && (m.seq_len / t.cp * t.microbatch) % t.tp != 0)
    where.fail(fmt::format("the microbatch's tokens on a chip ({} x {}) are not divisible by the tensor-parallel "
                           "degree {} (sequence parallelism splits them)",
                           t.microbatch, m.seq_len / t.cp, t.tp));
  if (m.experts > 0) {
    if (m.experts % t.ep != 0)
      where.fail(fmt::format("experts {} are not divisible by the expert-parallel degree {}", m.experts, t.ep));
    if (t.tp > 1 && !p.sequence_parallel)
      where.fail("a mixture-of-experts model with tensor parallelism needs \"sequence_parallel\": true (each "
                 "chip routes its own part of the tokens)");
    if (m.layers < m.moe_every)
      s.model_at.fail(fmt::format("moe_every {} is more than the {} layers: no layer would be an MoE layer",
                                  m.moe_every, m.layers));
  }
  if (t.overlap.tensor && (t.tp == 1 || !p.sequence_parallel))
    s.overlap_tensor_at.value_or(s.where.child("overlap").child("tensor"))
        .fail("collective matmuls (\"tensor\": true) need tensor axes with \"sequence_parallel\": true");
  if (p.virtual_stages > 1 && t.pp == 1)
    where.fail("virtual stages need a pipeline of 2 or more stages (the pipeline axis has 1)");
  p.chunk_layers = chunk_layers(sp, m.layers, t.pp, where);
  if (t.kv_replicas > 1 && w.hardware.gpu && detail::kv_replica_axes(w, t).empty())
    where.fail(
        fmt::format("tensor parallelism of {} over {} KV heads replicates each on {} GPUs, whose gradients are "
                    "summed over them: on a GPU fabric the last tensor axes must span exactly those {} GPUs",
                    t.tp, m.kv_heads, t.kv_replicas, t.kv_replicas));
  // Expert axes split the batch too (they are data parallel outside the experts).
  const std::uint64_t replicas = t.dp * t.fsdp * t.ep;
  // The byte counts are exact integers: refuse a model whose counts would pass
  // 2^62 (long double estimates of the largest: all weights with their
  // optimizer states, one layer's attention scores for all microbatches).
  {
    using LD = long double;
    const LD h = static_cast<LD>(m.d_model), q = static_cast<LD>(m.heads * m.head_dim);
    const LD kv = static_cast<LD>(m.kv_heads * m.head_dim), sl = static_cast<LD>(m.seq_len);
    const LD layer = h * (q + 2 * kv) + q * h + 3 * h * static_cast<LD>(m.ffn) +
                     static_cast<LD>(m.experts) * 3 * h * static_cast<LD>(m.expert_ffn);
    const LD params = static_cast<LD>(m.layers) * layer + 2 * static_cast<LD>(m.vocab) * h + sl * h;
    const LD scores = 5 * static_cast<LD>(m.heads) * sl * sl * static_cast<LD>(t.global_batch) * static_cast<LD>(m.layers);
    const LD widest = std::max({h, static_cast<LD>(m.ffn), static_cast<LD>(m.vocab),
                                static_cast<LD>(m.expert_ffn) * static_cast<LD>(m.top_k) * m.capacity_factor});
    const LD activation = 8 * sl * static_cast<LD>(t.microbatch) * widest;  // one microbatch's widest tensor
    constexpr LD kLimit = static_cast<LD>(std::uint64_t{1} << 62);
    if (16 * params > kLimit || scores > kLimit || activation > kLimit)
      s.model_at.fail(fmt::format("the model is too large for meshsim's byte counts (about {:.3g} parameters, "
                                  "{:.3g} bytes of attention scores): they must stay below 2^62",
                                  static_cast<double>(params), static_cast<double>(scores)));
  }
  if (t.global_batch % (replicas * t.microbatch) != 0)
    s.batch_at.fail(fmt::format("global_batch {} is not divisible by data-parallel replicas x microbatch = {} x {} "
                                "(data {} x fsdp {}{})",
                                t.global_batch, replicas, t.microbatch, t.dp, t.fsdp,
                                t.ep > 1 ? fmt::format(" x expert {}", t.ep) : ""));
  t.microbatches = t.global_batch / (replicas * t.microbatch);
  if (t.pp > 1 && p.schedule != Schedule::GPipe && t.microbatches < t.pp)
    s.batch_at.fail(fmt::format("{} microbatches per replica are fewer than the {} pipeline stages: 1F1B and "
                                "interleaved 1F1B need at least as many (a larger global_batch or a smaller microbatch)",
                                t.microbatches, t.pp));
  if (p.schedule == Schedule::Interleaved && t.microbatches % t.pp != 0)
    s.batch_at.fail(fmt::format("{} microbatches per replica are not a multiple of the {} pipeline stages (the "
                                "interleaved schedule needs that)",
                                t.microbatches, t.pp));
  if (p.sharded_optimizer && t.dp == 1)
    sp.sharded_optimizer_at.value_or(where.child("sharded_optimizer"))
        .fail("a sharded optimizer needs data-parallel axes (FSDP already shards it)");
  return t;
}

}  // namespace

Training plan_training(const Workload& w, const TrainingSpec& spec) {
  Training t = resolve_training(w, spec);
  detail::check_training(w, t, spec.where);
  return t;
}

void add_training(Workload& w, Training t, const SourceRef& where) {
  auto step = std::make_shared<Training>(std::move(t));
  detail::lower_training(w, *step, where);
  w.training = std::move(step);
  check_time_range(w);
}

void build_training(Workload& w, const TrainingSpec& spec) { add_training(w, plan_training(w, spec), spec.where); }

void build_ops(Workload& w, const OpsSpec& spec) {
  detail::Lowerer lowerer(w);
  for (const ArraySpec& a : spec.arrays) lowerer.declare(detail::lower_array(w, a), a.where);
  if (spec.ops.empty()) spec.ops_at.fail("expected at least one op");
  w.ops.reserve(spec.ops.size());  // at least one op each: no moves of the ops as they come
  for (std::size_t i = 0; i < spec.ops.size(); ++i) lowerer.lower(spec.ops[i], i);
  check_time_range(w);
}

Workload build_workload(const WorkloadSpec& spec) {
  Workload w;
  w.file = spec.file;
  build_system(w, spec.hardware, spec.topology, spec.mesh);
  if (spec.training)
    build_training(w, *spec.training);
  else
    build_ops(w, spec.ops);
  return w;
}

Hardware resolve_preset(const NameRef& preset) {
  if (std::optional<Hardware> hw = preset_hardware(preset.name)) return *std::move(hw);
  preset.where.fail(fmt::format("unknown preset '{}' (known: {}, {})", preset.name, topology::preset_names(),
                                topology::gpu_preset_names()));
}

bool algorithm_fits(std::string_view algorithm, OpKind kind) {
  if (algorithm == "auto") return is_collective(kind);
  if (algorithm == "ring" || algorithm == "balanced" || algorithm == "equal")
    return kind == OpKind::AllGather || kind == OpKind::ReduceScatter || kind == OpKind::AllReduce;
  if (algorithm == "direct") return kind == OpKind::AllToAll || kind == OpKind::AllReduce;
  return kind == OpKind::AllReduce;
}

void apply_edits(WorkloadSpec& spec, const WorkloadEdits& edits) {
  if (!edits.mesh.empty()) {
    MESHSIM_ASSERT(edits.mesh.size() == spec.mesh.axes.size(), "one size per mesh axis");
    for (std::size_t i = 0; i < edits.mesh.size(); ++i) spec.mesh.axes[i].size = edits.mesh[i];
    spec.topology = TopologySpec{};  // the shape follows the mesh (docs/WORKLOAD.md, `topology`)
  }
  for (OpSpec& op : spec.ops.ops) {
    if (auto* c = std::get_if<CollectiveSpec>(&op.what)) {
      if (!edits.algorithm.empty() && algorithm_fits(edits.algorithm, c->kind)) {
        if (edits.algorithm == "auto")
          c->algorithm.reset();
        else
          c->algorithm = NameRef{edits.algorithm, op.where.child("algorithm")};
      }
      if (edits.bytes && c->bytes) c->bytes = *edits.bytes;
    } else if (auto* send = std::get_if<SendSpec>(&op.what)) {
      if (edits.bytes) send->bytes = *edits.bytes;
    }
  }
}

void add_collective(Workload& w, OpKind kind, std::uint64_t bytes, const std::vector<std::string>& axes,
                    const SourceRef& where) {
  MESHSIM_ASSERT(is_collective(kind), "a collective");
  detail::check_positive(bytes, std::uint64_t{1} << 62, where.child("bytes"));  // as the JSON's "bytes"
  Op op(kind);
  op.name = fmt::format("{}#{}", kind_name(kind), w.ops.size());
  op.group = op.name;
  op.pointer = where.pointer;
  std::vector<NameRef> names;
  for (std::size_t i = 0; i < axes.size(); ++i) names.push_back({axes[i], where.child("axes").child(i)});
  CollectiveOp& c = op.collective();
  detail::set_comm_axes(w, c, detail::resolve_axes(w, names, where.child("axes")));
  c.bytes = bytes;
  check_time_range(w, op);
  w.ops.push_back(std::move(op));
}

}  // namespace meshsim::workloads
