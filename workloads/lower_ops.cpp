// The ops of a workload: names, dependencies, and the collectives and sends the
// user writes directly. Matmuls and layers are in lower_matmul.cpp.
#include <fmt/format.h>

#include <algorithm>

#include "base/error.hpp"
#include "workloads/lowering.hpp"

namespace meshsim::workloads::detail {

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

Op collective_step(const Workload& w, OpKind kind, const std::string& name, const std::string& group,
                   const std::string& pointer, const Array& in, const Array& out, const std::vector<int>& axes) {
  Op op;
  op.kind = kind;
  op.name = name;
  op.group = group;
  op.pointer = pointer;
  op.mesh_axes = axes;
  op.hw_axes = hardware_axes(w, axes);
  op.bytes = group_bytes(w, in, axes);
  op.inputs = {in};
  op.outputs = {out};
  return op;
}

void Lowerer::declare(Array a) {
  w_.declared.push_back(a);
  arrays_[a.name] = w_.arrays.size();
  w_.arrays.push_back(std::move(a));
}

const Array& Lowerer::array(const std::string& name, const Cursor& where) const {
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

void Lowerer::parse(const Cursor& ops) {
  const auto list = ops.elements();
  if (list.empty()) ops.fail("expected at least one op");
  w_.ops.reserve(list.size());  // at least one op each: no moves of the ops as they come
  for (std::size_t i = 0; i < list.size(); ++i) parse_op(list[i], i);
}

void Lowerer::parse_op(const Cursor& c, std::size_t index) {
  c.expect_object();
  const Cursor kind_c = c.at("kind");
  const std::string kind = kind_c.as_string();
  std::string name;
  if (auto n = c.find("name")) {
    name = n->as_identifier();
    if (names_.count(name)) n->fail(fmt::format("op name '{}' is already used", name));
    if (step_names_.count(name)) n->fail(fmt::format("op name '{}' is already used by a step of an earlier op", name));
  } else {
    name = fmt::format("{}#{}", kind, index);
  }
  std::vector<std::uint32_t> after;
  if (auto a = c.find("after")) {
    for (const Cursor& e : a->elements()) {
      const std::string dep = e.as_string();
      const auto it = names_.find(dep);
      if (it == names_.end()) e.fail(fmt::format("'{}' is not the name of an earlier op", dep));
      after.push_back(it->second);
    }
  }

  if (kind == "matmul") {
    lower_matmul(c, name, after);
  } else if (kind == "mlp") {
    lower_mlp(c, name, after);
  } else {
    const auto k = parse_kind(kind);
    if (!k || is_local(*k))
      kind_c.fail(fmt::format("unknown op kind '{}' (known: all_gather, reduce_scatter, all_reduce, all_to_all, send, "
                              "matmul, mlp)",
                              kind));
    Op op;
    op.name = name;
    op.group = name;
    op.kind = *k;
    op.pointer = c.pointer();
    op.deps = after;
    lower_collective(c, std::move(op));
  }
  names_[name] = static_cast<std::uint32_t>(w_.ops.size() - 1);
}

void Lowerer::lower_collective(const Cursor& c, Op op) {
  if (op.kind == OpKind::Send)
    c.only_keys({"name", "kind", "after", "bytes", "from", "to"});
  else if (op.kind == OpKind::ReduceScatter || op.kind == OpKind::AllToAll)
    c.only_keys({"name", "kind", "after", "axes", "array", "bytes", "dim", "out", "algorithm", "protocol"});
  else
    c.only_keys({"name", "kind", "after", "axes", "array", "bytes", "out", "algorithm", "protocol"});
  if (auto p = c.find("protocol")) {
    // NCCL's protocol (sim/collectives/gpu.hpp); whether the algorithm runs it is
    // checked where the algorithms are chosen.
    op.protocol = p->as_string();
    if (!w_.hardware.gpu) p->fail("'protocol' is NCCL's: it applies to collectives on a GPU fabric");
  }
  if (auto a = c.find("algorithm")) {
    op.algorithm = a->as_string();
    // On a torus: how a gather or reduction over several axes shares its data
    // among axis orders (sim/collectives/schedule.hpp); the GPU names are
    // checked where the algorithms are chosen.
    if (!w_.hardware.gpu) {
      if (op.kind == OpKind::AllToAll)
        a->fail("a TPU all_to_all has one schedule; 'algorithm' chooses the multi-axis schedule of all_gather, "
                "reduce_scatter and all_reduce");
      if (op.algorithm != "balanced" && op.algorithm != "equal")
        a->fail(fmt::format("unknown torus schedule '{}' (known: balanced, equal)", op.algorithm));
    }
  }
  const std::vector<std::uint32_t> after = op.deps;
  op.deps.clear();

  if (op.kind == OpKind::Send) {
    op.bytes = c.at("bytes").as_positive_u64();
    op.src = parse_chip(w_, c.at("from"));
    op.dst = parse_chip(w_, c.at("to"));
    if (op.src == op.dst) c.at("to").fail("a send needs two different chips");
    emit(std::move(op), after);
    return;
  }

  const Cursor axes_c = c.at("axes");
  op.mesh_axes = parse_axes(w_, axes_c);
  op.hw_axes = hardware_axes(w_, op.mesh_axes);

  const bool with_array = c.has("array"), with_bytes = c.has("bytes");
  if (with_array == with_bytes) c.fail("give exactly one of 'array' (a declared array) or 'bytes' (V, in bytes)");
  if (with_bytes) {
    if (c.has("out")) c.at("out").fail("'out' names a result array; it needs 'array'");
    if (c.has("dim")) c.at("dim").fail("'dim' needs 'array'");
    op.bytes = c.at("bytes").as_positive_u64();
    emit(std::move(op), after);
    return;
  }

  const Array in = array(c.at("array").as_string(), c.at("array"));
  const std::string before = sharding_string(w_, in);
  Array a = in;
  op.bytes = group_bytes(w_, a, op.mesh_axes);
  auto axis_name = [&](int axis) { return w_.mesh[static_cast<std::size_t>(axis)].name; };
  auto in_op = [&](int axis) { return std::find(op.mesh_axes.begin(), op.mesh_axes.end(), axis) != op.mesh_axes.end(); };
  // Where each requested axis shards the array (-1: nowhere).
  std::vector<int> dim_of(op.mesh_axes.size(), -1);
  for (std::size_t i = 0; i < op.mesh_axes.size(); ++i)
    for (std::size_t d = 0; d < a.dims.size(); ++d)
      for (int axis : a.shard_axes[d])
        if (axis == op.mesh_axes[i]) dim_of[i] = static_cast<int>(d);

  const bool reduces = op.kind == OpKind::AllReduce || op.kind == OpKind::ReduceScatter;
  if (!a.partial_axes.empty()) {
    if (!reduces)
      c.at("array").fail(fmt::format("{} holds unreduced partial sums over {}; reduce them first", before,
                                     fmt::join(axis_names(w_, a.partial_axes), ",")));
    for (int axis : op.mesh_axes)
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
          axes_c.fail(fmt::format("{} is not sharded on mesh axis {}; nothing to gather", before,
                                  axis_name(op.mesh_axes[i])));
      strip();
      break;
    case OpKind::AllReduce:
      for (std::size_t i = 0; i < dim_of.size(); ++i)
        if (dim_of[i] >= 0)
          axes_c.fail(fmt::format(
              "{} is sharded on mesh axis {}; an all_reduce sums partial results over axes the array is not split on",
              before, axis_name(op.mesh_axes[i])));
      break;
    case OpKind::ReduceScatter:
    case OpKind::AllToAll: {
      const Cursor dim_c = c.at("dim");
      const std::string dim = dim_c.as_string();
      const int d = a.dim_index(dim);
      if (d < 0) dim_c.fail(fmt::format("{} has no dimension '{}'", before, dim));
      if (op.kind == OpKind::ReduceScatter) {
        for (std::size_t i = 0; i < dim_of.size(); ++i)
          if (dim_of[i] >= 0)
            axes_c.fail(fmt::format("{} is already sharded on mesh axis {}; reduce_scatter needs the full "
                                    "(partial-sum) array on the axes it scatters over",
                                    before, axis_name(op.mesh_axes[i])));
      } else {
        for (std::size_t i = 0; i < dim_of.size(); ++i) {
          if (dim_of[i] < 0)
            axes_c.fail(fmt::format(
                "{} is not sharded on mesh axis {}; all_to_all moves an existing split to another dimension", before,
                axis_name(op.mesh_axes[i])));
          if (dim_of[i] != dim_of[0])
            axes_c.fail(fmt::format(
                "all_to_all axes must shard one dimension, but in {} mesh axis {} shards {} and {} shards {}", before,
                axis_name(op.mesh_axes[0]), a.dims[static_cast<std::size_t>(dim_of[0])], axis_name(op.mesh_axes[i]),
                a.dims[static_cast<std::size_t>(dim_of[i])]));
          if (dim_of[i] == d)
            dim_c.fail(fmt::format("{} is already split on {} along {}", before, axis_name(op.mesh_axes[i]), dim));
        }
        strip();
      }
      for (int axis : op.mesh_axes) a.shard_axes[static_cast<std::size_t>(d)].push_back(axis);
      break;
    }
    case OpKind::Send:
    case OpKind::Matmul:
    case OpKind::Elementwise:
      break;
  }
  if (auto out = c.find("out")) {
    a.name = out->as_string();
    check_array_name(a.name, *out);
    if (has_array(a.name)) out->fail(fmt::format("array '{}' already exists", a.name));
  }
  check_layout(w_, a, c.has("dim") ? c.at("dim") : axes_c);
  op.inputs = {in};
  op.outputs = {a};
  emit(std::move(op), after);
}

}  // namespace meshsim::workloads::detail
