#include "driver/bounds.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "sim/collectives/gpu.hpp"

namespace meshsim::driver {

double LowerBound::time_s() const { return std::max({ingress_s, cut_s, latency_s, traffic_s}); }

const char* LowerBound::binding() const {
  if (latency_s >= ingress_s && latency_s >= cut_s && latency_s >= traffic_s) return "latency";
  if (traffic_s > ingress_s && traffic_s > cut_s) return "traffic";
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

// Whether the wraparound of axis `a` stays among the chips that differ only on
// `axes`: always on an untwisted torus; a twisted wraparound shifts the long
// axes, so only when they are among `axes` too.
bool wrap_within(const topology::Torus& t, int a, std::span<const int> axes) {
  if (!t.axis(a).wraparound) return false;
  for (int b = 0; b < t.num_axes(); ++b)
    if (t.twist(a, b) != 0 && std::find(axes.begin(), axes.end(), b) == axes.end()) return false;
  return true;
}

// Links into (or out of) `chip` along the torus axis `a` within a group over
// `axes`: two on a ring, one at the end of a line, two inside it.
int axis_links(const topology::Torus& t, topology::ChipId chip, int a, std::span<const int> axes) {
  const topology::AxisSpec& s = t.axis(a);
  if (s.size < 2) return 0;
  if (wrap_within(t, a, axes)) return 2;
  const int c = t.coord(chip, a);
  return c == 0 || c == s.size - 1 ? 1 : 2;
}

// Whether chips c and d differ only on `axes`.
bool same_group(const topology::Torus& t, topology::ChipId c, topology::ChipId d, std::span<const int> axes) {
  for (int a = 0; a < t.num_axes(); ++a)
    if (t.coord(c, a) != t.coord(d, a) && std::find(axes.begin(), axes.end(), a) == axes.end()) return false;
  return true;
}

// The group of chip 0 over `axes`: the chips that differ from it only there.
std::vector<topology::ChipId> first_group(const topology::Torus& t, std::span<const int> axes) {
  std::vector<topology::ChipId> group;
  for (topology::ChipId c = 0; c < t.num_chips(); ++c)
    if (same_group(t, 0, c, axes)) group.push_back(c);
  return group;
}

// A collective over groups of chips (bounds.hpp): ingress over all of a chip's
// links in (its DCN link too when its group spans slices), traffic, latency.
LowerBound group_bound(const workloads::Op& op, const workloads::Workload& w, const topology::Torus& t) {
  LowerBound lb;
  const double b = static_cast<double>(w.hardware.ici.bandwidth_bytes_per_s);
  const double b_dcn = static_cast<double>(w.hardware.dcn.bandwidth_bytes_per_s);
  const double v = static_cast<double>(op.comm_bytes());
  std::vector<int> all(static_cast<std::size_t>(t.num_axes()));
  for (int a = 0; a < t.num_axes(); ++a) all[static_cast<std::size_t>(a)] = a;
  double traffic = 0;  // link-bytes
  bool slices = false;
  for (const std::vector<topology::ChipId>& g : *op.explicit_groups()) {
    if (g.size() < 2) continue;
    const double p = static_cast<double>(g.size());
    for (topology::ChipId c : g) {
      int far = 0;
      double hops = 0;  // to every other member
      topology::ChipId farthest = c, remote = c;  // the farthest member in c's slice; one in another
      for (topology::ChipId d : g) {
        if (d == c) continue;
        if (t.between_slices(c, d)) {
          remote = d;
          continue;
        }
        const int h = t.hop_distance(c, d);
        hops += h;
        if (h > far) far = h, farthest = d;
      }
      double in = remote != c ? b_dcn : 0;
      for (int a = 0; a < t.num_axes(); ++a)
        if (a != t.dcn_axis()) in += axis_links(t, c, a, all) * b;
      slices = slices || remote != c;
      lb.ingress_s = std::max(lb.ingress_s, chip_bytes(op.kind, v, p) / in);
      lb.latency_s = std::max({lb.latency_s, t.route_latency(c, farthest).seconds(), t.route_latency(c, remote).seconds()});
      traffic += op.kind == OpKind::AllToAll ? hops * v / (p * p) : (op.kind == OpKind::AllReduce ? 2 : 1) * far * v / p;
    }
  }
  if (!slices && t.num_links() > 0) lb.traffic_s = traffic / (static_cast<double>(t.num_links()) * b);
  return lb;
}

LowerBound torus_bound(const workloads::Op& op, const workloads::Workload& w, const topology::Torus& t) {
  if (op.explicit_groups()) return group_bound(op, w, t);
  LowerBound lb;
  const double b = static_cast<double>(w.hardware.ici.bandwidth_bytes_per_s);
  const double alpha = w.hardware.ici.latency.seconds();
  const double v = static_cast<double>(op.comm_bytes());
  // Multislice: every chip's one DCN link out and one in.
  const int dcn = t.dcn_axis();
  const double b_dcn = static_cast<double>(w.hardware.dcn.bandwidth_bytes_per_s);
  if (op.kind == OpKind::Send) {
    std::vector<int> all(static_cast<std::size_t>(t.num_axes()));
    for (int a = 0; a < t.num_axes(); ++a) all[static_cast<std::size_t>(a)] = a;
    double traffic = 0;  // link-bytes: each pair's bytes cross at least its hops
    bool slices = false;
    for (const auto& [src, dst] : workloads::send_pairs(op)) {
      if (src == dst) continue;
      slices = slices || t.between_slices(src, dst);
      if (!slices) traffic += v * t.hop_distance(src, dst);
      double out = 0, in = 0;  // bytes/s out of src and into dst
      for (int a = 0; a < t.num_axes(); ++a) {
        if (a == dcn) {
          out += b_dcn, in += b_dcn;
          continue;
        }
        out += axis_links(t, src, a, all) * b, in += axis_links(t, dst, a, all) * b;
      }
      lb.ingress_s = std::max(lb.ingress_s, v / std::min(out, in));
      lb.latency_s = std::max(lb.latency_s, t.route_latency(src, dst).seconds());
    }
    if (!slices && t.num_links() > 0) lb.traffic_s = traffic / (static_cast<double>(t.num_links()) * b);
    return lb;
  }
  const std::vector<int>& axes = op.collective().hw_axes;
  double p = 1, corner_links = 0, diameter = 0, slices = 1;
  for (int a : axes) {
    const topology::AxisSpec& s = t.axis(a);
    p *= s.size;
    if (a == dcn) {
      slices = s.size;
      continue;
    }
    corner_links += wrap_within(t, a, axes) ? 2 : 1;
    diameter += wrap_within(t, a, axes) ? s.size / 2 : s.size - 1;
  }
  if (p < 2) return lb;
  // The bytes/s of a chip's DCN link out (and in) when the group spans slices.
  const double chip_dcn = slices > 1 ? b_dcn : 0;
  // The chip with the fewest links of the group's axes (a corner of its lines).
  lb.ingress_s = chip_bytes(op.kind, v, p) / (corner_links * b + chip_dcn);
  // A twisted torus: the group's links are counted (its twisted wraparounds
  // cross the long axes' middle planes too) and its diameter measured.
  std::vector<topology::ChipId> group;
  if (t.twisted()) {
    group = first_group(t, axes);
    std::vector<int> ici_axes;  // the slices' DCN step is added below
    for (int a : axes)
      if (a != dcn) ici_axes.push_back(a);
    diameter = 0;
    for (topology::ChipId c : first_group(t, ici_axes))
      diameter = std::max(diameter, static_cast<double>(t.route(group.front(), c, ici_axes).size()));
  }
  for (int a : axes) {
    const topology::AxisSpec& s = t.axis(a);
    if (a == dcn) {
      // One slice against the others: what it must receive (or send) through
      // its chips' DCN links, P / S of them in the group.
      const double x = s.size;
      lb.cut_s = std::max(lb.cut_s, cut_bytes(op.kind, v, x, 1, x - 1) / (p / x * b_dcn));
      continue;
    }
    const double x = s.size, l = std::floor(x / 2), r = x - l;
    double links = p / x * (wrap_within(t, a, axes) ? 2 : 1);  // per direction, across the cut
    if (t.twisted()) {
      // Links from the lower half [0, l) to the upper and back, within the group.
      double up = 0, down = 0;
      for (topology::ChipId c : group)
        for (int e = 0; e < t.num_axes(); ++e)
          for (topology::Direction d : {topology::Direction::Plus, topology::Direction::Minus}) {
            const topology::LinkId id = t.link(c, e, d);
            if (id == topology::kNoLink || !same_group(t, c, t.link_info(id).dst, axes)) continue;
            const bool from_low = t.coord(c, a) < l, to_low = t.coord(t.link_info(id).dst, a) < l;
            if (from_low && !to_low) ++up;
            if (!from_low && to_low) ++down;
          }
      links = std::min(up, down);
    }
    // Between slices the DCN crosses the cut too: the smaller side's chips'
    // links out (and in).
    lb.cut_s = std::max(lb.cut_s, cut_bytes(op.kind, v, x, l, r) / (links * b + std::min(l, r) * (p / x) * chip_dcn));
  }
  lb.latency_s = diameter * alpha + (slices > 1 ? 2 * w.hardware.dcn.latency.seconds() : 0.0);
  return lb;
}

double route_latency(const topology::Fabric& f, topology::ChipId src, topology::ChipId dst,
                     collectives::gpu::Protocol p = collectives::gpu::Protocol::Simple) {
  double s = 0;
  for (topology::LinkId l : f.route(src, dst)) s += collectives::gpu::link_latency(f, l, p).seconds();
  return s;
}

}  // namespace

double fabric_tier_cut_s(OpKind kind, double v, std::span<const std::vector<topology::ChipId>> groups,
                         const topology::Fabric& f) {
  double worst = 0;
  const double cable = static_cast<double>(f.cable_spec().bandwidth_bytes_per_s);
  for (const bool pod : {false, true}) {
    if (pod && f.pods() == 1) continue;
    // A unit's only way out is its leaves' cables up (every rail's); a pod's, its spines' cables to the core.
    const double capacity = pod ? f.spines() * f.core_cables() * cable
                                : f.gpus_per_node() * f.spines() * f.spine_cables() * cable;
    std::map<int, double> bytes;  // per unit (pod)
    for (const std::vector<topology::ChipId>& group : groups) {
      const double p = static_cast<double>(group.size());
      std::map<int, double> members;
      for (topology::ChipId c : group) {
        const int leaf = f.leaf_of(c);
        ++members[pod ? f.pod_of_leaf(leaf) : leaf / f.gpus_per_node()];
      }
      for (const auto& [where, k] : members)
        if (k < p) bytes[where] += cut_bytes(kind, v, p, k, p - k);
    }
    for (const auto& [where, b] : bytes) worst = std::max(worst, b / capacity);
  }
  return worst;
}

namespace {

LowerBound fabric_bound(const workloads::Op& op, const workloads::Workload& w, const topology::Torus& t,
                        const topology::Fabric& f, collectives::gpu::Protocol protocol) {
  LowerBound lb;
  const double nvl = static_cast<double>(w.hardware.nvlink.bandwidth_bytes_per_s);
  const double nic = static_cast<double>(w.hardware.nic.bandwidth_bytes_per_s);
  const double v = static_cast<double>(op.comm_bytes());
  if (op.kind == OpKind::Send) {
    for (const auto& [src, dst] : workloads::send_pairs(op)) {
      if (src == dst) continue;
      lb.ingress_s = std::max(lb.ingress_s, v / (nvl + nic));  // a GPU's two ports
      lb.latency_s = std::max(lb.latency_s, route_latency(f, src, dst));
    }
    return lb;
  }
  const std::vector<std::vector<topology::ChipId>> rings = collectives::gpu::rings(t, op.collective().hw_axes);
  if (rings.empty() || rings.front().size() < 2) return lb;
  const std::vector<topology::ChipId>& group = rings.front();
  const double p = static_cast<double>(group.size());
  // The group's GPUs per node.
  const double g = static_cast<double>(std::count_if(group.begin(), group.end(), [&](topology::ChipId c) {
    return f.node_of(c) == f.node_of(group.front());
  }));
  // In-switch reduction (NVLS) needs every GPU to send its V and receive the
  // sum once, not twice: inside one NVLink domain, or across nodes whose
  // switches reduce (NCCL's NVLS tree), an all-reduce is bounded as a gather of V.
  const bool one_domain = g == p;
  const bool switches_reduce = g > 1 && f.nvls_efficiency() > 0;
  const double bytes =
      op.kind == OpKind::AllReduce && (one_domain || switches_reduce) ? v : chip_bytes(op.kind, v, p);
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
    lb.cut_s = std::max(per_nic / nic, fabric_tier_cut_s(op.kind, v, rings, f));
  }
  for (topology::ChipId c : group)
    if (c != group.front())
      lb.latency_s = std::max(
          {lb.latency_s, route_latency(f, group.front(), c, protocol), route_latency(f, c, group.front(), protocol)});
  return lb;
}

}  // namespace

LowerBound lower_bound(const workloads::Op& op, const workloads::Workload& w, const topology::Torus& torus,
                       const topology::Fabric* fabric, collectives::gpu::Protocol protocol) {
  if (is_local(op.kind)) return {};
  return fabric ? fabric_bound(op, w, torus, *fabric, protocol) : torus_bound(op, w, torus);
}

}  // namespace meshsim::driver
