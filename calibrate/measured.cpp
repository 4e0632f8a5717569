#include "calibrate/measured.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "base/error.hpp"
#include "base/text_file.hpp"
#include "calibrate/nccl_tests.hpp"
#include "topology/gpu_preset.hpp"
#include "topology/preset.hpp"
#include "workloads/json_cursor.hpp"
#include "workloads/spec.hpp"

namespace meshsim::calibrate {

namespace {

using workloads::Cursor;
using workloads::Json;

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

OpKind comm_kind(std::string_view name, const std::string& file, const std::string& pointer) {
  const std::optional<OpKind> k = parse_kind(name);
  if (!k || !is_collective(*k))
    throw InputError(file, pointer,
                     fmt::format("unknown collective '{}' (expected all_gather, reduce_scatter, all_reduce or "
                                 "all_to_all)",
                                 name));
  return *k;
}

// Checks what the columns say on their own (the system is checked when the point is simulated).
void check_point(const MeasuredPoint& p) {
  if (p.hardware.empty()) throw InputError(p.file, p.pointer, "the point names no hardware preset");
  if (p.bytes == 0) throw InputError(p.file, p.pointer, "a point of 0 bytes");
  if (!(p.time_s > 0) || !std::isfinite(p.time_s) || p.time_s > 1e4)
    throw InputError(p.file, p.pointer, fmt::format("measured time {} s is not a positive time (at most 1e4 s)", p.time_s));
  if (!(p.spread_s >= 0) || !std::isfinite(p.spread_s))
    throw InputError(p.file, p.pointer, fmt::format("spread {} s is not a non-negative time", p.spread_s));
}

std::uint64_t parse_bytes(std::string_view s, const std::string& file, const std::string& pointer) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty())
    throw InputError(file, pointer, fmt::format("bytes '{}' is not a whole number", s));
  return v;
}

double parse_seconds(std::string_view s, const char* column, const std::string& file, const std::string& pointer) {
  const std::string text(s);
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size())
    throw InputError(file, pointer, fmt::format("{} '{}' is not a number", column, s));
  return v;
}

}  // namespace

std::string MeasuredPoint::where() const {
  std::string s = file;
  s.append(":").append(pointer);
  return s;
}

workloads::Workload point_workload(const MeasuredPoint& p) {
  // The system and op as the workload {"hardware", "topology", "mesh", "ops"}
  // would give them: errors name those pointers.
  workloads::Workload w;
  w.file = p.where();
  const SourceRef root{w.file, ""};
  workloads::TopologySpec topo;
  topo.given = true;
  topo.where = root.child("topology");
  workloads::MeshSpec mesh;
  mesh.where = root.child("mesh");
  const auto add_axis = [&](const std::string& name, int size) {
    mesh.axes.push_back({name, size, mesh.where.child(name)});
  };
  std::vector<std::string> axes;
  const auto fail = [&](const std::string& message) { throw InputError(p.file, p.pointer, message); };
  if (topology::find_preset(p.hardware)) {
    std::vector<int> shape;
    for (std::string_view size : split(p.topology, 'x')) {
      int v = 0;
      const auto [end, ec] = std::from_chars(size.data(), size.data() + size.size(), v);
      if (ec != std::errc() || end != size.data() + size.size() || v < 1 || v > 4096)
        fail(fmt::format("topology '{}' is not a TPU slice shape like 8x16 or 4x4x4", p.topology));
      shape.push_back(v);
    }
    if (shape.size() > 3) fail(fmt::format("topology '{}' has more than 3 axes", p.topology));
    topo.shape = shape;
    topo.shape_at = topo.where.child("shape");
    static constexpr const char* kNames[] = {"x", "y", "z"};
    for (std::size_t a = 0; a < shape.size(); ++a) add_axis(kNames[a], shape[a]);
    for (std::string_view axis : split(p.axes, '+')) {
      const auto it = std::find(std::begin(kNames), std::begin(kNames) + shape.size(), axis);
      if (it == std::begin(kNames) + shape.size())
        fail(fmt::format("axis '{}' is not an axis of the {} slice (x, y{})", axis, p.topology,
                         shape.size() > 2 ? ", z" : ""));
      axes.emplace_back(axis);
    }
  } else if (const topology::GpuPreset* g = topology::find_gpu_preset(p.hardware)) {
    int nodes = 0;
    const auto [end, ec] = std::from_chars(p.topology.data(), p.topology.data() + p.topology.size(), nodes);
    if (ec != std::errc() || end != p.topology.data() + p.topology.size() || nodes < 1 || nodes > 32768)
      fail(fmt::format("topology '{}' is not a number of whole nodes of {} GPUs", p.topology, g->gpus_per_node));
    topo.nodes = {nodes};
    topo.nodes_at = topo.where.child("nodes");
    add_axis("gpu", g->gpus_per_node);
    if (nodes > 1) add_axis("node", nodes);
    if (p.axes == "all" || p.axes == "gpu") axes.emplace_back("gpu");
    if ((p.axes == "all" && nodes > 1) || p.axes == "node") axes.emplace_back("node");
    if (p.axes != "all" && p.axes != "gpu" && p.axes != "node")
      fail(fmt::format("axes '{}' of a GPU point: expected all, gpu (within each node) or node (across nodes)", p.axes));
    if (p.axes == "node" && nodes == 1) fail("axes 'node' on one node: a collective across nodes needs two or more");
    if (p.kind == OpKind::Send && p.axes != "all")
      fail("a send point is nccl-tests' sendrecv over every GPU (axes all)");
  } else if (p.kind == OpKind::Send) {
    fail("a send point is nccl-tests' sendrecv: on a GPU preset");
  } else {
    fail(fmt::format("unknown preset '{}' (known: {}, {})", p.hardware, topology::preset_names(),
                     topology::gpu_preset_names()));
  }
  try {
    workloads::build_system(w, *workloads::preset_hardware(p.hardware), topo, mesh);
    if (p.kind == OpKind::Send) {
      // nccl-tests' sendrecv: every rank sends `bytes` to the next and receives
      // from the one before, at once (a ring over the ranks, rank r on GPU r).
      workloads::Op op(OpKind::Send);
      op.name = "sendrecv";
      op.group = op.name;
      op.pointer = "/ops/0";
      const auto n = static_cast<topology::ChipId>(w.make_torus().num_chips());
      for (topology::ChipId r = 0; r < n; ++r) op.send().pairs.emplace_back(r, (r + 1) % n);
      op.send().src = 0, op.send().dst = 1 % n;
      op.send().bytes = p.bytes;
      w.ops.push_back(std::move(op));
      return w;
    }
    workloads::add_collective(w, p.kind, p.bytes, axes, root.child("ops").child(std::size_t{0}));
    if (!p.algorithm.empty() || !p.protocol.empty()) {
      workloads::CollectiveOp& op = w.ops.back().collective();
      op.algorithm = p.algorithm;
      op.protocol = p.protocol;
    }
    return w;
  } catch (const InputError& e) {
    throw InputError(p.file, p.pointer, "the point's system: " + e.message());
  }
}

std::vector<MeasuredPoint> parse_points_csv(std::string_view text, const std::string& file) {
  std::vector<MeasuredPoint> out;
  std::map<std::string, std::size_t> column;
  int line_no = 0;
  for (std::string_view line : split(text, '\n')) {
    ++line_no;
    line = trim(line);
    if (line.empty() || line.front() == '#') continue;
    const std::string pointer = std::to_string(line_no);
    std::vector<std::string_view> cells = split(line, ',');
    for (std::string_view& c : cells) c = trim(c);
    if (column.empty()) {
      for (std::size_t i = 0; i < cells.size(); ++i) {
        const std::string name(cells[i]);
        if (name != "kind" && name != "hardware" && name != "topology" && name != "axes" && name != "bytes" &&
            name != "time_s" && name != "spread_s")
          throw InputError(file, pointer,
                           fmt::format("unknown column '{}' (expected kind, hardware, topology, axes, bytes, time_s "
                                       "and optionally spread_s)",
                                       name));
        if (!column.emplace(name, i).second) throw InputError(file, pointer, fmt::format("column '{}' twice", name));
      }
      for (const char* need : {"kind", "hardware", "topology", "axes", "bytes", "time_s"})
        if (!column.count(need)) throw InputError(file, pointer, fmt::format("the header has no column '{}'", need));
      continue;
    }
    if (cells.size() != column.size())
      throw InputError(file, pointer, fmt::format("{} cells, the header has {} columns", cells.size(), column.size()));
    const auto cell = [&](const char* name) { return cells[column.at(name)]; };
    MeasuredPoint p;
    p.file = file;
    p.pointer = pointer;
    p.kind = comm_kind(cell("kind"), file, pointer);
    p.hardware = std::string(cell("hardware"));
    p.topology = std::string(cell("topology"));
    p.axes = std::string(cell("axes"));
    p.bytes = parse_bytes(cell("bytes"), file, pointer);
    p.time_s = parse_seconds(cell("time_s"), "time_s", file, pointer);
    if (column.count("spread_s")) p.spread_s = parse_seconds(cell("spread_s"), "spread_s", file, pointer);
    check_point(p);
    out.push_back(std::move(p));
  }
  if (out.empty()) throw InputError(file, std::to_string(line_no), "no points (a header line, then one point per line)");
  return out;
}

std::vector<MeasuredPoint> parse_points_json(std::string_view text, const std::string& file) {
  const Json root = workloads::parse_json(text, file);
  const Cursor top(root, "", file);
  top.only_keys({"points"});
  const Cursor list = top.at("points");
  if (!list.raw().is_array() || list.raw().empty()) list.fail("expected a non-empty array of points");
  std::vector<MeasuredPoint> out;
  for (const Cursor& c : list.elements()) {
    c.only_keys({"kind", "hardware", "topology", "axes", "bytes", "time_s", "spread_s"});
    MeasuredPoint p;
    p.file = file;
    p.pointer = c.pointer();
    p.kind = comm_kind(c.at("kind").as_string(), file, c.at("kind").pointer());
    p.hardware = c.at("hardware").as_string();
    p.topology = c.at("topology").as_string();
    p.axes = c.at("axes").as_string();
    p.bytes = c.at("bytes").as_positive_u64();
    const auto seconds = [&](const char* key) {
      const Cursor v = c.at(key);
      if (!v.raw().is_number()) v.fail("expected a number of seconds, got " + v.type_name());
      return v.raw().get<double>();
    };
    p.time_s = seconds("time_s");
    if (c.has("spread_s")) p.spread_s = seconds("spread_s");
    check_point(p);
    out.push_back(std::move(p));
  }
  return out;
}

// The one collective a log's file name names ("all_reduce_perf.log",
// "..._reduce_scatter_ring.out", "alltoall.txt"); "" for none or several.
std::string collective_of_file_name(const std::string& file) {
  std::string name = file.substr(file.find_last_of('/') == std::string::npos ? 0 : file.find_last_of('/') + 1);
  for (char& c : name) c = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 9> kNames = {{
      {"all_reduce", "all_reduce"},
      {"allreduce", "all_reduce"},
      {"all_gather", "all_gather"},
      {"allgather", "all_gather"},
      {"reduce_scatter", "reduce_scatter"},
      {"reducescatter", "reduce_scatter"},
      {"alltoall", "all_to_all"},
      {"all_to_all", "all_to_all"},
      {"sendrecv", "send"},
  }};
  std::set<std::string_view> found;
  for (const auto& [pattern, kind] : kNames)
    if (name.find(pattern) != std::string::npos) found.insert(kind);
  return found.size() == 1 ? std::string(*found.begin()) : std::string();
}

std::vector<MeasuredPoint> points_from_nccl_tests(std::string_view text, const std::string& file,
                                                  const NcclTestsContext& context) {
  std::vector<MeasuredPoint> out;
  for (const NcclTestsLog& log : parse_nccl_tests(text, file)) {
    const std::string first = log.rows.empty() ? "1" : std::to_string(log.rows.front().line);
    if (context.hardware.empty())
      throw InputError(file, first, "an nccl-tests log does not say which system it ran on: give --hardware PRESET");
    const topology::GpuPreset* g = topology::find_gpu_preset(context.hardware);
    if (!g)
      throw InputError(file, first, fmt::format("nccl-tests runs on GPUs: '{}' is not a GPU preset (known: {})",
                                                context.hardware, topology::gpu_preset_names()));
    if (!log.collective.empty() && !context.collective.empty() && log.collective != context.collective)
      throw InputError(
          file, first,
          fmt::format("the log says its test is {}; --collective says {}", log.collective, context.collective));
    const std::string collective = !log.collective.empty()       ? log.collective
                                   : !context.collective.empty() ? context.collective
                                   : !log.named_program.empty()  ? log.named_program
                                                                 : collective_of_file_name(file);
    if (collective.empty())
      throw InputError(file, first,
                       "the log does not name its collective (no '# Collective test starting' line, no nccl-tests "
                       "program in the log or its file name): give --collective all_reduce (all_gather, "
                       "reduce_scatter, all_to_all)");
    const std::optional<OpKind> kind = parse_kind(collective);
    if (!kind || is_local(*kind))
      throw InputError(file, first,
                       fmt::format("nccl-tests {}: meshsim simulates all_gather, reduce_scatter, all_reduce, "
                                   "all_to_all and sendrecv (remove this table)",
                                   collective));
    const int nodes = context.nodes > 0 ? context.nodes : std::max(1, log.nodes);
    if (log.ranks > 0 && log.ranks != nodes * g->gpus_per_node)
      throw InputError(file, first,
                       fmt::format("the log has {} ranks on {} node{}; meshsim models whole nodes of {} GPUs ({})",
                                   log.ranks, nodes, nodes == 1 ? "" : "s", g->gpus_per_node, g->name));
    const auto ranks = static_cast<std::uint64_t>(nodes) * static_cast<std::uint64_t>(g->gpus_per_node);
    for (const NcclTestsRow& row : log.rows) {
      if (row.bytes == 0) continue;  // nccl-tests -b 0: no data moves
      MeasuredPoint p;
      p.file = file;
      p.pointer = std::to_string(row.line);
      p.kind = *kind;
      p.hardware = g->name;
      p.topology = std::to_string(nodes);
      p.axes = "all";
      // nccl-tests' size is V for an all-gather (the gathered total), a
      // reduce-scatter (each rank's input) and an all-reduce; for an all-to-all
      // it is each rank's send buffer, V/P (docs/WORKLOAD.md: V = per-chip bytes x P).
      p.bytes = row.bytes;
      // NCCL runs a forced algorithm only where it implements the kind (Tree and
      // NVLS all-reduces; all-gathers and reduce-scatters stay rings).
      p.algorithm = context.algorithm.empty() ? log.algorithm : context.algorithm;
      if (!p.algorithm.empty() && !workloads::algorithm_fits(p.algorithm, *kind)) p.algorithm.clear();
      p.protocol = context.protocol.empty() ? log.protocol : context.protocol;
      if (*kind == OpKind::AllToAll) {
        if (row.bytes > workloads::kMaxArrayBytes / ranks)
          throw InputError(file, p.pointer,
                           fmt::format("an all-to-all of {} bytes per rank over {} ranks is above meshsim's {} bytes",
                                       row.bytes, ranks, workloads::kMaxArrayBytes));
        p.bytes = row.bytes * ranks;
      }
      p.time_s = row.out_of_place_us * 1e-6;
      check_point(p);
      out.push_back(std::move(p));
    }
  }
  return out;
}

std::vector<MeasuredPoint> load_points(const std::string& path, const NcclTestsContext& context) {
  const std::string text = read_text_file(path, "file of measurements");
  const std::string_view body = trim(text);
  if (!body.empty() && body.front() == '{') return parse_points_json(text, path);
  if (text.find("# nThread") != std::string::npos || text.find("#wrong") != std::string::npos ||
      text.find("algbw") != std::string::npos)
    return points_from_nccl_tests(text, path, context);
  return parse_points_csv(text, path);
}

bool is_measurements_file(const std::string& path) {
  const std::string text = read_text_file(path, "file of measurements");
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || text[first] != '{') return false;  // CSV or an nccl-tests log
  // Lenient on purpose (duplicate keys, any values): only the kind of file is
  // decided here; the reader it picks reports what is wrong with it.
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return !(doc.is_object() && doc.contains("points") && !doc.contains("meshsim_measurements"));
}

}  // namespace meshsim::calibrate
