#include "reports/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <nlohmann/json.hpp>

#include "reports/training_report.hpp"
#include "sim/collectives/schedule.hpp"
#include "topology/torus.hpp"

namespace meshsim::reports {

using driver::CriticalPath;
using driver::LinkLoad;
using driver::OpResult;
using driver::RunResult;

namespace {

std::int64_t seconds_to_ps(double s) { return std::llround(s * 1e12); }

// Simulated over closed form; none when the closed form is 0 (an op over axes
// of size 1 moves nothing).
std::optional<double> ratio(const OpResult& o) {
  const std::int64_t closed = seconds_to_ps(o.closed_s);
  if (closed <= 0) return std::nullopt;
  return static_cast<double>(o.time().ps()) / static_cast<double>(closed);
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) {
    if (!s.empty()) s += ',';
    s += n;
  }
  return s;
}

// The axes column: the mesh axes, "groups" for a collective over groups of chips, "-" for none.
std::string axes_text(const OpResult& o) {
  if (o.groups && o.mesh_axes.empty()) return "groups";
  return o.mesh_axes.empty() ? "-" : joined(o.mesh_axes);
}

std::string us(double seconds) { return fmt::format("{:.3f}", seconds * 1e6); }
std::string us(Tick t) { return fmt::format("{:.3f}", static_cast<double>(t.ps()) * 1e-6); }

std::string topology_line(const workloads::Workload& w, const topology::System& system) {
  const topology::Torus& t = system.grid();
  if (system.switched()) {
    // "4 nodes x 8 GPUs", or on a node grid "8 nodes (4x2) x 8 GPUs" (as the
    // topology has them, before mesh axes split any).
    const int nodes = static_cast<int>(t.num_chips()) / system.fabric()->gpus_per_node();
    const std::vector<int> grid(w.written_shape.begin() + 1, w.written_shape.end());
    const workloads::Hardware& fab = w.hardware;
    std::string tree = fmt::format("{} spine{}", fab.spines, fab.spines == 1 ? "" : "s");
    if (fab.leaf_nodes > 0 && fab.leaf_nodes < nodes) {
      tree = fmt::format("leaves of {} nodes, {}", fab.leaf_nodes, tree);
      if (fab.pod_nodes > 0 && fab.pod_nodes < nodes) tree += fmt::format(" per pod of {} nodes, a core tier", fab.pod_nodes);
    }
    if (fab.leaf_oversubscription > 1) tree += fmt::format(", leaves oversubscribed {}:1", fab.leaf_oversubscription);
    if (fab.spine_oversubscription > 1 && fab.pod_nodes > 0 && fab.pod_nodes < nodes)
      tree += fmt::format(", spines oversubscribed {}:1", fab.spine_oversubscription);
    std::string s = fmt::format(
        "{} node{}{} x {} GPUs (NVLink switch per node; nodes on a rail-optimised fat tree, {}); "
        "mesh",
        nodes, nodes == 1 ? "" : "s", w.node_grid ? fmt::format(" ({})", fmt::join(grid, "x")) : std::string(),
        system.fabric()->gpus_per_node(), tree);
    for (const workloads::MeshAxis& m : w.mesh) {
      std::string hw;
      for (int a : m.hw_axes) {
        if (!hw.empty()) hw += '+';
        hw += system.axis_name(a);
      }
      s += fmt::format(" {}={}({})", m.name, m.size, hw.empty() ? "-" : hw);
    }
    return s;
  }
  std::string wrapped, open;
  for (int a = 0; a < t.num_axes(); ++a) {
    if (t.axis(a).size == 1 || t.switched(a)) continue;
    std::string& list = t.axis(a).wraparound ? wrapped : open;
    if (!list.empty()) list += ',';
    list += system.axis_name(a);
  }
  std::string s = fmt::format("{} ({} chips", t.shape_string(), t.num_chips());
  if (!wrapped.empty()) s += ", wraparound on " + wrapped;
  if (!open.empty()) s += ", no wraparound on " + open;
  if (t.twisted()) s += ", twisted";
  if (t.dcn_axis() >= 0)
    s += fmt::format(", data-center network {:g} GB/s per chip each way", static_cast<double>(w.hardware.dcn.bandwidth_bytes_per_s) / 1e9);
  s += "); mesh";
  for (const workloads::MeshAxis& m : w.mesh) {
    std::string hw;
    for (const workloads::AxisFactor& f : m.factors) {
      const int a = f.hw;
      if ((t.switched(a) || !m.whole) && !hw.empty()) hw += '+';
      hw += system.axis_name(a);
      // Part of a torus axis: its size, and the stride of its chips along it.
      if (f.size != t.axis(a).size)
        hw += f.stride == 1 ? fmt::format(":{}", f.size) : fmt::format(":{}@{}", f.size, f.stride);
    }
    s += fmt::format(" {}={}({})", m.name, m.size, hw.empty() ? "-" : hw);
  }
  return s;
}

std::string busiest_links_table(const RunResult& r) {
  if (r.busiest_links.empty()) return {};
  std::string out = "\nbusiest links (one direction each)\n";
  for (const LinkLoad& l : r.busiest_links) {
    const double util = r.makespan.ps() > 0 ? static_cast<double>(l.busy.ps()) / static_cast<double>(r.makespan.ps()) : 0;
    out += fmt::format("  {:<20} {:>15} bytes  busy {:>13} us  ({:.1f}% of the run)\n", l.name, l.bytes, us(l.busy),
                       100 * util);
  }
  return out;
}

}  // namespace

std::string reduction_note(const RunResult& r) {
  if (r.reduced_classes == 0) return {};
  if (r.translations > 0 && r.mirrored)
    return fmt::format("exact reduction: simulated {} of the {} transfers, one task of each set of {} images "
                       "(rotations of every node's GPUs and the mirror of the nodes, which leave the program "
                       "unchanged); --no-reduce simulates all, with the same results\n",
                       r.simulated_transfers, r.transfers, r.translations);
  if (r.translations > 0)
    return fmt::format("exact reduction: simulated {} of the {} transfers, one task of each set of {} translates "
                       "(shifts of the chips along the system's axes that leave the program unchanged); --no-reduce "
                       "simulates all, with the same results\n",
                       r.simulated_transfers, r.transfers, r.translations);
  return fmt::format("exact reduction: simulated {} of the {} transfers, one of each set of identical independent "
                     "groups ({} distinct); --no-reduce simulates all, with the same results\n",
                     r.simulated_transfers, r.transfers, r.reduced_classes);
}

// The calibration terms that differ from the defaults (docs/CALIBRATION.md; a
// link efficiency from its preset's), or nothing.
std::string calibration_line(const workloads::Hardware& hw) {
  using workloads::FabricLevel;
  std::vector<std::string> parts;
  const std::vector<FabricLevel> levels = hw.gpu ? std::vector{FabricLevel::Nvlink, FabricLevel::Nic}
                                                 : std::vector{FabricLevel::Ici, FabricLevel::Dcn};
  for (FabricLevel l : levels) {
    const auto i = static_cast<std::size_t>(l);
    if (hw.link_efficiency[i] != workloads::preset_link_efficiency(hw, l))
      parts.push_back(fmt::format("{} links at {:.4g} % of peak", workloads::level_name(l), 100 * hw.link_efficiency[i]));
    for (OpKind k : {OpKind::AllGather, OpKind::ReduceScatter, OpKind::AllReduce, OpKind::AllToAll, OpKind::Send})
      if (hw.fixed_cost_of(l, k) > kZeroTick)
        parts.push_back(fmt::format("{} {} fixed cost {} us", workloads::level_name(l), kind_name(k),
                                    us(hw.fixed_cost_of(l, k))));
  }
  return parts.empty() ? std::string() : fmt::format("terms     {}\n", fmt::join(parts, ", "));
}

OpRecord op_record(const OpResult& o) {
  OpRecord rec;
  rec.name = o.name;
  rec.kind = o.kind;
  rec.mesh_axes = o.mesh_axes;
  rec.bytes = o.bytes;
  rec.start_ps = o.begin.ps();
  rec.end_ps = o.end.ps();
  rec.time_ps = o.time().ps();
  rec.closed_form_ps = seconds_to_ps(o.closed_s);
  if (!is_local(o.kind)) {
    rec.latency_term_ps = seconds_to_ps(o.latency_s);
    rec.bandwidth_term_ps = seconds_to_ps(o.bandwidth_s);
    rec.lower_bound_ps = seconds_to_ps(o.bound_s);
    rec.lower_bound_term = o.bound_term;
    rec.algbw_bytes_per_s = o.algbw_bytes_per_s;
    rec.busbw_bytes_per_s = o.busbw_bytes_per_s;
  }
  rec.ratio = ratio(o);
  rec.bound = o.bound;
  rec.algorithm = o.algorithm;
  rec.protocol = o.protocol;
  rec.transfers = o.transfers;
  rec.link_bytes = o.link_bytes;
  return rec;
}

std::string format_table(const workloads::Workload& w, driver::RunContext& run, const RunResult& r) {
  const auto& ici = w.hardware.ici;
  const bool gpu = run.system().switched();
  std::string out;
  if (gpu) {
    const auto gbps = [](std::uint64_t bytes_per_s) { return static_cast<double>(bytes_per_s) / 1e9; };
    const std::string nvlink_peak =
        w.hardware.nvlink.bandwidth_bytes_per_s == w.hardware.peak.nvlink
            ? std::string()
            : fmt::format(", {:.4g} % of the {:g} GB/s peak",
                          100 * gbps(w.hardware.nvlink.bandwidth_bytes_per_s) / gbps(w.hardware.peak.nvlink),
                          gbps(w.hardware.peak.nvlink));
    out += fmt::format(
        "hardware  {}: NVLink {:g} GB/s per direction per GPU ({} us per hop{}), NIC {:g} GB/s per "
        "direction ({} us per hop)\n",
        w.hardware.preset, gbps(w.hardware.nvlink.bandwidth_bytes_per_s), us(w.hardware.nvlink.latency), nvlink_peak,
        gbps(w.hardware.nic.bandwidth_bytes_per_s), us(w.hardware.nic.latency));
  } else {
    out += fmt::format("hardware  {}: ICI {:g} GB/s one-way per link (W = {:g} GB/s bidirectional), {} us per hop\n",
                       w.hardware.preset, static_cast<double>(ici.bandwidth_bytes_per_s) / 1e9,
                       2 * static_cast<double>(ici.bandwidth_bytes_per_s) / 1e9, us(ici.latency));
  }
  out += calibration_line(w.hardware);
  out += "topology  " + topology_line(w, run.system()) + "\n";
  if (r.engine == "simgrid")
    out += "engine    SimGrid 3.32 CM02: the same transfers as flows, max-min sharing (docs/CROSSCHECK.md)\n";
  // A training step has thousands of ops: its report replaces the table of them.
  if (w.training) {
    out += '\n';
    out += format_training_table(w, r);
    out += busiest_links_table(r);
    return out;
  }
  out += "\n";
  std::size_t name_width = 20;
  for (const OpResult& o : r.ops) name_width = std::max(name_width, o.name.size());
  out += fmt::format("{:<{}} {:<14} {:<6} {:>15} {:>13} {:>13} {:>13} {:>7}  {:<9} {:>13} {:>7} {:>10}{}\n", "op",
                     name_width, "kind", "axes", "V (bytes)", "start (us)", "time (us)", "closed (us)", "ratio",
                     "regime", "bound (us)", "t/bound", "busbw GB/s", gpu ? "  algorithm/protocol" : "");
  bool open_axis = false, twisted_line = false;
  const topology::Torus& t = run.torus();
  for (std::size_t i = 0; i < r.ops.size(); ++i) {
    const OpResult& o = r.ops[i];
    const std::vector<int>& axes = w.ops[i].comm_axes();
    for (int a : axes) open_axis = open_axis || (!gpu && !t.axis(a).wraparound);
    if (!gpu && t.twisted() && !axes.empty() &&
        (o.kind == OpKind::AllGather || o.kind == OpKind::ReduceScatter || o.kind == OpKind::AllReduce)) {
      const collectives::AxesShape& shape = run.plans().shape(t, axes);
      for (std::size_t j = 0; j < axes.size(); ++j) twisted_line = twisted_line || (t.twisted_axis(axes[j]) && !shape.ring[j]);
    }
    const std::optional<double> q = ratio(o);
    const bool bounded = !is_local(o.kind) && o.bound_s > 0;
    out += fmt::format("{:<{}} {:<14} {:<6} {:>15} {:>13} {:>13} {:>13} {:>7}  {:<9} {:>13} {:>7} {:>10}{}\n", o.name,
                       name_width, kind_name(o.kind), axes_text(o), is_local(o.kind) ? "-" : std::to_string(o.bytes),
                       us(o.begin), us(o.time()), us(o.closed_s), q ? fmt::format("{:.4f}", *q) : "-", o.bound,
                       bounded ? us(o.bound_s) : "-",
                       bounded ? fmt::format("{:.4f}", o.time().seconds() / o.bound_s) : "-",
                       o.busbw_bytes_per_s > 0 ? fmt::format("{:.2f}", o.busbw_bytes_per_s / 1e9) : "-",
                       gpu ? "  " + (o.algorithm.empty()  ? std::string("-")
                                     : o.protocol.empty() ? o.algorithm
                                                          : o.algorithm + "/" + o.protocol)
                           : "");
  }
  if (r.engine == "simgrid")
    out += fmt::format("\ntotal {} us; {} transfers as {} SimGrid flows, {} bytes over links\n", us(r.makespan),
                       r.transfers, r.flows, r.link_bytes);
  else
    out += fmt::format("\ntotal {} us; {} transfers, {} bytes over links, {} engine events\n", us(r.makespan),
                       r.transfers, r.link_bytes, r.events);
  out += reduction_note(r);
  if (open_axis)
    out += "note: an axis without wraparound runs as a line; the cheat sheet assumes a torus (expect ~2x)\n";
  if (std::any_of(r.ops.begin(), r.ops.end(), [](const OpResult& o) { return o.groups && o.mesh_axes.empty(); }))
    out += "note: axes \"groups\": collectives over groups of chips that are not mesh axes, rings in group order with "
           "routed steps; closed form: the busiest link's bytes over its bandwidth (docs/MODEL.md)\n";
  if (std::any_of(r.ops.begin(), r.ops.end(), [](const OpResult& o) { return o.groups && !o.mesh_axes.empty(); }))
    out +=
        "note: a mesh axis over part of a torus axis: its collectives run a phase per factor, rings of routed "
        "steps; closed form: the busiest link's bytes over its bandwidth (docs/MODEL.md)\n";
  if (twisted_line)
    out += "note: gathers and reductions over a twisted axis without its long axes run it as a line (docs/MODEL.md, "
           "\"Twisted tori\")\n";
  if (!r.critical_paths.empty()) {
    out += "\ncritical paths (what each op's last byte waited for, walked back to the op's start; times are sums along\n"
           "the path, and forwarded hops overlap, so they can add up to more than the op's time)\n";
    for (std::size_t i = 0; i < r.ops.size(); ++i) {
      const CriticalPath& c = r.critical_paths[i];
      out += fmt::format("  {}: {} hops, {} computes; on the wire {} us, hop latency {} us, behind other ops {} us, "
                         "compute {} us{}\n",
                         r.ops[i].name, c.hops, c.computes, us(c.wire), us(c.latency), us(c.queued), us(c.compute),
                         c.fixed > kZeroTick ? fmt::format(", fixed cost {} us", us(c.fixed)) : std::string());
      if (!c.steps.empty()) out += fmt::format("    {}\n", fmt::join(c.steps, " -> "));
    }
  }
  out += busiest_links_table(r);
  return out;
}

namespace {

using Json = nlohmann::ordered_json;

// The run JSON's "training" object (docs/OUTPUT.md).
Json training_json(const workloads::Workload& w, const RunResult& r) {
  const workloads::Training& t = *w.training;
  const workloads::ModelSpec& m = t.model;
  const workloads::StepFormulas& f = t.formulas;
  const TrainingResult tr = training_result(w, r);
  Json j;
  j["model"] = {{"name", m.name},        {"layers", m.layers}, {"d_model", m.d_model},   {"heads", m.heads},
                {"kv_heads", m.kv_heads}, {"head_dim", m.head_dim}, {"ffn", m.ffn},     {"gated", m.gated},
                {"vocab", m.vocab},       {"seq_len", m.seq_len}, {"experts", m.experts}, {"top_k", m.top_k},
                {"parallel_block", m.parallel_block}, {"parameters", f.parameters}};
  j["plan"] = {{"data", t.dp},
               {"expert", t.ep},
               {"context", t.cp},
               {"fsdp", t.fsdp},
               {"tensor", t.tp},
               {"kv_replicas", t.kv_replicas},
               {"sequence_parallel", t.plan.sequence_parallel},
               {"pipeline", t.pp},
               {"schedule", workloads::schedule_name(t.plan.schedule)},
               {"virtual_stages", t.plan.virtual_stages},
               {"chunk_layers", t.plan.chunk_layers},
               {"microbatch", t.microbatch},
               {"microbatches", t.microbatches},
               {"global_batch", t.global_batch},
               {"recompute", workloads::recompute_name(t.recompute)},
               {"causal", t.causal},
               {"sharded_optimizer", t.plan.sharded_optimizer},
               {"gradient_bytes", t.gradient_bytes}};
  j["step_ps"] = tr.step.ps();
  j["tokens_per_s_per_chip"] = tr.tokens_per_s_per_chip;
  j["model_flops"] = tr.model_flops;
  j["hardware_flops"] = tr.hardware_flops;
  j["peak_flops_per_s"] = f.peak_flops_per_s;
  j["mfu"] = tr.mfu;
  j["hfu"] = tr.hfu;
  j["memory_bytes"] = {{"weights", f.weight_bytes},
                       {"gradients", f.gradient_bytes},
                       {"optimizer", f.optimizer_bytes},
                       {"activations", f.activation_bytes},
                       {"activations_per_layer", f.activation_bytes_per_layer},
                       {"microbatches_in_flight", f.microbatches_in_flight},
                       {"working", f.working_bytes},
                       {"peak", f.peak_bytes},
                       {"hbm", f.hbm_bytes}};
  Json stages = Json::array();
  for (const StageBreakdown& b : tr.stages)
    stages.push_back({{"stage", b.stage},
                      {"compute_ps", b.compute.ps()},
                      {"tensor_ps", b.tensor.ps()},
                      {"expert_ps", b.expert.ps()},
                      {"context_ps", b.context.ps()},
                      {"fsdp_ps", b.fsdp.ps()},
                      {"data_ps", b.data.ps()},
                      {"pipeline_ps", b.pipeline.ps()},
                      {"optimizer_ps", b.optimizer.ps()},
                      {"idle_ps", b.idle.ps()}});
  j["stages"] = stages;
  j["ops"] = w.ops.size();
  return j;
}

void add_busiest_links(Json& j, const RunResult& r) {
  if (r.busiest_links.empty()) return;
  Json links = Json::array();
  for (const LinkLoad& l : r.busiest_links) links.push_back({{"link", l.name}, {"bytes", l.bytes}, {"busy_ps", l.busy.ps()}});
  j["busiest_links"] = links;
}

Json run_json(const workloads::Workload& w, const topology::System& system, const RunResult& r) {
  const topology::Torus& t = system.grid();
  Json j;
  j["format"] = "meshsim-run";
  j["format_version"] = 1;
  j["workload"] = w.file;
  if (r.engine != "native") j["engine"] = r.engine;  // absent: the native engine
  j["hardware"] = {{"preset", w.hardware.preset},
                   {"ici_bandwidth_one_way_bytes_per_s", w.hardware.ici.bandwidth_bytes_per_s},
                   {"hop_latency_ps", w.hardware.ici.latency.ps()},
                   {"forward_chunk_bytes", w.hardware.forward_chunk_bytes},
                   {"bf16_flops_per_s", w.hardware.chip.bf16_flops_per_s},
                   {"int8_ops_per_s", w.hardware.chip.int8_ops_per_s},
                   {"hbm_bytes", w.hardware.chip.hbm_bytes},
                   {"hbm_bandwidth_bytes_per_s", w.hardware.chip.hbm_bandwidth_bytes_per_s}};
  {
    // Calibration terms, where they differ from the defaults (docs/CALIBRATION.md).
    using workloads::FabricLevel;
    Json efficiency = Json::object(), fixed = Json::object();
    for (FabricLevel l : {FabricLevel::Ici, FabricLevel::Dcn, FabricLevel::Nvlink, FabricLevel::Nic}) {
      const auto i = static_cast<std::size_t>(l);
      const std::string name(workloads::level_name(l));
      if (w.hardware.link_efficiency[i] != 1.0) efficiency[name] = w.hardware.link_efficiency[i];
      for (OpKind k : {OpKind::AllGather, OpKind::ReduceScatter, OpKind::AllReduce, OpKind::AllToAll, OpKind::Send})
        if (w.hardware.fixed_cost_of(l, k) > kZeroTick)
          fixed[name][std::string(kind_name(k))] = w.hardware.fixed_cost_of(l, k).ps();
    }
    if (!efficiency.empty()) j["hardware"]["link_efficiency"] = efficiency;
    if (!fixed.empty()) j["hardware"]["collective_fixed_cost_ps"] = fixed;
  }
  Json shape = Json::array(), wrap = Json::array();
  for (const auto& a : t.axes()) {
    if (a.switched) continue;
    shape.push_back(a.size);
    wrap.push_back(a.wraparound);
  }
  j["topology"] = {{"shape", shape}, {"wraparound", wrap}, {"chips", t.num_chips()}, {"links", t.num_links()}};
  if (t.twisted()) j["topology"]["twisted"] = true;
  if (t.dcn_axis() >= 0) {  // multislice
    j["topology"]["slices"] = t.axis(t.dcn_axis()).size;
    j["hardware"]["dcn_bandwidth_one_way_bytes_per_s"] = w.hardware.dcn.bandwidth_bytes_per_s;
    j["hardware"]["dcn_hop_latency_ps"] = w.hardware.dcn.latency.ps();
  }
  Json mesh = Json::array();
  for (const auto& m : w.mesh) {
    Json hw = Json::array();
    for (int a : m.hw_axes) hw.push_back(t.axis_name(a));
    Json axis = {{"name", m.name}, {"size", m.size}, {"hardware_axes", hw}};
    if (!m.whole) {  // part of a torus axis: what it takes of each
      Json parts = Json::array();
      for (const workloads::AxisFactor& f : m.factors)
        parts.push_back({{"axis", t.axis_name(f.hw)}, {"size", f.size}, {"stride", f.stride}});
      axis["factors"] = parts;
    }
    mesh.push_back(std::move(axis));
  }
  j["mesh"] = mesh;
  if (w.training) {  // the step's report instead of thousands of ops
    j["training"] = training_json(w, r);
    j["total_ps"] = r.makespan.ps();
    j["transfers"] = r.transfers;
    j["link_bytes"] = r.link_bytes;
    j["events"] = r.events;
    add_busiest_links(j, r);
    return j;
  }
  Json ops = Json::array();
  for (const OpResult& o : r.ops) {
    const OpRecord rec = op_record(o);
    Json op;
    op["name"] = rec.name;
    op["kind"] = std::string(kind_name(rec.kind));
    op["mesh_axes"] = rec.mesh_axes;
    op["hardware_axes"] = o.hw_axes;
    if (o.groups && o.mesh_axes.empty()) op["groups"] = *o.groups;  // imported replica groups
    op["bytes"] = rec.bytes;
    op["start_ps"] = rec.start_ps;
    op["first_start_ps"] = o.first_start.ps();
    op["end_ps"] = rec.end_ps;
    op["time_ps"] = rec.time_ps;
    op["closed_form_ps"] = rec.closed_form_ps;
    if (is_local(o.kind)) {
      op["compute_ps"] = seconds_to_ps(o.compute_s);
      op["memory_ps"] = seconds_to_ps(o.memory_s);
      op["flops_per_chip"] = o.flops;
    } else {
      op["latency_term_ps"] = rec.latency_term_ps;
      op["bandwidth_term_ps"] = rec.bandwidth_term_ps;
      op["lower_bound_ps"] = rec.lower_bound_ps;
      op["lower_bound_term"] = rec.lower_bound_term;
    }
    if (rec.ratio)
      op["ratio"] = *rec.ratio;
    else
      op["ratio"] = nullptr;
    op["bound"] = rec.bound;
    if (!rec.algorithm.empty()) op["algorithm"] = rec.algorithm;
    if (!rec.protocol.empty()) op["protocol"] = rec.protocol;
    if (!is_local(o.kind)) {
      op["algbw_bytes_per_s"] = rec.algbw_bytes_per_s;
      op["busbw_bytes_per_s"] = rec.busbw_bytes_per_s;
    }
    op["transfers"] = rec.transfers;
    op["link_bytes"] = rec.link_bytes;
    if (!o.sharding_before.empty()) {
      op["sharding_before"] = o.sharding_before;
      op["sharding_after"] = o.sharding_after;
    }
    ops.push_back(std::move(op));
  }
  j["ops"] = ops;
  j["total_ps"] = r.makespan.ps();
  j["transfers"] = r.transfers;
  j["link_bytes"] = r.link_bytes;
  j["events"] = r.events;
  if (r.engine == "simgrid") {
    j["simgrid_flows"] = r.flows;
    j["simgrid_hosts"] = r.hosts;
    j["simgrid_routes"] = r.routes;
  }
  add_busiest_links(j, r);
  return j;
}

// SimGrid over native, in percent; none when the native time is 0.
std::optional<double> difference_percent(Tick native, Tick simgrid) {
  if (native.ps() <= 0) return std::nullopt;
  return 100.0 * (static_cast<double>(simgrid.ps()) - static_cast<double>(native.ps())) / static_cast<double>(native.ps());
}

}  // namespace

std::string json_number(double v) { return Json(v).dump(); }

std::string format_json(const workloads::Workload& w, const driver::RunContext& run, const RunResult& r) {
  return run_json(w, run.system(), r).dump(2) + "\n";
}

std::string format_comparison(const workloads::Workload& w, const driver::RunContext& run, const RunResult& native,
                              const RunResult& simgrid) {
  std::string out = fmt::format("topology  {}\n", topology_line(w, run.system()));
  out += "engines   native: hop by hop, FIFO link directions, cut-through forwarding\n"
         "          simgrid: SimGrid 3.32 CM02, the same transfers as flows, max-min sharing (docs/CROSSCHECK.md)\n\n";
  std::size_t name_width = 20;
  for (const OpResult& o : native.ops) name_width = std::max(name_width, o.name.size());
  out += fmt::format("{:<{}} {:<14} {:<6} {:>15} {:>13} {:>13} {:>9} {:>13}\n", "op", name_width, "kind", "axes",
                     "V (bytes)", "native (us)", "simgrid (us)", "diff %", "closed (us)");
  for (std::size_t i = 0; i < native.ops.size(); ++i) {
    const OpResult& a = native.ops[i];
    const OpResult& b = simgrid.ops[i];
    const std::optional<double> d = difference_percent(a.time(), b.time());
    out += fmt::format("{:<{}} {:<14} {:<6} {:>15} {:>13} {:>13} {:>9} {:>13}\n", a.name, name_width,
                       kind_name(a.kind), axes_text(a),
                       is_local(a.kind) ? "-" : std::to_string(a.bytes), us(a.time()), us(b.time()),
                       d ? fmt::format("{:+.3f}", *d) : "-", us(a.closed_s));
  }
  const std::optional<double> d = difference_percent(native.makespan, simgrid.makespan);
  out += fmt::format("\ntotal     native {} us, simgrid {} us ({}%)\n", us(native.makespan), us(simgrid.makespan),
                     d ? fmt::format("{:+.3f}", *d) : "-");
  out += fmt::format("work      native {} hop transfers, {} engine events; simgrid {} flows, {} hosts, {} routes\n",
                     native.transfers, native.events, simgrid.flows, simgrid.hosts, simgrid.routes);
  return out;
}

std::string format_comparison_json(const workloads::Workload& w, const driver::RunContext& run, const RunResult& native,
                                   const RunResult& simgrid) {
  Json j;
  j["format"] = "meshsim-compare";
  j["format_version"] = 1;
  j["workload"] = w.file;
  Json ops = Json::array();
  for (std::size_t i = 0; i < native.ops.size(); ++i) {
    const OpResult& a = native.ops[i];
    const OpResult& b = simgrid.ops[i];
    Json op;
    op["name"] = a.name;
    op["kind"] = std::string(kind_name(a.kind));
    op["native_time_ps"] = a.time().ps();
    op["simgrid_time_ps"] = b.time().ps();
    if (const std::optional<double> d = difference_percent(a.time(), b.time()))
      op["difference_percent"] = *d;
    else
      op["difference_percent"] = nullptr;
    op["closed_form_ps"] = seconds_to_ps(a.closed_s);
    ops.push_back(std::move(op));
  }
  j["ops"] = ops;
  j["native_total_ps"] = native.makespan.ps();
  j["simgrid_total_ps"] = simgrid.makespan.ps();
  j["native"] = run_json(w, run.system(), native);
  j["simgrid"] = run_json(w, run.system(), simgrid);
  return j.dump(2) + "\n";
}

}  // namespace meshsim::reports
