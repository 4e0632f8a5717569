#include "driver/bounds.hpp"

#include <algorithm>
#include <cmath>

#include "sim/collectives/gpu.hpp"

namespace meshsim::driver {

double LowerBound::time_s() const { return std::max({ingress_s, cut_s, latency_s}); }

const char* LowerBound::binding() const {
  if (latency_s >= ingress_s && latency_s >= cut_s) return "latency";
  return cut_s > ingress_s ? "cut" : "ingress";
}

namespace {

// Bytes a chip must receive (all-gather, all-to-all, the all-gather half of an
// all-reduce) or send (reduce-scatter, its half of an all-reduce) for a
// collective of V bytes over P chips.
double chip_bytes(OpKind kind, double v, double p) {
  switch (kind) {
    case OpKind::AllGather:
    case OpKind::ReduceScatter: return v * (p - 1) / p;
    case OpKind::AllReduce: return 2 * v * (p - 1) / p;
    case OpKind::AllToAll: return v * (p - 1) / (p * p);
    default: return 0;
  }
}

// Bytes that must cross a cut splitting the group into parts of l and r
// slices (of x) along one axis, in the busier direction.
double cut_bytes(OpKind kind, double v, double x, double l, double r) {
  switch (kind) {
    case OpKind::AllGather:      // one side's shards must reach the other
    case OpKind::ReduceScatter:  // one side's contributions to the other's blocks
      return std::max(l, r) * v / x;
    case OpKind::AllReduce: return 2 * std::max(l, r) * v / x;
    case OpKind::AllToAll: return l * r * v / (x * x);  // a piece from every chip of one side to every chip of the other
    default: return 0;
  }
}

// Links into (or out of) `chip` along the torus axis `a`: two on a ring, one at
// the end of a line, two inside it.
int axis_links(const topology::Torus& t, topology::ChipId chip, int a) {
  const topology::AxisSpec& s = t.axis(a);
  if (s.size < 2) return 0;
  if (s.wraparound) return 2;
  const int c = t.coord(chip, a);
  return c == 0 || c == s.size - 1 ? 1 : 2;
}

LowerBound torus_bound(const workloads::Op& op, const workloads::Workload& w, const topology::Torus& t) {
  LowerBound lb;
  const double b = static_cast<double>(w.hardware.ici.bandwidth_bytes_per_s);
  const double alpha = w.hardware.ici.latency.seconds();
  const double v = static_cast<double>(op.bytes);
  if (op.kind == OpKind::Send) {
    for (const auto& [src, dst] : workloads::send_pairs(op)) {
      if (src == dst) continue;
      int out = 0, in = 0;
      for (int a = 0; a < t.num_axes(); ++a) out += axis_links(t, src, a), in += axis_links(t, dst, a);
      lb.ingress_s = std::max(lb.ingress_s, v / (std::min(out, in) * b));
      lb.latency_s = std::max(lb.latency_s, t.hop_distance(src, dst) * alpha);
    }
    return lb;
  }
  double p = 1, corner_links = 0, diameter = 0;
  for (int a : op.hw_axes) {
    const topology::AxisSpec& s = t.axis(a);
    p *= s.size;
    corner_links += s.wraparound ? 2 : 1;
    diameter += s.wraparound ? s.size / 2 : s.size - 1;
  }
  if (p < 2) return lb;
  // The chip with the fewest links of the group's axes (a corner of its lines).
  lb.ingress_s = chip_bytes(op.kind, v, p) / (corner_links * b);
  for (int a : op.hw_axes) {
    const topology::AxisSpec& s = t.axis(a);
    const double x = s.size, l = std::floor(x / 2), r = x - l;
    const double links = p / x * (s.wraparound ? 2 : 1);  // per direction, across the cut
    lb.cut_s = std::max(lb.cut_s, cut_bytes(op.kind, v, x, l, r) / (links * b));
  }
  lb.latency_s = diameter * alpha;
  return lb;
}

double route_latency(const topology::Fabric& f, topology::ChipId src, topology::ChipId dst) {
  double s = 0;
  for (topology::LinkId l : f.route(src, dst)) s += f.link(l).spec.latency.seconds();
  return s;
}

LowerBound fabric_bound(const workloads::Op& op, const workloads::Workload& w, const topology::Torus& t,
                        const topology::Fabric& f) {
  LowerBound lb;
  const double nvl = static_cast<double>(w.hardware.nvlink.bandwidth_bytes_per_s);
  const double nic = static_cast<double>(w.hardware.nic.bandwidth_bytes_per_s);
  const double v = static_cast<double>(op.bytes);
  if (op.kind == OpKind::Send) {
    for (const auto& [src, dst] : workloads::send_pairs(op)) {
      if (src == dst) continue;
      lb.ingress_s = std::max(lb.ingress_s, v / (nvl + nic));  // a GPU's two ports
      lb.latency_s = std::max(lb.latency_s, route_latency(f, src, dst));
    }
    return lb;
  }
  const std::vector<std::vector<topology::ChipId>> rings = collectives::gpu::rings(t, op.hw_axes);
  if (rings.empty() || rings.front().size() < 2) return lb;
  const std::vector<topology::ChipId>& group = rings.front();
  const double p = static_cast<double>(group.size());
  // The group's GPUs per node.
  const double g = static_cast<double>(std::count_if(group.begin(), group.end(), [&](topology::ChipId c) {
    return f.node_of(c) == f.node_of(group.front());
  }));
  // In-switch reduction (NVLS) needs every GPU to send its V and receive the
  // sum once, not twice: inside one NVLink domain an all-reduce is bounded as
  // a gather of V.
  const bool one_domain = g == p;
  const double bytes = op.kind == OpKind::AllReduce && one_domain ? v : chip_bytes(op.kind, v, p);
  lb.ingress_s = bytes / (nvl + nic);
  if (!one_domain) {
    // What one of a node's g NICs must carry of what the node needs from the
    // other nodes: their p - g shards once (all-gather; reduce-scatter the other
    // way; all-reduce both), or every local GPU's pieces from them (all-to-all).
    double per_nic = 0;
    switch (op.kind) {
      case OpKind::AllGather:
      case OpKind::ReduceScatter: per_nic = (p - g) * v / (p * g); break;
      case OpKind::AllReduce: per_nic = 2 * (p - g) * v / (p * g); break;
      case OpKind::AllToAll: per_nic = (p - g) * v / (p * p); break;
      default: break;
    }
    lb.cut_s = per_nic / nic;
  }
  for (topology::ChipId c : group)
    if (c != group.front())
      lb.latency_s = std::max({lb.latency_s, route_latency(f, group.front(), c), route_latency(f, c, group.front())});
  return lb;
}

}  // namespace

LowerBound lower_bound(const workloads::Op& op, const workloads::Workload& w, const topology::Torus& torus,
                       const topology::Fabric* fabric) {
  if (is_local(op.kind)) return {};
  return fabric ? fabric_bound(op, w, torus, *fabric) : torus_bound(op, w, torus);
}

}  // namespace meshsim::driver
