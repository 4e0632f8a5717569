#include "chakra/export.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include "base/error.hpp"
#include "chakra/et_file.hpp"
#include "driver/costs.hpp"

namespace meshsim::chakra {

namespace {

// The groups of chips a collective runs over: its explicit groups, or the
// chips along its axes (x fastest) from each of its chips whose coordinates
// on those axes are 0.
std::vector<std::vector<topology::ChipId>> groups_of(const workloads::Op& op, const topology::Torus& t) {
  const workloads::CollectiveOp& co = op.collective();
  if (co.groups) return *co.groups;
  std::vector<topology::ChipId> chips;
  if (op.chips) {
    chips = *op.chips;
  } else {
    for (topology::ChipId c = 0; c < t.num_chips(); ++c) chips.push_back(c);
  }
  std::vector<std::vector<topology::ChipId>> out;
  for (topology::ChipId c : chips) {
    if (std::any_of(co.hw_axes.begin(), co.hw_axes.end(), [&](int a) { return t.coord(c, a) != 0; })) continue;
    std::vector<topology::ChipId> g{c};
    for (int a : co.hw_axes) {
      const std::size_t before = g.size();
      for (int x = 1; x < t.axis(a).size; ++x)
        for (std::size_t k = 0; k < before; ++k) g.push_back(t.with_coord(g[k], a, x));
    }
    std::sort(g.begin(), g.end());
    out.push_back(std::move(g));
  }
  return out;
}

std::int64_t comm_type(OpKind kind) {
  switch (kind) {
    case OpKind::AllReduce: return static_cast<std::int64_t>(CommType::AllReduce);
    case OpKind::AllGather: return static_cast<std::int64_t>(CommType::AllGather);
    case OpKind::ReduceScatter: return static_cast<std::int64_t>(CommType::ReduceScatter);
    case OpKind::AllToAll: return static_cast<std::int64_t>(CommType::AllToAll);
    default: break;
  }
  MESHSIM_ASSERT(false, "not a collective");
}

}  // namespace

ExportReport export_trace(const workloads::Workload& w, const std::string& prefix, bool gzip) {
  const topology::Torus t = w.make_torus();
  const std::uint32_t chips = t.num_chips();
  std::vector<RankTrace> ranks(chips);
  // Per op and chip: the ids of the op's nodes there (a multi-pair send may have several).
  std::vector<std::map<topology::ChipId, std::vector<std::uint64_t>>> nodes_of(w.ops.size());
  std::map<std::vector<topology::ChipId>, std::size_t> pg;  // a group's process-group id
  std::vector<const std::vector<topology::ChipId>*> groups;  // by id - 1
  ExportReport rep;
  rep.ranks = chips;
  // The nodes, on chip c, of the ops that op o waits for (ascending, once each).
  const auto waited_on = [&](std::size_t o, topology::ChipId c) {
    std::vector<std::uint64_t> ids;
    for (std::uint32_t d : w.ops[o].deps) {
      const auto it = nodes_of[d].find(c);
      if (it != nodes_of[d].end()) ids.insert(ids.end(), it->second.begin(), it->second.end());
    }
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    return ids;
  };
  const auto add = [&](std::size_t o, topology::ChipId c, Node n) {
    RankTrace& r = ranks[c];
    n.id = r.nodes.size();
    n.name = w.ops[o].name;
    n.data_deps = waited_on(o, c);
    nodes_of[o][c].push_back(n.id);
    r.nodes.push_back(std::move(n));
  };
  for (std::size_t o = 0; o < w.ops.size(); ++o) {
    const workloads::Op& op = w.ops[o];
    std::vector<topology::ChipId> on;
    if (op.chips) {
      on = *op.chips;
    } else {
      for (topology::ChipId c = 0; c < chips; ++c) on.push_back(c);
    }
    switch (op.kind) {
      case OpKind::Matmul:
      case OpKind::Elementwise: {
        const kernels::Roofline roof = driver::local_cost(op, w.hardware, w.file);
        Node n;
        n.type = static_cast<int>(NodeType::Comp);
        const double us = static_cast<double>(roof.time().ps()) / 1e6;
        n.duration_micros =
            roof.time() > kZeroTick ? std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::llround(us))) : 0;
        // ASTRA-sim's roofline (roofline-enabled) skips a node of no bytes (a
        // matmul's are its operands and result) and times one of num_ops ops as
        // num_ops / min(HBM bandwidth x num_ops / tensor_size, peak): of 0 ops,
        // 0 / 0, and the rank never finishes. A kernel of no FLOPs is written as
        // one op, which that formula times as tensor_size / HBM bandwidth: its
        // memory time, as meshsim's roofline gives it.
        if (op.kind == OpKind::Matmul) {
          const workloads::MatmulOp& mm = op.matmul();
          n.num_ops = static_cast<std::uint64_t>(driver::matmul_flops(op));
          const std::uint64_t element =
              op.inputs.empty() ? workloads::element_size(mm.dtype) : op.inputs[0].element_bytes;
          n.tensor_size = static_cast<std::uint64_t>(static_cast<double>(mm.batch) *
                                                     kernels::matmul_traffic(mm.m, mm.k, mm.n, element).hbm_bytes);
        } else {
          n.num_ops = std::max<std::uint64_t>(op.elementwise().flops, 1);
          n.tensor_size = op.elementwise().hbm_bytes;
        }
        n.is_cpu_op = false;
        for (topology::ChipId c : on) add(o, c, n);
        break;
      }
      case OpKind::Send: {
        for (const auto& [src, dst] : workloads::send_pairs(op)) {
          Node s, r;
          s.type = static_cast<int>(NodeType::Send);
          r.type = static_cast<int>(NodeType::Recv);
          for (Node* n : {&s, &r}) {
            n->comm_src = src;
            n->comm_dst = dst;
            n->comm_size = op.send().bytes;
            n->comm_tag = static_cast<std::int64_t>(o);
          }
          add(o, src, s);
          add(o, dst, r);
        }
        break;
      }
      default: {
        for (const std::vector<topology::ChipId>& g : groups_of(op, t)) {
          const std::uint64_t p = g.size();
          if (p < 2) continue;
          const auto [it, fresh] = pg.emplace(g, pg.size() + 1);
          if (fresh) groups.push_back(&it->first);
          Node n;
          n.type = static_cast<int>(NodeType::Coll);
          n.comm_type = comm_type(op.kind);
          const bool shard = op.kind == OpKind::AllGather || op.kind == OpKind::AllToAll;
          const std::uint64_t v = op.collective().bytes;
          n.comm_size = shard ? (v + p - 1) / p : v;
          if (shard && v % p != 0) ++rep.rounded;
          n.pg_name = std::to_string(it->second);
          for (topology::ChipId c : g) add(o, c, n);
        }
        break;
      }
    }
    // A chip the op runs on without a node of its own (a send's bystanders, a
    // group of one chip) passes on what the op waits for there.
    for (topology::ChipId c : on)
      if (!nodes_of[o].count(c)) nodes_of[o][c] = waited_on(o, c);
  }
  for (std::uint32_t c = 0; c < chips; ++c) {
    ranks[c].version = "0.0.4";
    rep.nodes += ranks[c].nodes.size();
    write_rank(fmt::format("{}.{}.et{}", prefix, c, gzip ? ".gz" : ""), ranks[c]);
  }
  // The comm-group file, ranks in each group's ring order, by id.
  std::string text = "{";
  for (std::size_t i = 0; i < groups.size(); ++i)
    text += fmt::format("{}\n  \"{}\": [{}]", i ? "," : "", i + 1, fmt::join(*groups[i], ", "));
  text += groups.empty() ? "}\n" : "\n}\n";
  const std::string groups_path = prefix + ".comm_groups.json";
  std::ofstream out(groups_path, std::ios::binary);
  out << text;
  if (!out.good()) throw Error(fmt::format("{}: cannot write the comm-group file", groups_path));
  rep.groups = groups.size();
  return rep;
}

}  // namespace meshsim::chakra
