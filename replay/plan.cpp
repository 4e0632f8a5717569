#include "replay/plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <map>

#include "base/error.hpp"

namespace meshsim::replay {

std::string_view call_kind_name(CallKind k) {
  switch (k) {
    case CallKind::Gemm:
      return "gemm";
    case CallKind::AllGather:
      return "all_gather";
    case CallKind::ReduceScatter:
      return "reduce_scatter";
    case CallKind::AllReduce:
      return "all_reduce";
    case CallKind::SendRecv:
      return "send_recv";
    case CallKind::Send:
      return "send";
    case CallKind::Recv:
      return "recv";
  }
  return "?";
}

namespace {

class Planner {
 public:
  explicit Planner(const workloads::Workload& w) : w_(w), torus_(w.make_torus()) {
    coords_ = workloads::mesh_coordinates(w, torus_);
    plan_.ranks = torus_.num_chips();
    plan_.calls.resize(plan_.ranks);
  }

  Plan run() {
    for (std::uint32_t i = 0; i < w_.ops.size(); ++i) add(i, w_.ops[i]);
    return std::move(plan_);
  }

 private:
  // The group of `rank` over `axes`: every chip that agrees with it on the other
  // mesh axes, ordered by the coordinates on `axes`, major first.
  std::vector<std::uint32_t> group(std::uint32_t rank, const std::vector<int>& axes) const {
    std::vector<std::pair<std::uint64_t, std::uint32_t>> members;
    for (std::uint32_t c = 0; c < plan_.ranks; ++c) {
      bool same = true;
      for (std::size_t m = 0; m < w_.mesh.size() && same; ++m) {
        bool in_axes = false;
        for (int a : axes) in_axes = in_axes || a == static_cast<int>(m);
        same = in_axes || coords_[c][m] == coords_[rank][m];
      }
      if (!same) continue;
      std::uint64_t key = 0;
      for (int a : axes)
        key = key * static_cast<std::uint64_t>(w_.mesh[static_cast<std::size_t>(a)].size) +
              static_cast<std::uint64_t>(coords_[c][static_cast<std::size_t>(a)]);
      members.emplace_back(key, c);
    }
    std::sort(members.begin(), members.end());
    std::vector<std::uint32_t> out;
    for (const auto& [key, c] : members) out.push_back(c);
    return out;
  }

  std::uint32_t communicator(const std::vector<std::uint32_t>& ranks, const std::vector<std::string>& axes) {
    const auto [it, inserted] = index_.emplace(ranks, static_cast<std::uint32_t>(plan_.communicators.size()));
    if (inserted) plan_.communicators.push_back({ranks, axes});
    return it->second;
  }

  void add(std::uint32_t index, const workloads::Op& op) {
    // What training steps lower to has no cuBLAS or NCCL call here yet.
    if (op.kind == OpKind::Elementwise || (op.kind == OpKind::Matmul && op.matmul().batch != 1) ||
        (op.kind == OpKind::Send && !op.send().pairs.empty()) || op.chips)
      throw InputError(w_.file, op.pointer,
                       fmt::format("op '{}' cannot be replayed: replay runs matmuls and collectives on every rank "
                                   "(elementwise kernels, batched matmuls, multi-pair sends and ops on a subset of "
                                   "the chips are simulated only)",
                                   op.name));
    Call base;
    base.op = index;
    if (!op.inputs.empty()) {
      base.dtype = op.inputs[0].dtype;
      base.element_bytes = op.inputs[0].element_bytes;
    } else {
      base.dtype = "bytes";
      base.element_bytes = 1;
    }
    if (op.kind == OpKind::Matmul) {
      for (std::uint32_t r = 0; r < plan_.ranks; ++r) {
        Call c = base;
        c.kind = CallKind::Gemm;
        c.m = op.matmul().m;
        c.n = op.matmul().n;
        c.k = op.matmul().k;
        plan_.calls[r].push_back(c);
      }
      return;
    }
    if (op.kind == OpKind::Send) {
      const workloads::SendOp& send = op.send();
      const std::uint32_t comm = communicator({send.src, send.dst}, {});
      Call s = base;
      s.kind = CallKind::Send;
      s.communicator = comm;
      s.comm_rank = 0;
      s.send_bytes = send.bytes;
      s.peer = send.dst;
      plan_.calls[send.src].push_back(s);
      Call r = base;
      r.kind = CallKind::Recv;
      r.communicator = comm;
      r.comm_rank = 1;
      r.recv_bytes = send.bytes;
      r.peer = send.src;
      plan_.calls[send.dst].push_back(r);
      return;
    }
    std::vector<std::string> axis_names;
    for (int a : op.collective().mesh_axes) axis_names.push_back(w_.mesh[static_cast<std::size_t>(a)].name);
    // Each group once: the communicator of every rank of it.
    std::vector<std::vector<std::uint32_t>> group_of(plan_.ranks);
    for (std::uint32_t r = 0; r < plan_.ranks; ++r) {
      if (!group_of[r].empty()) continue;
      std::vector<std::uint32_t> members = group(r, op.collective().mesh_axes);
      for (std::uint32_t m : members) group_of[m] = members;
    }
    for (std::uint32_t r = 0; r < plan_.ranks; ++r) {
      const std::vector<std::uint32_t>& members = group_of[r];
      const std::uint64_t p = members.size();
      if (p < 2) continue;  // a collective over axes of size 1 moves nothing
      Call c = base;
      c.communicator = communicator(members, axis_names);
      c.comm_rank = static_cast<std::uint32_t>(std::find(members.begin(), members.end(), r) - members.begin());
      const std::uint64_t v = op.comm_bytes();
      switch (op.kind) {
        case OpKind::AllGather:
          c.kind = CallKind::AllGather;
          c.send_bytes = v / p;
          c.recv_bytes = v;
          break;
        case OpKind::ReduceScatter:
          c.kind = CallKind::ReduceScatter;
          c.send_bytes = v;
          c.recv_bytes = v / p;
          break;
        case OpKind::AllReduce:
          c.kind = CallKind::AllReduce;
          c.send_bytes = c.recv_bytes = v;
          break;
        case OpKind::AllToAll:
          c.kind = CallKind::SendRecv;
          c.send_bytes = c.recv_bytes = v / p;
          c.peer_bytes = v / (p * p);
          break;
        default:
          MESHSIM_ASSERT(false, "not a collective");
      }
      plan_.calls[r].push_back(c);
    }
  }

  const workloads::Workload& w_;
  topology::Torus torus_;
  std::vector<std::vector<int>> coords_;
  Plan plan_;
  std::map<std::vector<std::uint32_t>, std::uint32_t> index_;
};

std::string rank_list(const std::vector<std::uint32_t>& ranks) {
  std::string s;
  for (std::uint32_t r : ranks) s += fmt::format("{}{}", s.empty() ? "" : ",", r);
  return s;
}

}  // namespace

Plan make_plan(const workloads::Workload& w) { return Planner(w).run(); }

std::string format_plan(const workloads::Workload& w, const Plan& plan) {
  std::string out = fmt::format("replay plan of {}: {} ranks (one per chip), {} ops, {} communicators\n", w.file,
                                plan.ranks, w.ops.size(), plan.communicators.size());
  for (std::size_t i = 0; i < plan.communicators.size(); ++i) {
    const Communicator& c = plan.communicators[i];
    std::string axes;
    for (const std::string& a : c.mesh_axes) axes += fmt::format("{}{}", axes.empty() ? "" : ",", a);
    out += fmt::format("comm {}: {} ranks [{}] ({})\n", i, c.ranks.size(), rank_list(c.ranks),
                       axes.empty() ? "point to point" : "mesh axes " + axes);
  }
  for (std::uint32_t r = 0; r < plan.ranks; ++r) {
    out += fmt::format("rank {}:\n", r);
    for (const Call& c : plan.calls[r]) {
      const workloads::Op& op = w.ops[c.op];
      out += fmt::format("  op {} {}: ", c.op, op.name);
      switch (c.kind) {
        case CallKind::Gemm:
          out += fmt::format("gemm M={} N={} K={} {}\n", c.m, c.n, c.k, c.dtype);
          break;
        case CallKind::AllGather:
        case CallKind::ReduceScatter:
        case CallKind::AllReduce:
          out += fmt::format("nccl {} {} send {} B recv {} B comm {} rank {}\n", call_kind_name(c.kind), c.dtype,
                             c.send_bytes, c.recv_bytes, c.communicator, c.comm_rank);
          break;
        case CallKind::SendRecv:
          out += fmt::format("nccl send_recv {} {} B to and from each of {} peers comm {} rank {}\n", c.dtype,
                             c.peer_bytes, plan.communicators[c.communicator].ranks.size() - 1, c.communicator,
                             c.comm_rank);
          break;
        case CallKind::Send:
          out += fmt::format("nccl send {} B to rank {} comm {}\n", c.send_bytes, c.peer, c.communicator);
          break;
        case CallKind::Recv:
          out += fmt::format("nccl recv {} B from rank {} comm {}\n", c.recv_bytes, c.peer, c.communicator);
          break;
      }
    }
  }
  return out;
}

}  // namespace meshsim::replay

namespace meshsim::replay {

std::vector<OpStep> device_steps(const workloads::Workload& w, const Plan& plan, int gpus) {
  namespace cu = kernels::cuda;
  const auto g = static_cast<std::uint32_t>(std::max(gpus, 0));
  std::vector<OpStep> steps(w.ops.size());
  for (std::uint32_t i = 0; i < steps.size(); ++i) steps[i].op = i;
  std::vector<std::uint32_t> groups_total(w.ops.size()), groups_done(w.ops.size());
  // Per op, the fewest GPUs any of its groups needs (its highest rank + 1).
  std::vector<std::uint32_t> fewest(w.ops.size(), UINT32_MAX);
  std::vector<std::vector<bool>> seen(w.ops.size(), std::vector<bool>(plan.communicators.size()));
  for (std::uint32_t r = 0; r < plan.ranks; ++r)
    for (const Call& c : plan.calls[r]) {
      OpStep& s = steps[c.op];
      ++s.ranks;
      const bool collective = c.kind != CallKind::Gemm;
      const std::vector<std::uint32_t>* members = collective ? &plan.communicators[c.communicator].ranks : nullptr;
      bool fits = r < g;
      if (members)
        for (std::uint32_t m : *members) fits = fits && m < g;
      if (collective && !seen[c.op][c.communicator]) {
        seen[c.op][c.communicator] = true;
        ++groups_total[c.op];
        if (fits) ++groups_done[c.op];
        fewest[c.op] = std::min(fewest[c.op], *std::max_element(members->begin(), members->end()) + 1);
      }
      if (!fits) continue;
      ++s.ranks_replayed;
      cu::DeviceCall d;
      d.device = static_cast<int>(r);
      d.dtype = c.dtype;
      d.m = c.m;
      d.n = c.n;
      d.k = c.k;
      d.send_bytes = c.send_bytes;
      d.recv_bytes = c.recv_bytes;
      d.peer_bytes = c.peer_bytes;
      d.comm_rank = static_cast<int>(c.comm_rank);
      if (members)
        for (std::uint32_t m : *members) d.comm_devices.push_back(static_cast<int>(m));
      switch (c.kind) {
        case CallKind::Gemm: d.kind = cu::CallKind::Gemm; break;
        case CallKind::AllGather: d.kind = cu::CallKind::AllGather; break;
        case CallKind::ReduceScatter: d.kind = cu::CallKind::ReduceScatter; break;
        case CallKind::AllReduce: d.kind = cu::CallKind::AllReduce; break;
        case CallKind::SendRecv: d.kind = cu::CallKind::SendRecv; break;
        case CallKind::Send: d.kind = cu::CallKind::Send; d.peer = 1; break;
        case CallKind::Recv: d.kind = cu::CallKind::Recv; d.peer = 0; break;
      }
      s.calls.push_back(std::move(d));
    }
  for (OpStep& s : steps) {
    if (s.ranks_replayed == s.ranks) continue;
    const workloads::Op& op = w.ops[s.op];
    if (op.kind == OpKind::Matmul)
      s.skipped = fmt::format("GEMMs of ranks {} to {} (no GPU for them)", g, s.ranks - 1);
    else if (groups_done[s.op] == 0)
      s.skipped = fmt::format("all {} groups (rank r runs on GPU r: the first group needs {} GPUs, {} visible)",
                              groups_total[s.op], fewest[s.op], g);
    else
      s.skipped = fmt::format("{} of {} groups (not all their ranks have a GPU)", groups_total[s.op] - groups_done[s.op],
                              groups_total[s.op]);
  }
  return steps;
}

std::string format_steps(const workloads::Workload& w, const std::vector<OpStep>& steps, int gpus) {
  std::string out = fmt::format("on {} GPU{} (rank r on GPU r):\n", gpus, gpus == 1 ? "" : "s");
  for (const OpStep& s : steps) {
    out += fmt::format("  op {} {}: replays {} of {} ranks", s.op, w.ops[s.op].name, s.ranks_replayed, s.ranks);
    if (!s.skipped.empty()) out += "; skips " + s.skipped;
    out += "\n";
  }
  return out;
}

}  // namespace meshsim::replay
