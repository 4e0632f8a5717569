#include "workloads/workload.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "base/error.hpp"
#include "workloads/json_cursor.hpp"
#include "workloads/sharding.hpp"

namespace meshsim::workloads {

using topology::AxisSpec;

std::uint64_t Array::bytes() const {
  std::uint64_t b = element_bytes;
  for (std::uint64_t s : sizes) b *= s;
  return b;
}

topology::Torus Workload::make_torus() const { return topology::Torus(topology, hardware.ici); }

namespace {

constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 62;

struct DType {
  std::string_view name;
  std::uint64_t bytes;
};
constexpr DType kDTypes[] = {{"bf16", 2}, {"fp16", 2}, {"fp32", 4}, {"int8", 1}, {"fp8", 1}, {"int32", 4}};

// ---------------------------------------------------------------- hardware

Hardware parse_hardware(const Cursor& c) {
  if (c.raw().is_string()) {
    const std::string name = c.as_string();
    const topology::Preset* p = topology::find_preset(name);
    if (!p) c.fail(fmt::format("unknown preset '{}' (known: {})", name, topology::preset_names()));
    return Hardware{std::string(p->name), p->chip, p->ici, p->forward_chunk_bytes};
  }
  if (!c.raw().is_object()) c.fail("expected a preset name like \"tpu-v5e\" or an object, got " + c.type_name());
  c.only_keys({"preset", "ici_bandwidth_one_way_bytes_per_s", "hop_latency_s", "forward_chunk_bytes",
               "bf16_flops_per_s", "int8_ops_per_s", "hbm_bytes", "hbm_bandwidth_bytes_per_s"});
  const Cursor preset = c.at("preset");
  const std::string name = preset.as_string();
  const topology::Preset* p = topology::find_preset(name);
  if (!p) preset.fail(fmt::format("unknown preset '{}' (known: {})", name, topology::preset_names()));
  Hardware hw{std::string(p->name), p->chip, p->ici, p->forward_chunk_bytes};
  if (auto v = c.find("ici_bandwidth_one_way_bytes_per_s"))
    hw.ici.bandwidth_bytes_per_s = static_cast<std::uint64_t>(std::llround(v->as_positive_double(1e15)));
  if (hw.ici.bandwidth_bytes_per_s == 0) c.at("ici_bandwidth_one_way_bytes_per_s").fail("bandwidth rounds to 0 bytes/s");
  if (auto v = c.find("hop_latency_s")) {
    if (v->raw().is_number() && v->raw().get<double>() == 0.0)
      hw.ici.latency = kZeroTick;
    else
      hw.ici.latency = tick_from_seconds(v->as_positive_double(1.0));
  }
  if (auto v = c.find("forward_chunk_bytes")) hw.forward_chunk_bytes = v->as_positive_u64(std::uint64_t{1} << 40);
  if (auto v = c.find("bf16_flops_per_s")) hw.chip.bf16_flops_per_s = v->as_positive_double(1e20);
  if (auto v = c.find("int8_ops_per_s")) hw.chip.int8_ops_per_s = v->as_positive_double(1e20);
  if (auto v = c.find("hbm_bytes")) hw.chip.hbm_bytes = v->as_positive_u64();
  if (auto v = c.find("hbm_bandwidth_bytes_per_s")) hw.chip.hbm_bandwidth_bytes_per_s = v->as_positive_double(1e16);
  return hw;
}

// ---------------------------------------------------------------- topology and mesh

struct MeshInput {
  std::string name;
  int size;
  Cursor where;
};

void parse_topology_and_mesh(const Cursor& root, const topology::Preset& preset, Workload& w) {
  const std::optional<Cursor> topo = root.find("topology");
  const Cursor mesh = root.at("mesh");
  mesh.expect_object();
  std::vector<MeshInput> axes;
  for (const auto& [name, value] : mesh.members()) {
    bool ok = !name.empty() && std::isalpha(static_cast<unsigned char>(name[0]));
    for (char ch : name) ok = ok && std::isalnum(static_cast<unsigned char>(ch));
    if (!ok) value.fail(fmt::format("mesh axis name '{}' must be a letter followed by letters or digits", name));
    axes.push_back({name, static_cast<int>(value.as_int_in(1, kMaxAxisSize)), value});
  }
  if (axes.empty()) mesh.fail("expected at least one mesh axis, e.g. {\"X\": 16}");

  std::vector<int> shape;
  if (topo) {
    topo->only_keys({"shape", "wraparound"});
    const Cursor sh = topo->at("shape");
    for (const Cursor& e : sh.elements()) shape.push_back(static_cast<int>(e.as_int_in(1, kMaxAxisSize)));
    if (shape.empty()) sh.fail("expected at least one axis");
    if (static_cast<int>(shape.size()) > preset.max_axes)
      sh.fail(fmt::format("{} has a {}D interconnect; got {} axes", preset.name, preset.max_axes, shape.size()));
  } else {
    for (const MeshInput& m : axes) shape.push_back(m.size);
    if (static_cast<int>(shape.size()) > preset.max_axes)
      mesh.fail(fmt::format("{} has a {}D interconnect; got {} mesh axes (give \"topology\" to map them)", preset.name,
                            preset.max_axes, shape.size()));
  }
  std::uint64_t chips = 1;
  for (int s : shape) chips *= static_cast<std::uint64_t>(s);
  if (chips > kMaxChips)
    (topo ? topo->at("shape") : mesh).fail(fmt::format("{} chips is more than meshsim supports ({})", chips, kMaxChips));

  std::vector<bool> wrap = topology::default_wraparound(preset.wrap_rule, shape);
  if (topo) {
    if (auto wc = topo->find("wraparound")) {
      if (wc->raw().is_boolean()) {
        std::fill(wrap.begin(), wrap.end(), wc->as_bool());
      } else {
        const auto els = wc->elements();
        if (els.size() != shape.size())
          wc->fail(fmt::format("expected {} values (one per axis of the shape), got {}", shape.size(), els.size()));
        for (std::size_t i = 0; i < els.size(); ++i) wrap[i] = els[i].as_bool();
      }
    }
  }
  for (std::size_t a = 0; a < shape.size(); ++a) w.topology.push_back(AxisSpec{shape[a], wrap[a] && shape[a] > 1});

  // Map mesh axes onto consecutive hardware axes.
  std::size_t hw = 0;
  for (const MeshInput& m : axes) {
    MeshAxis axis{m.name, m.size, {}};
    std::uint64_t product = 1;
    while (product < static_cast<std::uint64_t>(m.size) && hw < shape.size()) {
      product *= static_cast<std::uint64_t>(shape[hw]);
      axis.hw_axes.push_back(static_cast<int>(hw++));
    }
    if (product < static_cast<std::uint64_t>(m.size) && hw == shape.size())
      m.where.fail(
          fmt::format("the mesh has more chips than the topology {} ({} chips); no hardware axes are left for mesh "
                      "axis {} of size {}",
                      w.make_torus().shape_string(), chips, m.name, m.size));
    if (product != static_cast<std::uint64_t>(m.size))
      m.where.fail(fmt::format("mesh axis {} of size {} does not cover whole hardware axes of the {} topology", m.name,
                               m.size, w.make_torus().shape_string()));
    w.mesh.push_back(std::move(axis));
  }
  std::uint64_t mesh_chips = 1;  // here at most `chips`: every mesh axis covers whole hardware axes
  for (const MeshInput& m : axes) mesh_chips *= static_cast<std::uint64_t>(m.size);
  for (; hw < shape.size(); ++hw)
    if (shape[hw] != 1)
      mesh.fail(fmt::format(
          "the mesh has {} chips but the topology {} has {}; no mesh axis is left for hardware "
          "axis {} of size {}",
          mesh_chips, w.make_torus().shape_string(), chips, w.make_torus().axis_name(static_cast<int>(hw)), shape[hw]));
}

// Array names are used in sharding strings ("A[I_X]"): a letter, then letters,
// digits or '_'.
void check_array_name(const std::string& name, const Cursor& where) {
  bool ok = !name.empty() && std::isalpha(static_cast<unsigned char>(name[0]));
  for (char ch : name) ok = ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_');
  if (!ok) where.fail(fmt::format("array name '{}' must be a letter followed by letters, digits or '_'", name));
}

int mesh_axis_index(const Workload& w, const std::string& name) {
  for (std::size_t i = 0; i < w.mesh.size(); ++i)
    if (w.mesh[i].name == name) return static_cast<int>(i);
  return -1;
}

std::string known_axes(const Workload& w) {
  std::string s;
  for (const MeshAxis& m : w.mesh) {
    if (!s.empty()) s += ", ";
    s += m.name;
  }
  return s;
}

std::uint64_t axes_product(const Workload& w, const std::vector<int>& axes) {
  std::uint64_t p = 1;
  for (int a : axes) p *= static_cast<std::uint64_t>(w.mesh[static_cast<std::size_t>(a)].size);
  return p;
}

std::vector<std::string> axis_names(const Workload& w, const std::vector<int>& axes) {
  std::vector<std::string> out;
  for (int a : axes) out.push_back(w.mesh[static_cast<std::size_t>(a)].name);
  return out;
}

std::string sharding_string(const Workload& w, const Array& a) {
  std::vector<std::vector<std::string>> names;
  for (const auto& axes : a.shard_axes) names.push_back(axis_names(w, axes));
  return format_sharding(a.name, a.dims, names);
}

// Checks the rule "one mesh axis shards at most one dim" and divisibility.
void check_layout(const Workload& w, const Array& a, const Cursor& where) {
  std::vector<int> used_by(w.mesh.size(), -1);
  for (std::size_t d = 0; d < a.dims.size(); ++d) {
    for (int axis : a.shard_axes[d]) {
      const auto ax = static_cast<std::size_t>(axis);
      if (used_by[ax] == static_cast<int>(d))
        where.fail(fmt::format("mesh axis {} appears twice in the subscript of {}", w.mesh[ax].name, a.dims[d]));
      if (used_by[ax] >= 0)
        where.fail(fmt::format("mesh axis {} shards both {} and {} of {}; an axis can shard only one dimension",
                               w.mesh[ax].name, a.dims[static_cast<std::size_t>(used_by[ax])], a.dims[d], a.name));
      used_by[ax] = static_cast<int>(d);
    }
    const std::uint64_t parts = axes_product(w, a.shard_axes[d]);
    if (a.sizes[d] % parts != 0)
      where.fail(fmt::format("dimension {} of {} ({}) is not divisible by its mesh axes {} ({} shards)", a.dims[d],
                             a.name, a.sizes[d], fmt::join(axis_names(w, a.shard_axes[d]), ""), parts));
  }
}

// ---------------------------------------------------------------- arrays

Array parse_array(const Workload& w, const std::string& name, const Cursor& c) {
  c.only_keys({"shape", "dtype", "sharding"});
  Array a;
  a.name = name;
  const Cursor shape = c.at("shape");
  for (const auto& [dim, size] : shape.members()) {
    bool ok = !dim.empty() && std::isalpha(static_cast<unsigned char>(dim[0]));
    for (char ch : dim) ok = ok && std::isalnum(static_cast<unsigned char>(ch));
    if (!ok) size.fail(fmt::format("dimension name '{}' must be a letter followed by letters or digits", dim));
    a.dims.push_back(dim);
    a.sizes.push_back(size.as_positive_u64(std::uint64_t{1} << 40));
  }
  if (a.dims.empty()) shape.fail("expected at least one dimension, e.g. {\"I\": 1024}");

  const Cursor dt = c.at("dtype");
  const std::string dtype = dt.as_string();
  for (const DType& d : kDTypes)
    if (d.name == dtype) a.element_bytes = d.bytes;
  if (a.element_bytes == 0) dt.fail(fmt::format("unknown dtype '{}' (known: bf16, fp16, fp32, int8, fp8, int32)", dtype));
  a.dtype = dtype;

  unsigned __int128 bytes = a.element_bytes;
  for (std::uint64_t s : a.sizes) {
    bytes *= s;
    if (bytes > kMaxBytes) shape.fail(fmt::format("array {} is larger than 2^62 bytes", name));
  }

  a.shard_axes.assign(a.dims.size(), {});
  if (auto sc = c.find("sharding")) {
    std::string error;
    const std::string text = sc->as_string();
    const auto parsed = parse_sharding(text, error);
    if (!parsed) sc->fail(error);
    if (!parsed->array.empty() && parsed->array != name)
      sc->fail(fmt::format("sharding names array '{}' but it belongs to '{}'", parsed->array, name));
    std::vector<std::string> dims;
    for (const ShardedDim& d : parsed->dims) dims.push_back(d.dim);
    if (dims != a.dims)
      sc->fail(fmt::format("sharding dimensions [{}] do not match the shape's [{}]", fmt::join(dims, ", "),
                           fmt::join(a.dims, ", ")));
    std::vector<std::string> names;
    for (const MeshAxis& m : w.mesh) names.push_back(m.name);
    for (std::size_t d = 0; d < parsed->dims.size(); ++d) {
      const auto split = split_subscript(parsed->dims[d].subscript, names, error);
      if (!split) sc->fail(error + " (mesh axes: " + known_axes(w) + ")");
      for (const std::string& axis : *split) a.shard_axes[d].push_back(mesh_axis_index(w, axis));
    }
    check_layout(w, a, *sc);
  }
  return a;
}

// ---------------------------------------------------------------- ops

std::vector<int> parse_axes(const Workload& w, const Cursor& c) {
  std::vector<int> out;
  for (const Cursor& e : c.elements()) {
    const std::string name = e.as_string();
    const int idx = mesh_axis_index(w, name);
    if (idx < 0) e.fail(fmt::format("unknown mesh axis '{}' (mesh axes: {})", name, known_axes(w)));
    if (std::find(out.begin(), out.end(), idx) != out.end()) e.fail(fmt::format("mesh axis {} listed twice", name));
    out.push_back(idx);
  }
  if (out.empty()) c.fail("expected at least one mesh axis");
  return out;
}

topology::ChipId parse_chip(const Workload& w, const Cursor& c) {
  const auto els = c.elements();
  if (els.size() != w.topology.size())
    c.fail(fmt::format("expected {} hardware coordinates, got {}", w.topology.size(), els.size()));
  std::vector<int> coords;
  for (std::size_t a = 0; a < els.size(); ++a)
    coords.push_back(static_cast<int>(els[a].as_int_in(0, w.topology[a].size - 1)));
  return w.make_torus().chip(coords);
}

int dim_index(const Array& a, const std::string& dim) {
  for (std::size_t d = 0; d < a.dims.size(); ++d)
    if (a.dims[d] == dim) return static_cast<int>(d);
  return -1;
}

class OpParser {
 public:
  explicit OpParser(Workload& w) : w_(w) {}

  void parse(const Cursor& ops) {
    const auto list = ops.elements();
    if (list.empty()) ops.fail("expected at least one op");
    for (std::size_t i = 0; i < list.size(); ++i) w_.ops.push_back(parse_op(list[i], i));
  }

 private:
  Op parse_op(const Cursor& c, std::size_t index) {
    c.expect_object();
    Op op;
    op.pointer = c.pointer();
    const Cursor kind_c = c.at("kind");
    const std::string kind = kind_c.as_string();
    const auto k = parse_kind(kind);
    if (!k)
      kind_c.fail(fmt::format("unknown op kind '{}' (known: all_gather, reduce_scatter, all_reduce, all_to_all, send)",
                              kind));
    op.kind = *k;
    if (op.kind == CollectiveKind::Send)
      c.only_keys({"name", "kind", "after", "bytes", "from", "to"});
    else if (op.kind == CollectiveKind::ReduceScatter || op.kind == CollectiveKind::AllToAll)
      c.only_keys({"name", "kind", "after", "axes", "array", "bytes", "dim", "out"});
    else
      c.only_keys({"name", "kind", "after", "axes", "array", "bytes", "out"});

    if (auto n = c.find("name")) {
      op.name = n->as_identifier();
      if (names_.count(op.name)) n->fail(fmt::format("op name '{}' is already used by op {}", op.name, names_[op.name]));
    } else {
      op.name = fmt::format("{}#{}", kind, index);
    }
    names_[op.name] = static_cast<std::uint32_t>(index);

    if (auto after = c.find("after")) {
      for (const Cursor& e : after->elements()) {
        const std::string dep = e.as_string();
        const auto it = names_.find(dep);
        if (it == names_.end() || it->second == index)
          e.fail(fmt::format("'{}' is not the name of an earlier op", dep));
        add_dep(op, it->second);
      }
    }

    if (op.kind == CollectiveKind::Send) {
      op.bytes = c.at("bytes").as_positive_u64();
      op.src = parse_chip(w_, c.at("from"));
      op.dst = parse_chip(w_, c.at("to"));
      if (op.src == op.dst) c.at("to").fail("a send needs two different chips");
      return op;
    }

    op.mesh_axes = parse_axes(w_, c.at("axes"));
    for (int a : op.mesh_axes)
      for (int hw : w_.mesh[static_cast<std::size_t>(a)].hw_axes)
        if (w_.topology[static_cast<std::size_t>(hw)].size > 1) op.hw_axes.push_back(hw);

    const bool has_array = c.has("array"), has_bytes = c.has("bytes");
    if (has_array == has_bytes) c.fail("give exactly one of 'array' (a declared array) or 'bytes' (V, in bytes)");
    if (has_bytes) {
      if (c.has("out")) c.at("out").fail("'out' names a result array; it needs 'array'");
      if (c.has("dim")) c.at("dim").fail("'dim' needs 'array'");
      op.bytes = c.at("bytes").as_positive_u64();
      return op;
    }
    lower_array_op(c, op);
    return op;
  }

  void add_dep(Op& op, std::uint32_t dep) {
    if (std::find(op.deps.begin(), op.deps.end(), dep) == op.deps.end()) op.deps.push_back(dep);
  }

  // Resolves the input array, checks the collective against its sharding, and
  // records the result's sharding.
  void lower_array_op(const Cursor& c, Op& op) {
    const Cursor array_c = c.at("array");
    op.array = array_c.as_string();
    const auto it = arrays_.find(op.array);
    if (it == arrays_.end()) array_c.fail(fmt::format("unknown array '{}'", op.array));
    Array a = w_.arrays[it->second];
    if (auto producer = producers_.find(op.array); producer != producers_.end()) add_dep(op, producer->second);
    op.sharding_before = sharding_string(w_, a);

    // Where each requested axis currently shards the array (-1: nowhere).
    std::vector<int> dim_of(op.mesh_axes.size(), -1);
    for (std::size_t i = 0; i < op.mesh_axes.size(); ++i)
      for (std::size_t d = 0; d < a.dims.size(); ++d)
        for (int axis : a.shard_axes[d])
          if (axis == op.mesh_axes[i]) dim_of[i] = static_cast<int>(d);

    std::uint64_t other_shards = 1;  // shards on axes outside the collective
    for (const auto& axes : a.shard_axes)
      for (int axis : axes)
        if (std::find(op.mesh_axes.begin(), op.mesh_axes.end(), axis) == op.mesh_axes.end())
          other_shards *= static_cast<std::uint64_t>(w_.mesh[static_cast<std::size_t>(axis)].size);
    op.bytes = a.bytes() / other_shards;

    auto strip = [&](Array& arr) {
      for (auto& axes : arr.shard_axes)
        std::erase_if(axes, [&](int x) { return std::find(op.mesh_axes.begin(), op.mesh_axes.end(), x) != op.mesh_axes.end(); });
    };
    const Cursor& axes_c = c;  // errors about axes point at the op's "axes"
    switch (op.kind) {
      case CollectiveKind::AllGather:
        for (std::size_t i = 0; i < dim_of.size(); ++i)
          if (dim_of[i] < 0)
            axes_c.at("axes").fail(fmt::format("{} is not sharded on mesh axis {}; nothing to gather",
                                               op.sharding_before, w_.mesh[static_cast<std::size_t>(op.mesh_axes[i])].name));
        strip(a);
        break;
      case CollectiveKind::AllReduce:
        for (std::size_t i = 0; i < dim_of.size(); ++i)
          if (dim_of[i] >= 0)
            axes_c.at("axes").fail(fmt::format(
                "{} is sharded on mesh axis {}; an all_reduce sums partial results over axes the array is not split on",
                op.sharding_before, w_.mesh[static_cast<std::size_t>(op.mesh_axes[i])].name));
        break;
      case CollectiveKind::ReduceScatter:
      case CollectiveKind::AllToAll: {
        const Cursor dim_c = c.at("dim");
        const std::string dim = dim_c.as_string();
        const int d = dim_index(a, dim);
        if (d < 0) dim_c.fail(fmt::format("{} has no dimension '{}'", op.sharding_before, dim));
        if (op.kind == CollectiveKind::ReduceScatter) {
          for (std::size_t i = 0; i < dim_of.size(); ++i)
            if (dim_of[i] >= 0)
              axes_c.at("axes").fail(fmt::format("{} is already sharded on mesh axis {}; reduce_scatter needs the full "
                                                 "(partial-sum) array on the axes it scatters over",
                                                 op.sharding_before,
                                                 w_.mesh[static_cast<std::size_t>(op.mesh_axes[i])].name));
        } else {
          for (std::size_t i = 0; i < dim_of.size(); ++i) {
            const std::string& axis_name = w_.mesh[static_cast<std::size_t>(op.mesh_axes[i])].name;
            if (dim_of[i] < 0)
              axes_c.at("axes").fail(fmt::format("{} is not sharded on mesh axis {}; all_to_all moves an existing "
                                                 "split to another dimension",
                                                 op.sharding_before, axis_name));
            if (dim_of[i] != dim_of[0])
              axes_c.at("axes").fail(fmt::format(
                  "all_to_all axes must shard one dimension, but in {} mesh axis {} shards {} and {} shards {}",
                  op.sharding_before, w_.mesh[static_cast<std::size_t>(op.mesh_axes[0])].name,
                  a.dims[static_cast<std::size_t>(dim_of[0])], axis_name, a.dims[static_cast<std::size_t>(dim_of[i])]));
            if (dim_of[i] == d)
              dim_c.fail(fmt::format("{} is already split on {} along {}", op.sharding_before, axis_name, dim));
          }
          strip(a);
        }
        for (int axis : op.mesh_axes) a.shard_axes[static_cast<std::size_t>(d)].push_back(axis);
        break;
      }
      case CollectiveKind::Send:
        break;
    }
    std::string result = op.array;
    if (auto out = c.find("out")) {
      result = out->as_string();
      check_array_name(result, *out);
      if (arrays_.count(result)) out->fail(fmt::format("array '{}' already exists", result));
    }
    a.name = result;
    check_layout(w_, a, c.has("dim") ? c.at("dim") : c.at("axes"));
    op.sharding_after = sharding_string(w_, a);
    if (result == op.array) {
      w_.arrays[it->second] = std::move(a);
    } else {
      arrays_[result] = w_.arrays.size();
      w_.arrays.push_back(std::move(a));
    }
    producers_[result] = static_cast<std::uint32_t>(w_.ops.size());
  }

 public:
  std::map<std::string, std::size_t> arrays_;  // name -> index in w_.arrays

 private:
  Workload& w_;
  std::map<std::string, std::uint32_t> names_;      // op name -> index
  std::map<std::string, std::uint32_t> producers_;  // array -> last op that wrote it
};

}  // namespace

Workload parse_workload(std::string_view text, const std::string& file) {
  const Json json = parse_json(text, file);
  const Cursor root(json, "", file);
  root.only_keys({"hardware", "topology", "mesh", "arrays", "ops"});
  Workload w;
  w.file = file;
  const Cursor hw = root.at("hardware");
  w.hardware = parse_hardware(hw);
  const topology::Preset* preset = topology::find_preset(w.hardware.preset);
  parse_topology_and_mesh(root, *preset, w);

  OpParser ops(w);
  if (auto arrays = root.find("arrays")) {
    for (const auto& [name, value] : arrays->members()) {
      check_array_name(name, value);
      ops.arrays_[name] = w.arrays.size();
      w.arrays.push_back(parse_array(w, name, value));
    }
  }
  ops.parse(root.at("ops"));
  return w;
}

Workload load_workload(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open file");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(path + ": cannot read file");
  return parse_workload(ss.str(), path);
}

}  // namespace meshsim::workloads
