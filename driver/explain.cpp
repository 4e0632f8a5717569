#include "driver/explain.hpp"

#include <fmt/format.h>

#include "driver/costs.hpp"

namespace meshsim::driver {

namespace {

std::string us(double s) { return fmt::format("{:.3f} us", s * 1e6); }

std::string mesh_names(const workloads::Op& op, const workloads::Workload& w) {
  std::string s;
  for (int a : op.mesh_axes) s += w.mesh[static_cast<std::size_t>(a)].name;
  return s;
}

std::string step_line(const workloads::Op& op, const workloads::Workload& w, const topology::Torus& torus) {
  if (op.kind == OpKind::Matmul) {
    const kernels::Roofline r = matmul_cost(op, w.hardware, w.file);
    const double flops = matmul_flops(op);
    return fmt::format("{}: local matmul {} x {} x {} per chip = {:.4g} FLOP; roofline max(FLOPs / ({:.3g} FLOP/s x "
                       "{:g}), HBM bytes / {:.3g} B/s) = max({}, {}) = {} ({}-bound)",
                       op.name, op.m, op.k, op.n, flops,
                       op.inputs[0].dtype == "int8" ? w.hardware.chip.int8_ops_per_s : w.hardware.chip.bf16_flops_per_s,
                       w.hardware.matmul_efficiency, w.hardware.chip.hbm_bandwidth_bytes_per_s,
                       us(r.compute_time.seconds()), us(r.memory_time.seconds()), us(r.time().seconds()),
                       r.compute_bound() ? "compute" : "memory");
  }
  const collectives::ClosedForm f = communication_closed_form(op, w, torus);
  const double v = static_cast<double>(op.bytes);
  const double wbi = 2.0 * static_cast<double>(w.hardware.ici.bandwidth_bytes_per_s);
  std::string sizes;
  int sum = 0;
  for (int a : op.hw_axes) {
    if (!sizes.empty()) sizes += '+';
    sizes += std::to_string(torus.axis(a).size);
    sum += torus.axis(a).size;
  }
  const std::size_t n = op.hw_axes.size();
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

std::string format_explain(const workloads::Workload& w) {
  const topology::Torus torus = w.make_torus();
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
    for (std::uint32_t id : e.ops) out += fmt::format("  step {}\n", step_line(w.ops[id], w, torus));
    out += "\n";
  }
  return out;
}

}  // namespace meshsim::driver
