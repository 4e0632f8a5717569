// The ops of a workload (spec.hpp, OpsSpec): arrays, names, dependencies, and
// the collectives and sends the user writes directly. Matmuls and layers are in
// lower_matmul.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <variant>

#include "base/error.hpp"
#include "workloads/lowering.hpp"
#include "workloads/sharding.hpp"

namespace meshsim::workloads::detail {

// Array names are used in sharding strings ("A[I_X]"): a letter, then letters,
// digits or '_'.
void check_array_name(const std::string& name, const SourceRef& where) {
  bool ok = !name.empty() && std::isalpha(static_cast<unsigned char>(name[0]));
  for (char ch : name) ok = ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_');
  if (!ok) where.fail(fmt::format("array name '{}' must be a letter followed by letters, digits or '_'", name));
}

void check_positive(std::uint64_t v, std::uint64_t max, const SourceRef& where) {
  if (v == 0) where.fail("expected a positive integer, got 0");
  if (v > max) where.fail(fmt::format("{} is too large (at most {})", v, max));
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
void check_layout(const Workload& w, const Array& a, const SourceRef& where) {
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

std::vector<std::vector<int>> parse_layout(const Workload& w, const std::string& array,
                                           const std::vector<std::string>& dims, const NameRef& sharding) {
  std::string error;
  const SourceRef& sc = sharding.where;
  const auto parsed = parse_sharding(sharding.name, error);
  if (!parsed) sc.fail(error);
  if (!parsed->array.empty() && parsed->array != array)
    sc.fail(fmt::format("sharding names array '{}' but it belongs to '{}'", parsed->array, array));
  std::vector<std::string> written;
  for (const ShardedDim& d : parsed->dims) written.push_back(d.dim);
  if (written != dims)
    sc.fail(fmt::format("sharding dimensions [{}] do not match the shape's [{}]", fmt::join(written, ", "),
                        fmt::join(dims, ", ")));
  std::vector<std::string> names;
  for (const MeshAxis& m : w.mesh) names.push_back(m.name);
  std::vector<std::vector<int>> axes(dims.size());
  for (std::size_t d = 0; d < parsed->dims.size(); ++d) {
    const auto split = split_subscript(parsed->dims[d].subscript, names, error);
    if (!split) sc.fail(error + " (mesh axes: " + known_axes(w) + ")");
    for (const std::string& axis : *split) axes[d].push_back(mesh_axis_index(w, axis));
  }
  return axes;
}

Array lower_array(const Workload& w, const ArraySpec& spec) {
  check_array_name(spec.name, spec.where);
  Array a;
  a.name = spec.name;
  for (const ArraySpec::Dim& d : spec.shape) {
    bool ok = !d.name.empty() && std::isalpha(static_cast<unsigned char>(d.name[0]));
    for (char ch : d.name) ok = ok && std::isalnum(static_cast<unsigned char>(ch));
    if (!ok) d.where.fail(fmt::format("dimension name '{}' must be a letter followed by letters or digits", d.name));
    check_positive(d.size, std::uint64_t{1} << 40, d.where);
    a.dims.push_back(d.name);
    a.sizes.push_back(d.size);
  }
  if (a.dims.empty()) spec.shape_at.fail("expected at least one dimension, e.g. {\"I\": 1024}");

  a.element_bytes = element_size(spec.dtype.name);
  if (a.element_bytes == 0)
    spec.dtype.where.fail(
        fmt::format("unknown dtype '{}' (known: bf16, fp16, fp32, int8, fp8, int32)", spec.dtype.name));
  a.dtype = spec.dtype.name;

  unsigned __int128 bytes = a.element_bytes;
  for (std::uint64_t s : a.sizes) {
    bytes *= s;
    if (bytes > kMaxArrayBytes) spec.shape_at.fail(fmt::format("array {} is larger than 2^62 bytes", spec.name));
  }

  a.shard_axes.assign(a.dims.size(), {});
  if (spec.sharding) {
    a.shard_axes = parse_layout(w, spec.name, a.dims, *spec.sharding);
    check_layout(w, a, spec.sharding->where);
  }
  return a;
}

// ---------------------------------------------------------------- ops

std::vector<int> resolve_axes(const Workload& w, const std::vector<NameRef>& axes, const SourceRef& list_at) {
  std::vector<int> out;
  for (const NameRef& e : axes) {
    const int idx = mesh_axis_index(w, e.name);
    if (idx < 0) e.where.fail(fmt::format("unknown mesh axis '{}' (mesh axes: {})", e.name, known_axes(w)));
    if (std::find(out.begin(), out.end(), idx) != out.end())
      e.where.fail(fmt::format("mesh axis {} listed twice", e.name));
    out.push_back(idx);
  }
  if (out.empty()) list_at.fail("expected at least one mesh axis");
  return out;
}

topology::ChipId resolve_chip(const Workload& w, const SendSpec::Chip& chip) {
  // One coordinate per hardware axis as the topology has them (not as mesh
  // axes split them), first axis fastest.
  const std::vector<std::int64_t>& at = chip.coordinates;
  const std::vector<int>& shape = w.written_shape;
  if (at.size() != shape.size())
    chip.where.fail(fmt::format("expected {} hardware coordinates, got {}", shape.size(), at.size()));
  topology::ChipId id = 0, stride = 1;
  for (std::size_t a = 0; a < at.size(); ++a) {
    const std::int64_t hi = shape[a] - 1;
    if (at[a] < 0 || at[a] > hi)
      chip.coordinate_at[a].fail(fmt::format("expected an integer in [0, {}], got {}", hi, at[a]));
    id += static_cast<topology::ChipId>(at[a]) * stride;
    stride *= static_cast<topology::ChipId>(shape[a]);
  }
  return id;
}

// ---------------------------------------------------------------- lowering

std::uint64_t group_bytes(const Workload& w, const Array& a, const std::vector<int>& axes) {
  std::uint64_t other = 1;
  for (const auto& dim_axes : a.shard_axes)
    for (int axis : dim_axes)
      if (std::find(axes.begin(), axes.end(), axis) == axes.end())
        other *= static_cast<std::uint64_t>(w.mesh[static_cast<std::size_t>(axis)].size);
  return a.bytes() / other;
}

std::uint64_t local_bytes(const Workload& w, const Array& a) { return group_bytes(w, a, {}); }

std::vector<int> hardware_axes(const Workload& w, const std::vector<int>& mesh_axes) {
  std::vector<int> out;
  for (int a : mesh_axes)
    for (int hw : w.mesh[static_cast<std::size_t>(a)].hw_axes)
      if (w.topology[static_cast<std::size_t>(hw)].size > 1) out.push_back(hw);
  return out;
}

const FactorGroups& FactorGroupsCache::get(const Workload& w, const std::vector<int>& mesh_axes,
                                           const std::vector<topology::ChipId>* chips) {
  const auto key = std::pair{mesh_axes, static_cast<const void*>(chips)};
  if (const auto it = built_.find(key); it != built_.end()) return it->second;
  if (coords_.empty()) coords_ = mesh_coordinates(w, w.make_torus());
  FactorGroups out;
  std::uint64_t size = 1;
  for (int a : mesh_axes) {
    const MeshAxis& m = w.mesh[static_cast<std::size_t>(a)];
    for (const AxisFactor& f : m.factors) out.factors.push_back(f.size);
    size *= static_cast<std::uint64_t>(m.size);
  }
  // A group per value of the other mesh axes; a member's place is its
  // coordinates on `mesh_axes` in mixed radix (the listed axis fastest).
  std::map<std::vector<int>, std::vector<topology::ChipId>> groups;
  const auto add = [&](topology::ChipId c) {
    std::vector<int> rest = coords_[c];
    std::uint64_t place = 0, weight = 1;
    for (int a : mesh_axes) {
      const auto i = static_cast<std::size_t>(a);
      place += static_cast<std::uint64_t>(rest[i]) * weight;
      weight *= static_cast<std::uint64_t>(w.mesh[i].size);
      rest[i] = 0;
    }
    std::vector<topology::ChipId>& g = groups[rest];
    if (g.empty()) g.assign(size, topology::kNoChip);
    g[place] = c;
  };
  if (chips)
    for (topology::ChipId c : *chips) add(c);
  else
    for (topology::ChipId c = 0; c < coords_.size(); ++c) add(c);
  std::vector<std::vector<topology::ChipId>> list;
  for (auto& [rest, g] : groups) {
    MESHSIM_ASSERT(std::find(g.begin(), g.end(), topology::kNoChip) == g.end(), "an op's chips are whole groups");
    list.push_back(std::move(g));
  }
  std::sort(list.begin(), list.end());
  out.groups = std::make_shared<const std::vector<std::vector<topology::ChipId>>>(std::move(list));
  return built_.emplace(key, std::move(out)).first->second;
}

void set_comm_axes(const Workload& w, CollectiveOp& c, const std::vector<int>& mesh_axes,
                   const std::vector<topology::ChipId>* chips, FactorGroupsCache* cache) {
  c.mesh_axes = mesh_axes;
  c.groups.reset();
  c.factors.clear();
  const bool whole =
      std::all_of(mesh_axes.begin(), mesh_axes.end(), [&](int a) { return w.mesh[static_cast<std::size_t>(a)].whole; });
  if (whole) {
    c.hw_axes = hardware_axes(w, mesh_axes);
    return;
  }
  c.hw_axes.clear();
  FactorGroupsCache own;
  const FactorGroups& g = (cache ? *cache : own).get(w, mesh_axes, chips);
  c.groups = g.groups;
  c.factors = g.factors;
}

Op collective_step(const Workload& w, OpKind kind, const std::string& name, const std::string& group,
                   const std::string& pointer, const Array& in, const Array& out, const std::vector<int>& axes) {
  Op op(kind);
  op.name = name;
  op.group = group;
  op.pointer = pointer;
  CollectiveOp& c = op.collective();
  set_comm_axes(w, c, axes);
  c.bytes = group_bytes(w, in, axes);
  op.inputs = {in};
  op.outputs = {out};
  return op;
}

void Lowerer::declare(Array a, const SourceRef& where) {
  if (has_array(a.name)) where.fail(fmt::format("array '{}' already exists", a.name));
  w_.declared.push_back(a);
  arrays_[a.name] = w_.arrays.size();
  w_.arrays.push_back(std::move(a));
}

const Array& Lowerer::array(const std::string& name, const SourceRef& where) const {
  const auto it = arrays_.find(name);
  if (it == arrays_.end()) where.fail(fmt::format("unknown array '{}'", name));
  return w_.arrays[it->second];
}

std::uint32_t Lowerer::emit(Op op, const std::vector<std::uint32_t>& after) {
  auto add = [&op](std::uint32_t d) {
    if (std::find(op.deps.begin(), op.deps.end(), d) == op.deps.end()) op.deps.push_back(d);
  };
  for (std::uint32_t d : after) add(d);
  for (const Array& in : op.inputs)
    if (auto p = producers_.find(in.name); p != producers_.end()) add(p->second);
  const auto index = static_cast<std::uint32_t>(w_.ops.size());
  if (!step_names_.insert(op.name).second)
    throw InputError(w_.file, op.pointer,
                     fmt::format("op name '{}' is already used by an earlier op; reports and traces need unique "
                                 "names, so rename one",
                                 op.name));
  if (!op.inputs.empty()) {
    op.sharding_before = sharding_string(w_, op.inputs.front());
  }
  for (const Array& out : op.outputs) {
    op.sharding_after = sharding_string(w_, out);
    producers_[out.name] = index;
    if (auto it = arrays_.find(out.name); it != arrays_.end()) {
      w_.arrays[it->second] = out;
    } else {
      arrays_[out.name] = w_.arrays.size();
      w_.arrays.push_back(out);
    }
  }
  w_.ops.push_back(std::move(op));
  return index;
}

namespace {

// The kind as a workload writes it: the default name's stem.
struct KindText {
  std::string operator()(const CollectiveSpec& c) const { return std::string(kind_name(c.kind)); }
  std::string operator()(const SendSpec&) const { return "send"; }
  std::string operator()(const MatmulOpSpec&) const { return "matmul"; }
  std::string operator()(const MlpSpec&) const { return "mlp"; }
};

}  // namespace

void Lowerer::lower(const OpSpec& spec, std::size_t index) {
  const std::string kind = std::visit(KindText{}, spec.what);
  std::string name;
  if (spec.name) {
    name = spec.name->name;
    if (names_.count(name)) spec.name->where.fail(fmt::format("op name '{}' is already used", name));
    if (step_names_.count(name))
      spec.name->where.fail(fmt::format("op name '{}' is already used by a step of an earlier op", name));
  } else {
    name = fmt::format("{}#{}", kind, index);
  }
  std::vector<std::uint32_t> after;
  for (const NameRef& dep : spec.after) {
    const auto it = names_.find(dep.name);
    if (it == names_.end()) dep.where.fail(fmt::format("'{}' is not the name of an earlier op", dep.name));
    after.push_back(it->second);
  }

  if (const auto* m = std::get_if<MatmulOpSpec>(&spec.what)) {
    lower_matmul(*m, spec.where, name, after);
  } else if (const auto* mlp = std::get_if<MlpSpec>(&spec.what)) {
    lower_mlp(*mlp, spec.where, name, after);
  } else {
    const auto* send = std::get_if<SendSpec>(&spec.what);
    const auto* c = std::get_if<CollectiveSpec>(&spec.what);
    MESHSIM_ASSERT(send != nullptr || is_collective(c->kind), "a send or a collective");
    Op op(send ? OpKind::Send : c->kind);
    op.name = name;
    op.group = name;
    op.pointer = spec.where.pointer;
    if (send)
      lower_send(*send, std::move(op), after);
    else
      lower_collective(*c, spec.where, std::move(op), after);
  }
  names_[name] = static_cast<std::uint32_t>(w_.ops.size() - 1);
}

void Lowerer::lower_send(const SendSpec& s, Op op, const std::vector<std::uint32_t>& after) {
  check_positive(s.bytes, std::uint64_t{1} << 62, s.bytes_at);
  SendOp& body = op.send();
  body.bytes = s.bytes;
  body.src = resolve_chip(w_, s.from);
  body.dst = resolve_chip(w_, s.to);
  if (body.src == body.dst) s.to.where.fail("a send needs two different chips");
  emit(std::move(op), after);
}

void Lowerer::lower_collective(const CollectiveSpec& c, const SourceRef& where, Op op,
                               const std::vector<std::uint32_t>& after) {
  CollectiveOp& co = op.collective();
  if (c.protocol) {
    // NCCL's protocol (sim/collectives/gpu.hpp); whether the algorithm runs it is
    // checked where the algorithms are chosen.
    co.protocol = c.protocol->name;
    if (!w_.hardware.gpu) c.protocol->where.fail("'protocol' is NCCL's: it applies to collectives on a GPU fabric");
  }
  if (c.algorithm) {
    co.algorithm = c.algorithm->name;
    // On a torus: how a gather or reduction over several axes shares its data
    // among axis orders (sim/collectives/schedule.hpp); the GPU names are
    // checked where the algorithms are chosen.
    if (!w_.hardware.gpu) {
      const SourceRef& a = c.algorithm->where;
      if (op.kind == OpKind::AllToAll)
        a.fail("a TPU all_to_all has one schedule; 'algorithm' chooses the multi-axis schedule of all_gather, "
               "reduce_scatter and all_reduce");
      if (co.algorithm != "balanced" && co.algorithm != "equal")
        a.fail(fmt::format("unknown torus schedule '{}' (known: balanced, equal)", co.algorithm));
    }
  }

  const SourceRef& axes_c = c.axes_at;
  set_comm_axes(w_, co, resolve_axes(w_, c.axes, axes_c));

  const bool with_array = c.array.has_value(), with_bytes = c.bytes.has_value();
  if (with_array == with_bytes) where.fail("give exactly one of 'array' (a declared array) or 'bytes' (V, in bytes)");
  if (with_bytes) {
    if (c.out) c.out->where.fail("'out' names a result array; it needs 'array'");
    if (c.dim) c.dim->where.fail("'dim' needs 'array'");
    check_positive(*c.bytes, std::uint64_t{1} << 62, c.bytes_at);
    co.bytes = *c.bytes;
    emit(std::move(op), after);
    return;
  }

  const Array in = array(c.array->name, c.array->where);
  const std::string before = sharding_string(w_, in);
  Array a = in;
  co.bytes = group_bytes(w_, a, co.mesh_axes);
  auto axis_name = [&](int axis) { return w_.mesh[static_cast<std::size_t>(axis)].name; };
  auto in_op = [&](int axis) {
    return std::find(co.mesh_axes.begin(), co.mesh_axes.end(), axis) != co.mesh_axes.end();
  };
  // Where each requested axis shards the array (-1: nowhere).
  std::vector<int> dim_of(co.mesh_axes.size(), -1);
  for (std::size_t i = 0; i < co.mesh_axes.size(); ++i)
    for (std::size_t d = 0; d < a.dims.size(); ++d)
      for (int axis : a.shard_axes[d])
        if (axis == co.mesh_axes[i]) dim_of[i] = static_cast<int>(d);

  const bool reduces = op.kind == OpKind::AllReduce || op.kind == OpKind::ReduceScatter;
  if (!a.partial_axes.empty()) {
    if (!reduces)
      c.array->where.fail(fmt::format("{} holds unreduced partial sums over {}; reduce them first", before,
                                     fmt::join(axis_names(w_, a.partial_axes), ",")));
    for (int axis : co.mesh_axes)
      if (std::find(a.partial_axes.begin(), a.partial_axes.end(), axis) == a.partial_axes.end())
        axes_c.fail(fmt::format("{} is a partial sum over {}, not over {}", before,
                                fmt::join(axis_names(w_, a.partial_axes), ","), axis_name(axis)));
    std::erase_if(a.partial_axes, in_op);
  }
  // Removes the op's axes from the dims they split; they must be the minor
  // (last) axes there, or the rest would not be a contiguous split.
  auto strip = [&] {
    for (auto& axes : a.shard_axes) {
      const auto first = std::find_if(axes.begin(), axes.end(), in_op);
      if (first != axes.end() && !std::all_of(first, axes.end(), in_op))
        axes_c.fail(fmt::format("{}: gathering {} but not the axes after it leaves a split the notation cannot "
                                "express; include the minor axes too",
                                before, axis_name(*first)));
      axes.erase(first, axes.end());
    }
  };
  switch (op.kind) {
    case OpKind::AllGather:
      for (std::size_t i = 0; i < dim_of.size(); ++i)
        if (dim_of[i] < 0)
          axes_c.fail(
              fmt::format("{} is not sharded on mesh axis {}; nothing to gather", before, axis_name(co.mesh_axes[i])));
      strip();
      break;
    case OpKind::AllReduce:
      for (std::size_t i = 0; i < dim_of.size(); ++i)
        if (dim_of[i] >= 0)
          axes_c.fail(fmt::format(
              "{} is sharded on mesh axis {}; an all_reduce sums partial results over axes the array is not split on",
              before, axis_name(co.mesh_axes[i])));
      break;
    case OpKind::ReduceScatter:
    case OpKind::AllToAll: {
      if (!c.dim) where.fail("missing required field 'dim'");
      const SourceRef& dim_c = c.dim->where;
      const std::string& dim = c.dim->name;
      const int d = a.dim_index(dim);
      if (d < 0) dim_c.fail(fmt::format("{} has no dimension '{}'", before, dim));
      if (op.kind == OpKind::ReduceScatter) {
        for (std::size_t i = 0; i < dim_of.size(); ++i)
          if (dim_of[i] >= 0)
            axes_c.fail(
                fmt::format("{} is already sharded on mesh axis {}; reduce_scatter needs the full "
                            "(partial-sum) array on the axes it scatters over",
                            before, axis_name(co.mesh_axes[i])));
      } else {
        for (std::size_t i = 0; i < dim_of.size(); ++i) {
          if (dim_of[i] < 0)
            axes_c.fail(fmt::format(
                "{} is not sharded on mesh axis {}; all_to_all moves an existing split to another dimension", before,
                axis_name(co.mesh_axes[i])));
          if (dim_of[i] != dim_of[0])
            axes_c.fail(fmt::format(
                "all_to_all axes must shard one dimension, but in {} mesh axis {} shards {} and {} shards {}", before,
                axis_name(co.mesh_axes[0]), a.dims[static_cast<std::size_t>(dim_of[0])], axis_name(co.mesh_axes[i]),
                a.dims[static_cast<std::size_t>(dim_of[i])]));
          if (dim_of[i] == d)
            dim_c.fail(fmt::format("{} is already split on {} along {}", before, axis_name(co.mesh_axes[i]), dim));
        }
        strip();
      }
      for (int axis : co.mesh_axes) a.shard_axes[static_cast<std::size_t>(d)].push_back(axis);
      break;
    }
    case OpKind::Send:
    case OpKind::Matmul:
    case OpKind::Elementwise:
      break;
  }
  if (c.out) {
    a.name = c.out->name;
    check_array_name(a.name, c.out->where);
    if (has_array(a.name)) c.out->where.fail(fmt::format("array '{}' already exists", a.name));
  }
  check_layout(w_, a, c.dim ? c.dim->where : axes_c);
  op.inputs = {in};
  op.outputs = {a};
  emit(std::move(op), after);
}

}  // namespace meshsim::workloads::detail
