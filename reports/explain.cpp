#include "reports/explain.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>

#include "driver/costs.hpp"
#include "driver/run_context.hpp"
#include "workloads/training_formulas.hpp"

namespace meshsim::reports {

using driver::communication_closed_form;
using driver::elementwise_cost;
using driver::GpuChoice;
using driver::GpuChoices;
using driver::matmul_cost;
using driver::matmul_flops;
using driver::op_fixed_cost;
using driver::RunContext;

namespace {

std::string us(double s) { return fmt::format("{:.3f} us", s * 1e6); }

std::string mesh_names(const workloads::Op& op, const workloads::Workload& w) {
  std::string s;
  if (!is_collective(op.kind)) return s;
  if (const auto& groups = op.collective().groups; groups && !groups->empty())
    return fmt::format("{} groups of {} chips", groups->size(), groups->front().size());
  for (int a : op.collective().mesh_axes) s += w.mesh[static_cast<std::size_t>(a)].name;
  return s;
}

// "fixed cost X + " when the op has one.
std::string fixed_term(double fixed_s) {
  return fixed_s > 0 ? fmt::format("fixed cost {} + ", us(fixed_s)) : std::string();
}

std::string step_line(const workloads::Op& op, const workloads::Workload& w, RunContext& run) {
  const topology::Torus& torus = run.torus();
  GpuChoices* gpu = run.gpu();
  if (op.kind == OpKind::Matmul) {
    const kernels::Roofline r = matmul_cost(op, w.hardware, w.file);
    const double flops = matmul_flops(op);
    return fmt::format(
        "{}: local matmul {} x {} x {} per chip = {:.4g} FLOP; roofline max(FLOPs / ({:.3g} FLOP/s x "
        "{:g}), HBM bytes / {:.3g} B/s) = max({}, {}) = {} ({}-bound)",
        op.name, op.matmul().m, op.matmul().k, op.matmul().n, flops,
        op.inputs[0].dtype == "int8" ? w.hardware.chip.int8_ops_per_s : w.hardware.chip.bf16_flops_per_s,
        w.hardware.matmul_efficiency, w.hardware.chip.hbm_bandwidth_bytes_per_s, us(r.compute_time.seconds()),
        us(r.memory_time.seconds()), us(r.time().seconds()), r.compute_bound() ? "compute" : "memory");
  }
  const double v = static_cast<double>(op.comm_bytes());
  if (gpu) {
    // The cheat sheet's torus terms do not apply: the closed form of the
    // algorithm the GPU fabric runs (docs/MODEL.md, "GPU fabrics"). A matmul's
    // steps are collectives, never sends.
    const GpuChoice& choice = (*gpu)(op);
    const collectives::ClosedForm& f = choice.closed;
    std::uint64_t gpus = 1;
    for (int a : op.comm_axes()) gpus *= static_cast<std::uint64_t>(torus.axis(a).size);
    // Additive terms: a pipeline (NCCL's tree) or phases one after the other.
    // By algorithm/protocol (NCCL's), as the report names them. The fixed cost
    // (NCCL's base latency and the hardware's own) comes first, as in the
    // report's closed form.
    const double fixed_s = op_fixed_cost(op, w, run.system(), choice).seconds();
    return fmt::format("{}: {} over {} ({} GPUs) by {}/{}: V = {:.0f} bytes; closed form {} ({}latency {}{} "
                       "bandwidth {}; {}-bound)",
                       op.name, kind_name(op.kind), mesh_names(op, w), gpus,
                       collectives::gpu::algorithm_name(choice.algorithm),
                       collectives::gpu::protocol_name(choice.protocol), v, us(fixed_s + f.time_s()),
                       fixed_term(fixed_s), us(f.latency_s),
                       f.additive ? " +" : ",", us(f.bandwidth_s),
                       fixed_s + f.latency_s > f.bandwidth_s ? "latency" : "bandwidth");
  }
  const collectives::ClosedForm f = driver::torus_closed_form(op, w, torus);
  const double wbi = 2.0 * static_cast<double>(w.hardware.ici.bandwidth_bytes_per_s);
  std::string sizes;
  int sum = 0;
  for (int a : op.comm_axes()) {
    if (!sizes.empty()) sizes += '+';
    sizes += std::to_string(torus.axis(a).size);
    sum += torus.axis(a).size;
  }
  const std::size_t n = op.comm_axes().size();
  std::string formula;
  switch (op.kind) {
    case OpKind::AllGather:
    case OpKind::ReduceScatter:
      formula = fmt::format("V/(W N_axes) = {:.0f} / ({:.3g} x {})", v, wbi, n);
      break;
    case OpKind::AllReduce:
      formula = fmt::format("2V/(W N_axes) = 2 x {:.0f} / ({:.3g} x {})", v, wbi, n);
      break;
    case OpKind::AllToAll:
      formula = fmt::format("V/(4W) on a ring = {:.0f} / (4 x {:.3g})", v, wbi);
      break;
    default:
      formula = "bytes / (routes x W/2)";
      break;
  }
  return fmt::format("{}: {} over {} ({} hardware axes of sizes {}): V = {:.0f} bytes, W = {:.3g} B/s, N_axes = {}; bandwidth "
                     "term {} = {}; latency floor T_min x sum(X)/2 = {:g} x {}/2 = {}; closed form {} ({}-bound)",
                     op.name, kind_name(op.kind), mesh_names(op, w), n, sizes.empty() ? "-" : sizes, v, wbi, n, formula, us(f.bandwidth_s),
                     w.hardware.ici.latency.seconds(), sum, us(f.latency_s), us(f.time_s()),
                     f.latency_bound() ? "latency" : "bandwidth");
}

}  // namespace

namespace {

std::string gigabytes(double b) { return fmt::format("{:.3f} GB", b / 1e9); }

// One lowered op of a training step, with its closed-form cost (what it pays
// before its first transfer as the report counts it, with the run's GPU choices).
std::string training_line(const workloads::Op& op, const workloads::Workload& w, RunContext& run) {
  GpuChoices* gpu = run.gpu();
  switch (op.kind) {
    case OpKind::Matmul: {
      const kernels::Roofline r = matmul_cost(op, w.hardware, w.file);
      return fmt::format(
          "{}: matmul {}{} x {} x {} = {:.4g} FLOP per chip; max(FLOPs / peak, HBM bytes / bandwidth) = "
          "max({}, {}) = {}",
          op.name, op.matmul().batch > 1 ? fmt::format("{} x ", op.matmul().batch) : "", op.matmul().m, op.matmul().k,
          op.matmul().n, matmul_flops(op), us(r.compute_time.seconds()), us(r.memory_time.seconds()),
          us(r.time().seconds()));
    }
    case OpKind::Elementwise:
      return fmt::format("{}: elementwise, {} HBM bytes / {:.3g} B/s = {}", op.name, op.elementwise().hbm_bytes,
                         w.hardware.chip.hbm_bandwidth_bytes_per_s,
                         us(elementwise_cost(op, w.hardware, w.file).time().seconds()));
    default: {
      const collectives::ClosedForm f = communication_closed_form(op, w, run.system());
      if (op.kind == OpKind::Send)
        return fmt::format(
            "{}: send of {} bytes from each of {} chips to its partner at once; closed form of one "
            "{} (latency {}, bandwidth {})",
            op.name, op.comm_bytes(), workloads::send_pairs(op).size(), us(f.time_s()), us(f.latency_s),
            us(f.bandwidth_s));
      const double fixed_s = op_fixed_cost(op, w, run.system(), gpu).seconds();
      return fmt::format("{}: {} over {}, V = {} bytes; closed form {} ({}latency {}, bandwidth {})", op.name,
                         kind_name(op.kind), mesh_names(op, w), op.comm_bytes(), us(fixed_s + f.time_s()),
                         fixed_term(fixed_s), us(f.latency_s), us(f.bandwidth_s));
    }
  }
}

std::string training_explain(const workloads::Workload& w) {
  const workloads::Training& t = *w.training;
  const workloads::ModelSpec& m = t.model;
  const workloads::StepFormulas& f = t.formulas;
  RunContext run(w);  // one system and one memo of GPU choices for every line
  const topology::Torus& torus = run.torus();
  std::string out = fmt::format(
      "training step: {} ({:.3f} B parameters) on {} chips: data {} x fsdp {} x tensor {}{} x pipeline {}{}{}; {} "
      "microbatches of {} x {} tokens per replica\n\n",
      m.name, static_cast<double>(f.parameters) / 1e9, torus.num_chips(), t.dp, t.fsdp, t.tp,
      t.plan.sequence_parallel ? " (sequence parallel)" : "", t.pp, t.ep > 1 ? fmt::format(" x expert {}", t.ep) : "",
      t.cp > 1 ? fmt::format(" x context {}", t.cp) : "", t.microbatches, t.microbatch, m.seq_len);
  // One layer of the first microbatch on the first stage, as lowered.
  using Part = workloads::StepSite::Part;
  using Pass = workloads::StepSite::Pass;
  const std::uint64_t first = 0;
  for (const Pass pass : {Pass::Forward, Pass::Backward}) {
    out += fmt::format("layer {} {} (microbatch 0), per chip:\n", first, pass == Pass::Forward ? "forward" : "backward");
    for (const workloads::Op& op : w.ops) {
      const workloads::StepSite& site = op.site;
      if (site.part == Part::Layer && site.pass == pass && site.microbatch == 0 && site.layer == first)
        out += fmt::format("  {}{}\n", training_line(op, w, run), site.recompute ? " [recomputed]" : "");
    }
  }
  // The gradient reductions, up to the first optimizer op.
  for (const workloads::Op& op : w.ops) {
    const Part part = op.site.part;
    if (part == Part::LayerGradients || part == Part::OutsideGradients || part == Part::Optimizer)
      out += fmt::format("  {}\n", training_line(op, w, run));
    if (part == Part::Optimizer) break;
  }
  // FLOPs.
  const double tokens = static_cast<double>(t.global_batch * m.seq_len);
  out += fmt::format("\nFLOPs per step: 6 x N_matmul x tokens + 12 x L x heads x head_dim x keys x tokens, keys = {} "
                     "({}): {:.6g} model FLOPs ({:.6g} per token); with recompute ({}) {:.6g} hardware FLOPs\n",
                     t.causal ? m.seq_len / 2 : m.seq_len, t.causal ? "causal: s/2" : "s", static_cast<double>(f.model_flops),
                     static_cast<double>(f.model_flops) / tokens, workloads::recompute_name(t.recompute),
                     static_cast<double>(f.hardware_flops));
  // The bubble.
  const std::uint64_t most_layers = workloads::most_stage_layers(t);
  if (t.pp > 1 && most_layers * t.pp != m.layers) {
    // Uneven stages: the slowest stage k sets the pace; the layers before it
    // fill and drain the pipeline, the ones after it may stall it too.
    std::vector<std::uint64_t> per_stage;
    std::uint64_t slowest = 0, before = 0;
    for (std::uint64_t s = 0; s < t.pp; ++s) {
      per_stage.push_back(workloads::stage_layers(t, s).size());
      if (per_stage[s] > per_stage[slowest]) slowest = s;
    }
    for (std::uint64_t s = 0; s < slowest; ++s) before += per_stage[s];
    const double mb = static_cast<double>(t.microbatches), most = static_cast<double>(most_layers);
    const double upper = (mb * most + static_cast<double>(m.layers - most_layers)) / (mb * most);
    out += fmt::format(
        "pipeline bubble ({}, uneven stages of {} layers): the slowest, stage {} of L_k = {} layers, sets "
        "the pace; the passes take ",
        workloads::schedule_name(t.plan.schedule), fmt::join(per_stage, ", "), slowest, most_layers);
    out += t.plan.virtual_stages == 1
               ? fmt::format(
                     "between (m L_k + L_<k) / (m L_k) = ({} x {} + {}) / ({} x {}) = {:.4f} and (m L_k + L - "
                     "L_k) / (m L_k) = {:.4f} x its compute time ((m + p - 1) / m with even stages)\n",
                     mb, most_layers, before, mb, most_layers, (mb * most + static_cast<double>(before)) / (mb * most),
                     upper)
               : fmt::format("at most (m L_k + L - L_k) / (m L_k) = {:.4f} x its compute time\n", upper);
  } else if (t.pp > 1) {
    const double p = static_cast<double>(t.pp), mb = static_cast<double>(t.microbatches);
    const double v = static_cast<double>(t.plan.virtual_stages);
    out += t.plan.schedule == workloads::Schedule::Interleaved
               ? fmt::format("pipeline bubble (interleaved 1F1B): (p - 1) / (v m) = ({} - 1) / ({} x {}) = {:.4f} of "
                             "the ideal compute time; step ~ (m + (p - 1)/v) / m = {:.4f} x ideal\n",
                             p, v, mb, (p - 1) / (v * mb), (mb + (p - 1) / v) / mb)
               : fmt::format("pipeline bubble ({}): (p - 1) / m = ({} - 1) / {} = {:.4f} of the ideal compute time; "
                             "step ~ (m + p - 1) / m = {:.4f} x ideal\n",
                             workloads::schedule_name(t.plan.schedule), p, mb, (p - 1) / mb, (mb + p - 1) / mb);
  }
  // Memory.
  const workloads::ActivationBytes a = workloads::activation_bytes(t, false);
  const std::uint64_t sbh = m.seq_len / t.cp * t.microbatch * m.d_model;  // a chip's part of each sequence
  out += fmt::format("\nmemory per chip (the most loaded stage; 1e9-byte GB):\n");
  const std::uint64_t opt_shards = t.fsdp * (t.plan.sharded_optimizer ? t.dp : 1);
  out += fmt::format("  weights 2 B x params / fsdp = {}; gradients {} B x params / fsdp = {}; optimizer (fp32 "
                     "master, momentum, variance) 12 B x params / {} = {}\n",
                     gigabytes(static_cast<double>(f.weight_bytes)), t.gradient_bytes,
                     gigabytes(static_cast<double>(f.gradient_bytes)),
                     opt_shards, gigabytes(static_cast<double>(f.optimizer_bytes)));
  out += fmt::format("  activations per {}layer and microbatch (s b h = {}): outside TP regions {} ({:.4g} s b h), inside "
                     "{} ({:.4g} s b h), attention core {}, layer input {}; kept under recompute {}: {}\n",
                     m.experts > 0 ? "dense " : "", sbh, a.outside, static_cast<double>(a.outside) / static_cast<double>(sbh), a.inside,
                     static_cast<double>(a.inside) / static_cast<double>(sbh), a.core, a.input,
                     workloads::recompute_name(t.recompute), a.kept);
  out += fmt::format(
      "  activations kept: {} bytes a layer{} x {} layers per stage x {:g} microbatches in flight = {}; "
      "working buffers {}; peak {} of {} HBM\n",
      f.activation_bytes_per_layer, m.experts > 0 ? " (the stage's average)" : "", f.peak_stage_layers,
      f.microbatches_in_flight, gigabytes(static_cast<double>(f.activation_bytes)),
      gigabytes(static_cast<double>(f.working_bytes)), gigabytes(static_cast<double>(f.peak_bytes)),
      gigabytes(static_cast<double>(f.hbm_bytes)));
  return out;
}

}  // namespace

std::string format_explain(const workloads::Workload& w) {
  if (w.training) return training_explain(w);
  RunContext run(w);  // one system and one memo of GPU choices for every line
  std::string out;
  if (w.explanations.empty()) return "no matmuls or layers to explain (collectives are explained by meshsim run)\n";
  for (const workloads::MatmulExplanation& e : w.explanations) {
    if (e.layer) {
      out += fmt::format("layer {}: {} with weights {} -> {}\n", e.name, e.a_before, e.b_before, e.c_after);
    } else {
      out += fmt::format("matmul {}: {} . {} -> {}", e.name, e.a_before, e.b_before, e.c_after);
      out += e.seed_case > 0 ? fmt::format("  [case {}]\n", e.seed_case) : "  [contracting dim resharded]\n";
    }
    for (const std::string& line : e.lines) out += fmt::format("  {}\n", line);
    for (std::uint32_t id : e.ops) out += fmt::format("  step {}\n", step_line(w.ops[id], w, run));
    out += "\n";
  }
  return out;
}

}  // namespace meshsim::reports
