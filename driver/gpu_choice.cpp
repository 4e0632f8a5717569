#include "driver/gpu_choice.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/error.hpp"
#include "driver/costs.hpp"
#include "driver/nccl_model.hpp"
#include "driver/run_context.hpp"

namespace meshsim::driver {

namespace {

GpuChoiceKey choice_key(const workloads::Op& op) {
  if (op.kind == OpKind::Send)
    return {static_cast<int>(op.kind), {}, op.send().bytes, "", "", op.send().src, op.send().dst};
  const workloads::CollectiveOp& c = op.collective();
  return {static_cast<int>(op.kind), c.hw_axes, c.bytes, c.algorithm, c.protocol, 0, 0};
}

}  // namespace

GpuChoice gpu_algorithm(const workloads::Op& op, const workloads::Workload& w, const topology::Torus& torus,
                        const topology::Fabric& fabric) {
  using collectives::gpu::Algorithm;
  using collectives::gpu::Protocol;
  const std::vector<Algorithm> options = collectives::gpu::candidates(op.kind, torus, op.comm_axes(), fabric);
  std::optional<Protocol> asked;
  if (!op.collective().protocol.empty()) {
    asked = collectives::gpu::parse_protocol(op.collective().protocol);
    if (!asked)
      throw InputError(w.file, op.pointer + "/protocol",
                       fmt::format("unknown protocol '{}' (known: simple, ll, ll128)", op.collective().protocol));
  }
  const auto rings = collectives::gpu::rings(torus, op.comm_axes());
  const bool grouped = !rings.empty() && rings.front().size() > 1;
  // NCCL's model of algorithm a with protocol p, given the ring's bus bandwidth
  // on this fabric (meshsim's closed form; NCCL's is its channels times their
  // speed): for all-reduces, all-gathers and reduce-scatters.
  const bool modelled = grouped && (op.kind == OpKind::AllReduce || op.kind == OpKind::AllGather ||
                                    op.kind == OpKind::ReduceScatter);
  NcclModelInput in;
  if (modelled) {
    const double n = static_cast<double>(rings.front().size());
    in.ranks = static_cast<int>(rings.front().size());
    in.nodes = static_cast<int>(collectives::gpu::node_count(fabric, rings.front()));
    in.all_reduce = op.kind == OpKind::AllReduce;
    const double bus_share = (in.all_reduce ? 2 : 1) * (n - 1) / n;
    in.bus_bytes_per_s = bus_share * static_cast<double>(op.comm_bytes()) /
                         gpu_closed_form(op, w, torus, fabric, Algorithm::Ring).bandwidth_s;
    in.ll_max_bytes_per_s = workloads::nccl_ll_max_bytes_per_s(w.hardware, in.nodes);
    if (std::find(options.begin(), options.end(), Algorithm::NvlsTree) != options.end())
      in.nvls_tree_bus_bytes_per_s =
          nccl_nvls_tree_bus_bytes_per_s(w.hardware, in.ranks / std::max(in.nodes, 1), in.nodes);
  }
  const std::vector<Protocol> protocols =
      asked ? std::vector<Protocol>{*asked} : std::vector<Protocol>{Protocol::Simple, Protocol::LL, Protocol::LL128};
  // The protocol for algorithm a: the one asked for, else the fastest by NCCL's
  // model where a runs more than Simple.
  const auto choose = [&](Algorithm a) -> GpuChoice {
    Protocol p = asked.value_or(Protocol::Simple);
    if (!collectives::gpu::supports(a, p))
      throw InputError(w.file, op.pointer + "/protocol",
                       fmt::format("protocol '{}' does not apply to the {} algorithm (NCCL runs the ring and the "
                                   "tree with simple, ll and ll128, the others with simple)",
                                   op.collective().protocol, collectives::gpu::algorithm_name(a)));
    if (!asked && modelled && (a == Algorithm::Ring || a == Algorithm::Tree))
      for (Protocol q : protocols)
        if (nccl_model_s(a, q, in, op.comm_bytes()) < nccl_model_s(a, p, in, op.comm_bytes())) p = q;
    return {a, gpu_closed_form(op, w, torus, fabric, a, p), p};
  };
  if (!op.collective().algorithm.empty()) {
    for (Algorithm a : options)
      if (op.collective().algorithm == collectives::gpu::algorithm_name(a)) return choose(a);
    std::string known;
    for (Algorithm a : options) known += fmt::format("{}{}", known.empty() ? "" : ", ", collectives::gpu::algorithm_name(a));
    throw InputError(w.file, op.pointer + "/algorithm",
                     fmt::format("algorithm '{}' does not apply to this {} (here: {})", op.collective().algorithm,
                                 kind_name(op.kind), known));
  }
  // An all-reduce runs as NCCL would run it: the ring, the tree (inside one
  // node a chain) or, where the switches have NVLink SHARP, NVLS in one NVLink
  // domain and the NVLS tree across nodes, each with the
  // protocols it runs, whichever NCCL's own cost model says is fastest for this
  // size (in that order on a tie: the ring with Simple first). meshsim's own
  // direct and hierarchical algorithms run only when named.
  if (op.kind == OpKind::AllReduce && grouped) {
    std::vector<Algorithm> nccl{Algorithm::Ring, Algorithm::Tree};
    if (std::find(options.begin(), options.end(), Algorithm::Nvls) != options.end())
      nccl.push_back(Algorithm::Nvls);
    if (in.nvls_tree_bus_bytes_per_s > 0) nccl.push_back(Algorithm::NvlsTree);
    std::optional<std::pair<Algorithm, Protocol>> best;
    double best_s = 0;
    for (Algorithm a : nccl)
      for (Protocol p : protocols) {
        if (!collectives::gpu::supports(a, p)) continue;
        if (const double t = nccl_model_s(a, p, in, op.comm_bytes()); !best || t < best_s) best = {a, p}, best_s = t;
      }
    MESHSIM_ASSERT(best.has_value(), "the ring runs every protocol");
    return {best->first, gpu_closed_form(op, w, torus, fabric, best->first, best->second), best->second};
  }
  // Otherwise (an all-gather or reduce-scatter: the ring; an all-to-all: direct;
  // an all-reduce of single GPUs, which moves nothing) the algorithm whose closed
  // form is fastest for this size, among those that run the protocol asked for,
  // the tree left out (inside one node a chain, never faster than the ring: no
  // rounding may choose it over an equal ring); then its protocol.
  const Protocol base = asked.value_or(Protocol::Simple);
  std::optional<GpuChoice> best;
  for (Algorithm a : options) {
    if (a == Algorithm::Tree || !collectives::gpu::supports(a, base)) continue;
    const collectives::ClosedForm f = gpu_closed_form(op, w, torus, fabric, a, base);
    if (!best || f.time_s() < best->closed.time_s()) best = GpuChoice{a, f, base};
  }
  if (!best) return choose(options.front());  // the protocol asked for runs on none: say so
  return asked ? *best : choose(best->algorithm);
}

std::vector<std::uint8_t> op_classes(const workloads::Workload& w, RunContext& run) {
  if (!run.gpu()) return {};
  GpuChoices& choices = *run.gpu();
  std::vector<std::uint8_t> out(w.ops.size(), 0);
  bool any = false;
  for (std::size_t i = 0; i < w.ops.size(); ++i) {
    const workloads::Op& op = w.ops[i];
    if (!is_collective(op.kind) || op.kind == OpKind::Send) continue;
    out[i] = static_cast<std::uint8_t>(choices(op).protocol);
    any = any || out[i] != 0;
  }
  if (!any) out.clear();
  return out;
}

GpuChoices::GpuChoices(const workloads::Workload& w, const topology::Torus& torus, const topology::Fabric& fabric)
    : w_(w), torus_(torus), fabric_(fabric) {}

const GpuChoice& GpuChoices::operator()(const workloads::Op& op) {
  Key key = choice_key(op);
  const auto it = memo_.find(key);
  if (it != memo_.end()) return it->second;
  GpuChoice c = op.kind == OpKind::Send ? GpuChoice{collectives::gpu::Algorithm::Direct,
                                                    communication_closed_form(op, w_, torus_, fabric_)}
                                        : gpu_algorithm(op, w_, torus_, fabric_);
  return memo_.emplace(std::move(key), c).first->second;
}

RunContext::RunContext(const workloads::Workload& w) : system_(w.make_system()) {
  if (const topology::Fabric* f = system_.fabric()) gpu_.emplace(w, system_.grid(), *f);
}

}  // namespace meshsim::driver
