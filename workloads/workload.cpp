#include "workloads/workload.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include "base/error.hpp"
#include "base/text_file.hpp"
#include "workloads/json_cursor.hpp"
#include "workloads/training_detail.hpp"
#include "workloads/json_frontend.hpp"
#include "workloads/json_workload.hpp"
#include "workloads/time_bound.hpp"

namespace meshsim::workloads {

using topology::AxisSpec;

std::uint64_t Array::bytes() const {
  std::uint64_t b = element_bytes;
  for (std::uint64_t s : sizes) b *= s;
  return b;
}

int Array::dim_index(const std::string& dim) const {
  for (std::size_t d = 0; d < dims.size(); ++d)
    if (dims[d] == dim) return static_cast<int>(d);
  return -1;
}

namespace {

// A string value and where it is.
NameRef name_at(const Cursor& c) { return {c.as_string(), c.ref()}; }

struct DType {
  std::string_view name;
  std::uint64_t bytes;
};
constexpr DType kDTypes[] = {{"bf16", 2}, {"fp16", 2}, {"fp32", 4}, {"int8", 1}, {"fp8", 1}, {"int32", 4}};
}  // namespace

std::uint64_t element_size(std::string_view dtype) {
  for (const DType& d : kDTypes)
    if (d.name == dtype) return d.bytes;
  return 0;
}

Op::Op(OpKind k) : kind(k) {
  switch (k) {
    case OpKind::Send:
      body = SendOp{};
      break;
    case OpKind::Matmul:
      body = MatmulOp{};
      break;
    case OpKind::Elementwise:
      body = ElementwiseOp{};
      break;
    default:
      break;  // a collective: the default body
  }
}

namespace {

template <typename Body, typename O>
auto& body_of(O& op, bool fits, const char* what) {
  auto* b = std::get_if<Body>(&op.body);
  if (!fits || b == nullptr) assertion_failed(what, "the op's body is not its kind's", __FILE__, __LINE__);
  return *b;
}

}  // namespace

CollectiveOp& Op::collective() {
  return body_of<CollectiveOp>(*this, is_collective(kind), "collective()");
}
const CollectiveOp& Op::collective() const {
  return body_of<CollectiveOp>(*this, is_collective(kind), "collective()");
}
SendOp& Op::send() {
  return body_of<SendOp>(*this, kind == OpKind::Send, "send()");
}
const SendOp& Op::send() const {
  return body_of<SendOp>(*this, kind == OpKind::Send, "send()");
}
MatmulOp& Op::matmul() {
  return body_of<MatmulOp>(*this, kind == OpKind::Matmul, "matmul()");
}
const MatmulOp& Op::matmul() const {
  return body_of<MatmulOp>(*this, kind == OpKind::Matmul, "matmul()");
}
ElementwiseOp& Op::elementwise() {
  return body_of<ElementwiseOp>(*this, kind == OpKind::Elementwise, "elementwise()");
}
const ElementwiseOp& Op::elementwise() const {
  return body_of<ElementwiseOp>(*this, kind == OpKind::Elementwise, "elementwise()");
}

std::uint64_t Op::comm_bytes() const {
  if (kind == OpKind::Send) return send().bytes;
  return is_collective(kind) ? collective().bytes : 0;
}

const std::vector<int>& Op::comm_axes() const {
  static const std::vector<int> kNone;
  return is_collective(kind) ? collective().hw_axes : kNone;
}

const std::vector<std::vector<topology::ChipId>>* Op::explicit_groups() const {
  return is_collective(kind) ? collective().groups.get() : nullptr;
}

std::vector<std::pair<topology::ChipId, topology::ChipId>> send_pairs(const Op& op) {
  const SendOp& s = op.send();
  if (!s.pairs.empty()) return s.pairs;
  return {{s.src, s.dst}};
}

std::vector<std::vector<int>> mesh_coordinates(const Workload& w, const topology::Torus& torus) {
  std::vector<std::vector<int>> coords(torus.num_chips());
  for (topology::ChipId c = 0; c < torus.num_chips(); ++c)
    for (const MeshAxis& m : w.mesh) {
      int coord = 0, weight = 1;
      for (const AxisFactor& f : m.factors) {
        coord += torus.coord(c, f.hw) / f.stride % f.size * weight;
        weight *= f.size;
      }
      coords[c].push_back(coord);
    }
  return coords;
}

topology::Torus Workload::make_torus() const {
  // GPU workloads use the torus only for coordinates: give it some bandwidth.
  topology::LinkSpec link = hardware.gpu ? hardware.nvlink : hardware.ici;
  return topology::Torus(topology, link, twisted, hardware.dcn);
}

topology::Fabric Workload::make_fabric() const {
  // One fat tree of all the nodes, whatever grid they form: node index n0 + N0 n1
  // + ..., so chip gpu + G * node is the torus' linear id (axis 0 fastest).
  int gpus = 1, nodes = 1;  // per node; nodes
  for (const topology::AxisSpec& a : topology) (a.in_node ? gpus : nodes) *= a.size;
  const int leaf = hardware.leaf_nodes > 0 ? std::min(hardware.leaf_nodes, nodes) : nodes;
  const int pod = hardware.pod_nodes > 0 && hardware.pod_nodes < nodes ? hardware.pod_nodes : 0;
  topology::LinkSpec spine = hardware.spine;
  int cables = 1;
  if (hardware.spine_full_bisection) {
    // A leaf serves one GPU per node of its unit: it has as many NIC-rate cables
    // up to the spines as it has GPUs (divided by its oversubscription),
    // ceil(leaf nodes / spines / oversubscription) to each spine. Each is its own
    // link, so flows from different nodes do not queue behind one another.
    cables = std::max(1, static_cast<int>(std::ceil(static_cast<double>(leaf) / hardware.spines /
                                                     hardware.leaf_oversubscription)));
    spine.bandwidth_bytes_per_s = hardware.nic.bandwidth_bytes_per_s;
  }
  // With several pods, each spine has as many cables up to its core plane as it
  // has down to the pod's leaves, divided by the spines' oversubscription.
  const int pod_leaves = pod > 0 ? pod / leaf * gpus : 0;
  const int core = std::max(1, static_cast<int>(std::ceil(static_cast<double>(pod_leaves) * cables /
                                                          hardware.spine_oversubscription)));
  topology::FabricSpec spec{gpus, nodes, hardware.nvlink, hardware.nic, spine, hardware.spines, cables};
  spec.leaf_nodes = leaf;
  spec.pod_nodes = pod;
  spec.nvls_efficiency = hardware.nvls_efficiency;
  spec.nvls_channels = hardware.compute_capability >= 100 ? 32 : 16;
  spec.ll_bytes_per_s = nccl_ll_max_bytes_per_s(hardware, 1);
  spec.core_cables = core;
  return topology::Fabric(spec);
}

double nccl_ll_max_bytes_per_s(const Hardware& hw, int nodes) {
  // NCCL's llMaxBws (src/graph/tuning.cc, NCCL 2.2x), GB/s: inside one node by
  // GPU generation (Volta 39.0, Ampere 87.7, Hopper 141.0, Blackwell 282.0);
  // across two nodes and more by host CPU (Intel and others 39.0 and 20.4, AMD
  // 22.5 and 19.0).
  if (nodes <= 1) {
    const int cc = hw.compute_capability;
    return 1e9 * (cc >= 100 ? 282.0 : cc >= 90 ? 141.0 : cc >= 80 ? 87.7 : 39.0);
  }
  if (nodes == 2) return 1e9 * (hw.amd_cpu ? 22.5 : 39.0);
  return 1e9 * (hw.amd_cpu ? 19.0 : 20.4);
}

std::string_view level_name(FabricLevel level) {
  switch (level) {
    case FabricLevel::Ici:
      return "ici";
    case FabricLevel::Dcn:
      return "dcn";
    case FabricLevel::Nvlink:
      return "nvlink";
    case FabricLevel::Nic:
      return "nic";
  }
  return "?";
}

std::optional<FabricLevel> parse_level(std::string_view name) {
  for (FabricLevel l : {FabricLevel::Ici, FabricLevel::Dcn, FabricLevel::Nvlink, FabricLevel::Nic})
    if (level_name(l) == name) return l;
  return std::nullopt;
}

void apply_link_efficiency(Hardware& hw) {
  const auto scaled = [](std::uint64_t peak, double efficiency) {
    if (peak == 0) return peak;
    return std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::llround(static_cast<double>(peak) * efficiency)));
  };
  const auto& e = hw.link_efficiency;
  hw.ici.bandwidth_bytes_per_s = scaled(hw.peak.ici, e[static_cast<std::size_t>(FabricLevel::Ici)]);
  hw.dcn.bandwidth_bytes_per_s = scaled(hw.peak.dcn, e[static_cast<std::size_t>(FabricLevel::Dcn)]);
  hw.nvlink.bandwidth_bytes_per_s = scaled(hw.peak.nvlink, e[static_cast<std::size_t>(FabricLevel::Nvlink)]);
  hw.nic.bandwidth_bytes_per_s = scaled(hw.peak.nic, e[static_cast<std::size_t>(FabricLevel::Nic)]);
  hw.spine.bandwidth_bytes_per_s = scaled(hw.peak.spine, e[static_cast<std::size_t>(FabricLevel::Nic)]);
}

double preset_link_efficiency(const Hardware& hw, FabricLevel level) {
  if (level != FabricLevel::Nvlink) return 1.0;
  const topology::GpuPreset* g = topology::find_gpu_preset(hw.preset);
  return g != nullptr ? g->nvlink_efficiency : 1.0;
}

namespace {

void set_peaks(Hardware& hw) {
  hw.peak = {hw.ici.bandwidth_bytes_per_s, hw.dcn.bandwidth_bytes_per_s, hw.nvlink.bandwidth_bytes_per_s,
             hw.nic.bandwidth_bytes_per_s, hw.spine.bandwidth_bytes_per_s};
}

void restore_peaks(Hardware& hw) {
  hw.ici.bandwidth_bytes_per_s = hw.peak.ici;
  hw.dcn.bandwidth_bytes_per_s = hw.peak.dcn;
  hw.nvlink.bandwidth_bytes_per_s = hw.peak.nvlink;
  hw.nic.bandwidth_bytes_per_s = hw.peak.nic;
  hw.spine.bandwidth_bytes_per_s = hw.peak.spine;
}

}  // namespace

std::optional<Hardware> preset_hardware(std::string_view name) {
  Hardware hw;
  if (const topology::Preset* p = topology::find_preset(name)) {
    hw.preset = p->name;
    hw.chip = p->chip;
    hw.ici = p->ici;
    hw.dcn = p->dcn;
    hw.forward_chunk_bytes = p->forward_chunk_bytes;
    set_peaks(hw);
    return hw;
  }
  if (const topology::GpuPreset* g = topology::find_gpu_preset(name)) {
    hw.preset = g->name;
    hw.gpu = true;
    hw.chip = g->chip;
    hw.forward_chunk_bytes = g->forward_chunk_bytes;
    hw.gpus_per_node = g->gpus_per_node;
    hw.nvlink = g->nvlink;
    hw.nic = g->nic;
    hw.spine = g->spine;
    hw.nvls_efficiency = g->nvls_efficiency;
    hw.compute_capability = g->compute_capability;
    hw.amd_cpu = g->amd_cpu;
    set_peaks(hw);
    hw.link_efficiency[static_cast<std::size_t>(FabricLevel::Nvlink)] = g->nvlink_efficiency;
    apply_link_efficiency(hw);
    return hw;
  }
  return std::nullopt;
}

topology::System Workload::make_system() const {
  if (!hardware.gpu) return topology::System(make_torus());
  std::vector<std::string> names;
  for (std::size_t a = 0; a < topology.size(); ++a) names.push_back(gpu_axis_name(*this, static_cast<int>(a)));
  return topology::System(make_torus(), make_fabric(), std::move(names));
}

std::string gpu_axis_name(const Workload& w, int axis) {
  int local = 0;
  while (local < static_cast<int>(w.topology.size()) && w.topology[static_cast<std::size_t>(local)].in_node) ++local;
  if (axis < local) return local == 1 ? std::string("gpu") : fmt::format("gpu{}", axis);
  const bool one = static_cast<int>(w.topology.size()) - local == 1;
  return w.node_grid || !one ? fmt::format("node{}", axis - local) : std::string("node");
}

namespace {


// ---------------------------------------------------------------- hardware

void set_link(topology::LinkSpec& link, const Cursor& c, const char* bandwidth_key, const char* latency_key) {
  if (auto v = c.find(bandwidth_key)) {
    link.bandwidth_bytes_per_s = static_cast<std::uint64_t>(std::llround(v->as_positive_double(1e15)));
    if (link.bandwidth_bytes_per_s == 0) v->fail("bandwidth rounds to 0 bytes/s");
  }
  if (auto v = c.find(latency_key)) {
    if (v->raw().is_number() && v->raw().get<double>() == 0.0)
      link.latency = kZeroTick;
    else
      link.latency = tick_from_seconds(v->as_positive_double(1.0));
  }
}

// The levels a hardware has: a TPU's ICI and DCN, a GPU's NVLink and NIC.
std::array<FabricLevel, 2> levels_of(const Hardware& hw) {
  return hw.gpu ? std::array{FabricLevel::Nvlink, FabricLevel::Nic} : std::array{FabricLevel::Ici, FabricLevel::Dcn};
}

// <level>_efficiency and collective_fixed_cost_s (docs/WORKLOAD.md); then the
// peaks are the links as given, and the links carry peak x efficiency.
void parse_calibration_terms(Hardware& hw, const Cursor& c) {
  for (FabricLevel level : levels_of(hw))
    if (auto v = c.find(fmt::format("{}_efficiency", level_name(level))))
      hw.link_efficiency[static_cast<std::size_t>(level)] = v->as_positive_double(1.0);
  if (auto v = c.find("collective_fixed_cost_s")) {
    v->expect_object();
    for (const auto& [name, cost] : v->members()) {
      const std::optional<FabricLevel> level = parse_level(name);
      const auto allowed = levels_of(hw);
      if (!level || std::find(allowed.begin(), allowed.end(), *level) == allowed.end())
        cost.fail(fmt::format("unknown level '{}' for {} hardware (known: {}, {})", name, hw.gpu ? "GPU" : "TPU",
                              level_name(allowed[0]), level_name(allowed[1])));
      const auto seconds = [](const Cursor& x) {
        if (x.raw().is_number() && x.raw().get<double>() == 0.0) return kZeroTick;
        return tick_from_seconds(x.as_positive_double(1.0));
      };
      auto& per_kind = hw.fixed_cost[static_cast<std::size_t>(*level)];
      if (cost.raw().is_number()) {
        per_kind.fill(seconds(cost));
        continue;
      }
      if (!cost.raw().is_object())
        cost.fail("expected seconds, or an object of seconds per kind (all_gather, reduce_scatter, all_reduce, "
                  "all_to_all, send), got " + cost.type_name());
      for (const auto& [kind_text, kind_cost] : cost.members()) {
        const std::optional<OpKind> kind = parse_kind(kind_text);
        if (!kind || is_local(*kind))
          kind_cost.fail(fmt::format("unknown kind '{}' (known: all_gather, reduce_scatter, all_reduce, all_to_all, "
                                     "send)", kind_text));
        per_kind[static_cast<std::size_t>(*kind)] = seconds(kind_cost);
      }
    }
  }
  set_peaks(hw);
  apply_link_efficiency(hw);
}

}  // namespace

Hardware parse_hardware(const Cursor& c, const std::string& preset) {
  // A sweep's preset replaces the name, or a value that is not an object.
  if (!preset.empty() && !c.raw().is_object()) return resolve_preset({preset, c.ref()});
  if (c.raw().is_string()) return resolve_preset({c.as_string(), c.ref()});
  if (!c.raw().is_object()) c.fail("expected a preset name like \"tpu-v5e\" or an object, got " + c.type_name());
  Hardware hw = preset.empty() ? resolve_preset(name_at(c.at("preset"))) : resolve_preset({preset, c.ref().child("preset")});
  restore_peaks(hw);  // the keys below give peaks; the efficiencies apply at the end
  if (hw.gpu)
    c.only_keys({"preset", "nvlink_bandwidth_one_way_bytes_per_s", "nvlink_hop_latency_s",
                 "nic_bandwidth_one_way_bytes_per_s", "nic_hop_latency_s", "spine_bandwidth_one_way_bytes_per_s",
                 "spines", "leaf_nodes", "pod_nodes", "leaf_oversubscription", "spine_oversubscription",
                 "forward_chunk_bytes", "bf16_flops_per_s", "int8_ops_per_s", "fp8_flops_per_s",
                 "fp32_flops_per_s", "hbm_bytes", "hbm_bandwidth_bytes_per_s", "matmul_efficiency",
                 "nvlink_efficiency", "nic_efficiency", "nvls_efficiency", "collective_fixed_cost_s"});
  else
    c.only_keys({"preset", "ici_bandwidth_one_way_bytes_per_s", "hop_latency_s", "dcn_bandwidth_one_way_bytes_per_s",
                 "dcn_hop_latency_s", "forward_chunk_bytes",
                 "bf16_flops_per_s", "int8_ops_per_s", "fp8_flops_per_s", "fp32_flops_per_s", "hbm_bytes",
                 "hbm_bandwidth_bytes_per_s", "matmul_efficiency", "ici_efficiency", "dcn_efficiency",
                 "collective_fixed_cost_s"});
  set_link(hw.ici, c, "ici_bandwidth_one_way_bytes_per_s", "hop_latency_s");
  set_link(hw.dcn, c, "dcn_bandwidth_one_way_bytes_per_s", "dcn_hop_latency_s");
  set_link(hw.nvlink, c, "nvlink_bandwidth_one_way_bytes_per_s", "nvlink_hop_latency_s");
  set_link(hw.nic, c, "nic_bandwidth_one_way_bytes_per_s", "nic_hop_latency_s");
  set_link(hw.spine, c, "spine_bandwidth_one_way_bytes_per_s", "nic_hop_latency_s");
  if (c.has("spine_bandwidth_one_way_bytes_per_s")) hw.spine_full_bisection = false;
  if (auto v = c.find("spines")) hw.spines = static_cast<int>(v->as_int_in(1, 1024));
  if (auto v = c.find("leaf_nodes")) hw.leaf_nodes = static_cast<int>(v->as_int_in(1, kMaxChips));
  if (auto v = c.find("pod_nodes")) {
    hw.pod_nodes = static_cast<int>(v->as_int_in(1, kMaxChips));
    if (hw.leaf_nodes == 0) v->fail("a pod is made of leaf units: give leaf_nodes too");
    if (hw.pod_nodes % hw.leaf_nodes != 0)
      v->fail(fmt::format("{} nodes per pod is not a whole number of units of {} nodes (leaf_nodes)", hw.pod_nodes,
                          hw.leaf_nodes));
  }
  const auto oversubscription = [](const Cursor& v) {
    const double o = v.as_positive_double(1024);
    if (o < 1) v.fail(fmt::format("an oversubscription is down / up bandwidth, at least 1 (got {})", o));
    return o;
  };
  if (auto v = c.find("leaf_oversubscription")) {
    hw.leaf_oversubscription = oversubscription(*v);
    if (!hw.spine_full_bisection)
      v->fail("give the leaves' uplinks either by spine_bandwidth_one_way_bytes_per_s or by their oversubscription, "
              "not both");
  }
  if (auto v = c.find("spine_oversubscription")) {
    hw.spine_oversubscription = oversubscription(*v);
    if (hw.pod_nodes == 0) v->fail("spines are oversubscribed towards a core tier: give pod_nodes too");
  }
  if (auto v = c.find("forward_chunk_bytes")) hw.forward_chunk_bytes = v->as_positive_u64(std::uint64_t{1} << 40);
  if (auto v = c.find("nvls_efficiency")) {  // 0: switches without NVLink SHARP
    if (!v->raw().is_number()) v->fail("expected a number, got " + v->type_name());
    hw.nvls_efficiency = v->raw().get<double>();
    if (!(hw.nvls_efficiency >= 0 && hw.nvls_efficiency <= 1))
      v->fail(fmt::format("NVLS's efficiency is a fraction of the NVLink rate, from 0 (no NVLink SHARP) to 1 (got {})",
                          hw.nvls_efficiency));
  }
  if (auto v = c.find("bf16_flops_per_s")) hw.chip.bf16_flops_per_s = v->as_positive_double(1e20);
  if (auto v = c.find("int8_ops_per_s")) hw.chip.int8_ops_per_s = v->as_positive_double(1e20);
  if (auto v = c.find("fp8_flops_per_s")) hw.chip.fp8_flops_per_s = v->as_positive_double(1e20);
  if (auto v = c.find("fp32_flops_per_s")) hw.chip.fp32_flops_per_s = v->as_positive_double(1e20);
  if (auto v = c.find("matmul_efficiency")) hw.matmul_efficiency = v->as_positive_double(1.0);
  if (auto v = c.find("hbm_bytes")) hw.chip.hbm_bytes = v->as_positive_u64();
  if (auto v = c.find("hbm_bandwidth_bytes_per_s")) hw.chip.hbm_bandwidth_bytes_per_s = v->as_positive_double(1e16);
  parse_calibration_terms(hw, c);
  return hw;
}

// ---------------------------------------------------------------- topology and mesh

// "mesh": axes in file order, their names checked by the builder.
MeshSpec read_mesh(const Cursor& mesh) {
  mesh.expect_object();
  MeshSpec spec;
  spec.where = mesh.ref();
  for (const auto& [name, value] : mesh.members())
    spec.axes.push_back({name, static_cast<int>(value.as_int_in(1, kMaxChips)), value.ref()});
  return spec;
}

// "topology": a TPU slice's shape, wraparound, twist and slices, or a GPU
// cluster's nodes.
TopologySpec read_topology(const std::optional<Cursor>& topo, const Hardware& hw) {
  TopologySpec spec;
  if (!topo) return spec;
  spec.given = true;
  spec.where = topo->ref();
  if (hw.gpu) {
    topo->only_keys({"nodes"});
    const Cursor n = topo->at("nodes");
    spec.nodes_at = n.ref();
    spec.node_grid = n.raw().is_array();
    if (spec.node_grid)
      for (const Cursor& e : n.elements()) spec.nodes.push_back(static_cast<int>(e.as_int_in(1, kMaxAxisSize)));
    else
      spec.nodes.push_back(static_cast<int>(n.as_int_in(1, kMaxChips)));
    return spec;
  }
  topo->only_keys({"shape", "wraparound", "twisted", "slices"});
  const Cursor sh = topo->at("shape");
  spec.shape_at = sh.ref();
  for (const Cursor& e : sh.elements()) spec.shape.push_back(static_cast<int>(e.as_int_in(1, kMaxAxisSize)));
  if (auto sc = topo->find("slices")) {
    spec.slices = static_cast<int>(sc->as_int_in(1, kMaxAxisSize));
    spec.slices_at = sc->ref();
  }
  if (auto wc = topo->find("wraparound")) {
    spec.wraparound_at = wc->ref();
    if (wc->raw().is_boolean()) {
      spec.wraparound = std::vector<bool>(spec.shape.size(), wc->as_bool());
    } else {
      spec.wraparound.emplace();
      for (const Cursor& e : wc->elements()) spec.wraparound->push_back(e.as_bool());
    }
  }
  if (auto tc = topo->find("twisted")) {
    spec.twisted = tc->as_bool();
    spec.twisted_at = tc->ref();
  }
  return spec;
}

namespace {

// ---------------------------------------------------------------- arrays and ops

std::optional<NameRef> optional_name(const Cursor& c, std::string_view key) {
  if (auto v = c.find(key)) return name_at(*v);
  return std::nullopt;
}

ArraySpec read_array(const std::string& name, const Cursor& c) {
  c.only_keys({"shape", "dtype", "sharding"});
  ArraySpec a;
  a.name = name;
  a.where = c.ref();
  const Cursor shape = c.at("shape");
  a.shape_at = shape.ref();
  for (const auto& [dim, size] : shape.members())
    a.shape.push_back({dim, size.as_positive_u64(std::uint64_t{1} << 40), size.ref()});
  a.dtype = name_at(c.at("dtype"));
  a.sharding = optional_name(c, "sharding");
  return a;
}

SendSpec::Chip read_chip(const Cursor& c) {
  SendSpec::Chip chip;
  chip.where = c.ref();
  for (const Cursor& e : c.elements()) {
    chip.coordinates.push_back(e.as_int());
    chip.coordinate_at.push_back(e.ref());
  }
  return chip;
}

SendSpec read_send(const Cursor& c) {
  c.only_keys({"name", "kind", "after", "bytes", "from", "to"});
  SendSpec s;
  const Cursor bytes = c.at("bytes");
  s.bytes = bytes.as_positive_u64();
  s.bytes_at = bytes.ref();
  s.from = read_chip(c.at("from"));
  s.to = read_chip(c.at("to"));
  return s;
}

CollectiveSpec read_collective(const Cursor& c, OpKind kind) {
  if (kind == OpKind::ReduceScatter || kind == OpKind::AllToAll)
    c.only_keys({"name", "kind", "after", "axes", "array", "bytes", "dim", "out", "algorithm", "protocol"});
  else
    c.only_keys({"name", "kind", "after", "axes", "array", "bytes", "out", "algorithm", "protocol"});
  CollectiveSpec s;
  s.kind = kind;
  s.protocol = optional_name(c, "protocol");
  s.algorithm = optional_name(c, "algorithm");
  const Cursor axes = c.at("axes");
  s.axes_at = axes.ref();
  for (const Cursor& e : axes.elements()) s.axes.push_back(name_at(e));
  s.array = optional_name(c, "array");
  if (auto b = c.find("bytes")) {
    s.bytes = b->as_positive_u64();
    s.bytes_at = b->ref();
  }
  s.dim = optional_name(c, "dim");
  s.out = optional_name(c, "out");
  return s;
}

MatmulOpSpec read_matmul(const Cursor& c) {
  c.only_keys({"name", "kind", "after", "a", "b", "out", "out_sharding"});
  return {name_at(c.at("a")), name_at(c.at("b")), name_at(c.at("out")), optional_name(c, "out_sharding")};
}

MlpSpec read_mlp(const Cursor& c) {
  c.only_keys({"name", "kind", "after", "x", "w1", "w2", "out", "variant", "repeat"});
  MlpSpec m;
  m.x = name_at(c.at("x"));
  m.w1 = name_at(c.at("w1"));
  m.w2 = name_at(c.at("w2"));
  m.out = name_at(c.at("out"));
  m.variant = optional_name(c, "variant");
  if (auto r = c.find("repeat")) {
    m.repeat = r->as_int();
    m.repeat_at = r->ref();
  }
  return m;
}

OpSpec read_op(const Cursor& c) {
  c.expect_object();
  OpSpec op;
  op.where = c.ref();
  const Cursor kind_c = c.at("kind");
  const std::string kind = kind_c.as_string();
  if (auto n = c.find("name")) op.name = NameRef{n->as_identifier(), n->ref()};
  if (auto a = c.find("after"))
    for (const Cursor& e : a->elements()) op.after.push_back(name_at(e));
  if (kind == "matmul") {
    op.what = read_matmul(c);
  } else if (kind == "mlp") {
    op.what = read_mlp(c);
  } else {
    const auto k = parse_kind(kind);
    if (!k || is_local(*k))
      kind_c.fail(fmt::format("unknown op kind '{}' (known: all_gather, reduce_scatter, all_reduce, all_to_all, send, "
                              "matmul, mlp)",
                              kind));
    if (*k == OpKind::Send)
      op.what = read_send(c);
    else
      op.what = read_collective(c, *k);
  }
  return op;
}

// "arrays" and "ops" of a workload written as ops.
OpsSpec read_ops(const Cursor& root) {
  OpsSpec spec;
  if (auto arrays = root.find("arrays"))
    for (const auto& [name, value] : arrays->members()) spec.arrays.push_back(read_array(name, value));
  const Cursor ops = root.at("ops");
  spec.ops_at = ops.ref();
  for (const Cursor& op : ops.elements()) spec.ops.push_back(read_op(op));
  return spec;
}

}  // namespace

WorkloadSpec read_workload_spec(std::string_view text, const std::string& file, const std::string& preset) {
  const Json json = parse_json(text, file);
  const Cursor root(json, "", file);
  root.only_keys({"hardware", "topology", "mesh", "arrays", "ops", "training"});
  WorkloadSpec spec;
  spec.file = file;
  spec.hardware = parse_hardware(root.at("hardware"), preset);
  const std::optional<Cursor> topo = root.find("topology");
  spec.mesh = read_mesh(root.at("mesh"));
  spec.topology = read_topology(topo, spec.hardware);
  if (auto training = root.find("training")) {
    // A training step is lowered from the model and the plan, not written as ops.
    for (const char* key : {"arrays", "ops"})
      if (auto other = root.find(key))
        other->fail(fmt::format("\"{}\" cannot be given with \"training\" (a training step lowers its own ops)", key));
    spec.training = read_training(*training);
  } else {
    spec.ops = read_ops(root);
  }
  return spec;
}

Workload parse_workload(std::string_view text, const std::string& file) {
  return build_workload(read_workload_spec(text, file));
}

std::string edit_workload_json(std::string_view text, const std::string& file, const WorkloadEdits& edits) {
  Json doc = parse_json(text, file);
  if (!edits.preset.empty()) {
    Json& hw = doc.at("hardware");
    if (hw.is_object())
      hw["preset"] = edits.preset;
    else
      hw = edits.preset;
  }
  if (!edits.mesh.empty()) {
    std::size_t i = 0;
    for (auto& [name, size] : doc.at("mesh").items()) size = edits.mesh.at(i++);
    doc.erase("topology");  // the shape follows the mesh (docs/WORKLOAD.md, `topology`)
  }
  for (Json& op : doc.at("ops")) {
    const std::optional<OpKind> kind =
        op.contains("kind") && op.at("kind").is_string() ? parse_kind(op.at("kind").get<std::string>()) : std::nullopt;
    if (!edits.algorithm.empty() && kind && algorithm_fits(edits.algorithm, *kind)) {
      if (edits.algorithm == "auto")
        op.erase("algorithm");
      else
        op["algorithm"] = edits.algorithm;
    }
    if (edits.bytes && op.contains("bytes")) op["bytes"] = *edits.bytes;
  }
  return doc.dump(2) + "\n";
}

std::string collective_workload_json(const std::string& preset, const std::vector<int>& mesh,
                                     const std::string& kind, const std::vector<std::string>& axes,
                                     std::uint64_t bytes) {
  Json m = Json::object();
  for (std::size_t i = 0; i < mesh.size(); ++i) m[std::string(1, static_cast<char>('X' + i))] = mesh[i];
  Json op = {{"name", kind}, {"kind", kind}, {"bytes", bytes}};
  op["axes"] = Json::array();
  if (!axes.empty())
    for (const std::string& a : axes) op["axes"].push_back(a);
  else
    for (const auto& [name, size] : m.items()) op["axes"].push_back(name);
  const Json doc = {{"hardware", preset}, {"mesh", m}, {"ops", Json::array({op})}};
  return doc.dump(2) + "\n";
}

Workload load_workload(const std::string& path) { return parse_workload(read_text_file(path, "workload file"), path); }

}  // namespace meshsim::workloads
