#pragma once
// A workload as text, field by field: two workloads with the same digest are
// the same system, the same lowered ops and the same training step. The tests
// hold a workload built in memory to the one its JSON form parses to.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>

#include "workloads/workload.hpp"

namespace meshsim::test {

inline std::string array_digest(const workloads::Array& a) {
  return fmt::format("{}[{}|{}|{}|{}|{}|{}]", a.name, fmt::join(a.dims, ","), fmt::join(a.sizes, ","), a.dtype,
                     a.element_bytes, fmt::join(a.shard_axes, ";"), fmt::join(a.partial_axes, ","));
}

inline std::string body_digest(const workloads::Op& op) {
  if (op.kind == OpKind::Send) {
    const workloads::SendOp& s = op.send();
    std::string out = fmt::format(" send {} {}->{}", s.bytes, s.src, s.dst);
    for (const auto& [a, b] : s.pairs) out += fmt::format(" pair {}>{}", a, b);
    return out;
  }
  if (op.kind == OpKind::Matmul) {
    const workloads::MatmulOp& m = op.matmul();
    return fmt::format(" mkn {}x{}x{} batch {} {}", m.m, m.k, m.n, m.batch, m.dtype);
  }
  if (op.kind == OpKind::Elementwise) {
    const workloads::ElementwiseOp& e = op.elementwise();
    return fmt::format(" hbm {} flops {} dur {} {}", e.hbm_bytes, e.flops, e.duration.ps(), e.dtype);
  }
  const workloads::CollectiveOp& c = op.collective();
  std::string out = fmt::format(" axes {}/{} bytes {} alg {} proto {}", fmt::join(c.mesh_axes, ","),
                                fmt::join(c.hw_axes, ","), c.bytes, c.algorithm, c.protocol);
  if (c.groups) out += fmt::format(" groups {}", fmt::join(*c.groups, ";"));
  return out;
}

inline std::string workload_digest(const workloads::Workload& w) {
  const workloads::Hardware& h = w.hardware;
  std::string out = fmt::format("file {}\nhardware {} gpu {} chip {} {} {} {} {} {} links {} {} {} {} {} {} {}\n",
                                w.file, h.preset, h.gpu, h.chip.bf16_flops_per_s, h.chip.fp8_flops_per_s,
                                h.chip.fp32_flops_per_s, h.chip.int8_ops_per_s, h.chip.hbm_bytes,
                                h.chip.hbm_bandwidth_bytes_per_s, h.ici.bandwidth_bytes_per_s, h.ici.latency.ps(),
                                h.dcn.bandwidth_bytes_per_s, h.nvlink.bandwidth_bytes_per_s,
                                h.nic.bandwidth_bytes_per_s, h.spine.bandwidth_bytes_per_s, h.forward_chunk_bytes);
  for (const topology::AxisSpec& a : w.topology)
    out += fmt::format("axis {} wrap {} switched {}\n", a.size, a.wraparound, a.switched);
  out += fmt::format("twisted {} node_grid {}\n", w.twisted, w.node_grid);
  for (const workloads::MeshAxis& m : w.mesh) out += fmt::format("mesh {}={} over {}\n", m.name, m.size, fmt::join(m.hw_axes, ","));
  for (const workloads::Array& a : w.arrays) out += "array " + array_digest(a) + "\n";
  for (const workloads::Op& op : w.ops) {
    out += fmt::format("op {} @{} {} deps {} {}->{} group {}", op.name, op.pointer, kind_name(op.kind),
                       fmt::join(op.deps, ","), op.sharding_before, op.sharding_after, op.group);
    out += body_digest(op);
    if (op.chips) out += fmt::format(" chips {}", fmt::join(*op.chips, ","));
    out += fmt::format(" site {} {} {} mb {} L{} {} {} stage {}", static_cast<int>(op.site.part),
                       static_cast<int>(op.site.pass), op.site.recompute, op.site.microbatch, op.site.layer,
                       w.training ? w.training->kernel_name(op.site) : "", workloads::role_name(op.site.role),
                       op.site.stage);
    for (const workloads::Array& a : op.inputs) out += " in " + array_digest(a);
    for (const workloads::Array& a : op.outputs) out += " out " + array_digest(a);
    out += "\n";
  }
  if (const workloads::Training* t = w.training.get()) {
    const workloads::StepFormulas& f = t->formulas;
    out += fmt::format("training {} L{} h{} a{} kv{} d{} ffn{} V{} s{} dp {} fsdp {} tp {} pp {} ep {} cp {} m {} mb {} "
                       "batch {} recompute {} overlap {}{}{} sp {} v {} zero {} dtype {} grad {}\n",
                       t->model.name, t->model.layers, t->model.d_model, t->model.heads, t->model.kv_heads,
                       t->model.head_dim, t->model.ffn, t->model.vocab, t->model.seq_len, t->dp, t->fsdp, t->tp, t->pp,
                       t->ep, t->cp, t->microbatches, t->microbatch, t->global_batch,
                       workloads::recompute_name(t->recompute), t->overlap.gradient_reduction,
                       t->overlap.fsdp_prefetch, t->overlap.tensor, t->plan.sequence_parallel,
                       t->plan.virtual_stages, t->plan.sharded_optimizer, t->dtype, t->gradient_bytes);
    out += fmt::format("formulas {} {} {} {} {} {} {} {} {} {} {}\n", f.parameters, static_cast<double>(f.model_flops),
                       static_cast<double>(f.hardware_flops), f.weight_bytes, f.gradient_bytes, f.optimizer_bytes,
                       f.activation_bytes, f.working_bytes, f.peak_bytes, f.hbm_bytes, f.microbatches_in_flight);
    out += fmt::format("chip stages {}\n", fmt::join(t->chip_stage, ","));
  }
  return out;
}

}  // namespace meshsim::test
