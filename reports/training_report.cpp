#include "reports/training_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <functional>

#include "base/error.hpp"
#include "reports/report.hpp"

namespace meshsim::reports {

using driver::OpResult;
using driver::RunResult;

namespace {

using workloads::Role;
using Interval = std::pair<Tick, Tick>;

// Sorted, disjoint.
std::vector<Interval> merged(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const Interval& i : v) {
    if (i.second <= i.first) continue;
    if (!out.empty() && i.first <= out.back().second)
      out.back().second = max(out.back().second, i.second);
    else
      out.push_back(i);
  }
  return out;
}

Tick length(const std::vector<Interval>& v) {
  Tick t;
  for (const Interval& i : v) t = t + (i.second - i.first);
  return t;
}

// Both sorted and disjoint.
std::vector<Interval> united(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::vector<Interval> all(a);
  all.insert(all.end(), b.begin(), b.end());
  return merged(std::move(all));
}

std::string ms(Tick t) { return fmt::format("{:.3f}", static_cast<double>(t.ps()) * 1e-9); }
std::string gb(std::uint64_t b) { return fmt::format("{:.2f}", static_cast<double>(b) / 1e9); }

}  // namespace

TrainingResult training_result(const workloads::Workload& w, const RunResult& r) {
  MESHSIM_ASSERT(w.training && r.ops.size() == w.ops.size(), "not a training run");
  const workloads::Training& t = *w.training;
  TrainingResult out;
  out.step = r.makespan;
  out.chips = w.make_torus().num_chips();
  // Per stage and role, the ops' intervals (a send belongs to both its stages).
  constexpr std::size_t kRoles = static_cast<std::size_t>(Role::Context) + 1;
  static_assert(kRoles == std::tuple_size_v<decltype(StageBreakdown::in_flight)>);
  std::vector<std::array<std::vector<Interval>, kRoles>> spans(t.pp);
  for (std::size_t i = 0; i < w.ops.size(); ++i) {
    // From when all its chips could start it (a send's receivers enter it at once) to its last byte.
    const Interval span{r.ops[i].begin, r.ops[i].end};
    const workloads::StepSite& site = w.ops[i].site;
    const auto role = static_cast<std::size_t>(site.role);
    if (site.stage >= 0) {
      spans[static_cast<std::size_t>(site.stage)][role].push_back(span);
      continue;
    }
    // A send: both stages it joins (every pair joins the same two).
    const auto [src, dst] = workloads::send_pairs(w.ops[i]).front();
    for (const topology::ChipId c : {src, dst}) spans[static_cast<std::size_t>(t.chip_stage[c])][role].push_back(span);
  }
  for (std::uint64_t s = 0; s < t.pp; ++s) {
    auto& by = spans[s];
    StageBreakdown b;
    b.stage = static_cast<int>(s);
    std::vector<Interval> covered = merged(by[static_cast<std::size_t>(Role::Compute)]);
    b.compute = length(covered);
    for (std::size_t role = 0; role < kRoles; ++role)
      b.in_flight[role] = length(merged(by[role]));
    const auto take = [&](Role role) {
      const std::vector<Interval> with = united(covered, merged(by[static_cast<std::size_t>(role)]));
      const Tick added = length(with) - length(covered);
      covered = with;
      return added;
    };
    b.optimizer = take(Role::Optimizer);
    b.tensor = take(Role::Tensor);
    b.expert = take(Role::Expert);
    b.context = take(Role::Context);
    b.fsdp = take(Role::Fsdp);
    b.data = take(Role::Data);
    b.pipeline = take(Role::Pipeline);
    b.idle = out.step - length(covered);
    out.stages.push_back(b);
  }
  out.model_flops = static_cast<double>(t.lowered_model_flops);
  out.hardware_flops = static_cast<double>(t.lowered_hardware_flops);
  const double seconds = out.step.seconds();
  const double peak = t.formulas.peak_flops_per_s * out.chips;
  if (seconds > 0 && peak > 0) {
    out.mfu = out.model_flops / (seconds * peak);
    out.hfu = out.hardware_flops / (seconds * peak);
  }
  if (seconds > 0)
    out.tokens_per_s_per_chip =
        static_cast<double>(t.global_batch * t.model.seq_len) / seconds / static_cast<double>(out.chips);
  return out;
}

std::string format_training_table(const workloads::Workload& w, const RunResult& r) {
  const workloads::Training& t = *w.training;
  const workloads::ModelSpec& m = t.model;
  const workloads::StepFormulas& f = t.formulas;
  const TrainingResult tr = training_result(w, r);
  std::string out;
  out += fmt::format("model     {}: {} layers, d_model {}, {} heads ({} KV) x {}, FFN {}{}{}{}, vocab {}, seq {}; {:.3f} B "
                     "parameters\n",
                     m.name, m.layers, m.d_model, m.heads, m.kv_heads, m.head_dim, m.ffn, m.gated ? " (gated)" : "",
                     m.experts > 0 ? fmt::format("; {} experts of {}, top {}", m.experts, m.expert_ffn, m.top_k) : "",
                     m.parallel_block ? "; parallel attention+MLP blocks" : "", m.vocab, m.seq_len,
                     static_cast<double>(f.parameters) / 1e9);
  std::string tensor_notes;
  if (t.plan.sequence_parallel) tensor_notes = "sequence parallel";
  if (t.kv_replicas > 1)
    tensor_notes += fmt::format("{}each KV head on {} chips", tensor_notes.empty() ? "" : "; ", t.kv_replicas);
  out += fmt::format("plan      data {} x fsdp {} x tensor {}{} x pipeline {}{}{}", t.dp, t.fsdp, t.tp,
                     tensor_notes.empty() ? "" : " (" + tensor_notes + ")", t.pp,
                     t.ep > 1 ? fmt::format(" x expert {}", t.ep) : "",
                     t.cp > 1 ? fmt::format(" x context {}", t.cp) : "");
  if (t.pp > 1) {
    // Uneven chunks: their layer counts in layer order.
    const std::vector<std::uint64_t>& chunks = t.plan.chunk_layers;
    const bool uneven = std::adjacent_find(chunks.begin(), chunks.end(), std::not_equal_to<>()) != chunks.end();
    out += fmt::format(" ({}{}{})", workloads::schedule_name(t.plan.schedule),
                       t.plan.virtual_stages > 1 ? fmt::format(", {} virtual stages", t.plan.virtual_stages) : "",
                       uneven ? fmt::format(", layers per {} {}", t.plan.virtual_stages > 1 ? "chunk" : "stage",
                                            fmt::join(chunks, "/"))
                              : "");
  }
  out += fmt::format("; {} microbatches of {} per replica, global batch {} sequences ({} tokens); recompute {}; {} "
                     "attention{}\n",
                     t.microbatches, t.microbatch, t.global_batch, t.global_batch * m.seq_len,
                     workloads::recompute_name(t.recompute), t.causal ? "causal" : "full",
                     std::string(t.plan.sharded_optimizer ? "; sharded optimizer" : "") +
                         (t.gradient_bytes == 4 ? "; fp32 gradients" : ""));
  out += fmt::format("step      {} ms; {:.1f} tokens/s per chip ({} chips)\n", ms(tr.step), tr.tokens_per_s_per_chip,
                     tr.chips);
  out += fmt::format("flops     model {:.4g} per step = 6 x N_matmul x tokens + attention 12 x {} x heads x head_dim "
                     "per token and layer ({}); MFU {:.1f} % = model FLOPs / (step x {} chips x {:.4g} FLOP/s {} "
                     "peak)\n",
                     tr.model_flops, t.causal ? "s/2" : "s", t.causal ? "causal: half the keys" : "no causal halving",
                     100 * tr.mfu, tr.chips, f.peak_flops_per_s, t.dtype);
  out += fmt::format("          hardware {:.4g} per step (with the recomputed {}{}); HFU {:.1f} %\n", tr.hardware_flops,
                     t.recompute == workloads::Recompute::Full        ? "forward passes"
                     : t.recompute == workloads::Recompute::Selective ? "attention cores"
                                                                      : "nothing",
                     t.kv_replicas > 1 ? " and the KV heads' replicas' projections" : "", 100 * tr.hfu);
  out += fmt::format("memory    {} GB per chip at peak of {} GB HBM{}: weights {}, gradients {}, optimizer {}, "
                     "activations {} ({:g} microbatches in flight x {} GB per layer), working {}\n",
                     gb(f.peak_bytes), gb(f.hbm_bytes), f.peak_bytes > f.hbm_bytes ? " (DOES NOT FIT)" : "",
                     gb(f.weight_bytes), gb(f.gradient_bytes), gb(f.optimizer_bytes), gb(f.activation_bytes),
                     f.microbatches_in_flight, gb(f.activation_bytes_per_layer), gb(f.working_bytes));
  out += "\nwhere the step's time goes, per pipeline stage (ms; exposed communication is what no computation hides)\n";
  // Only the strategies the plan uses get a column.
  const bool expert = t.ep > 1, context = t.cp > 1;
  out += fmt::format("{:<6} {:>11} {:>11}{}{} {:>11} {:>11} {:>11} {:>11} {:>11}\n", "stage", "compute", "tensor",
                     expert ? fmt::format(" {:>11}", "expert") : "", context ? fmt::format(" {:>11}", "context") : "",
                     "fsdp", "data", "pipeline", "optimizer", "idle");
  for (const StageBreakdown& b : tr.stages)
    out += fmt::format("{:<6} {:>11} {:>11}{}{} {:>11} {:>11} {:>11} {:>11} {:>11}\n", b.stage, ms(b.compute),
                       ms(b.tensor), expert ? fmt::format(" {:>11}", ms(b.expert)) : "",
                       context ? fmt::format(" {:>11}", ms(b.context)) : "", ms(b.fsdp), ms(b.data), ms(b.pipeline),
                       ms(b.optimizer), ms(b.idle));
  out += fmt::format("\n{} ops; {} transfers, {} bytes over links, {} engine events\n", w.ops.size(), r.transfers,
                     r.link_bytes, r.events);
  out += reduction_note(r);
  return out;
}

}  // namespace meshsim::reports
