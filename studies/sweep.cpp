#include "studies/sweep.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "base/error.hpp"
#include "base/frames.hpp"
#include "calibrate/measured.hpp"
#include "studies/plot.hpp"
#include "base/text_file.hpp"
#include "workloads/imported.hpp"
#include "workloads/json_workload.hpp"

namespace meshsim::studies {

namespace {

constexpr std::size_t kMaxPoints = 10000;

bool is_collective_name(const std::string& kind) {
  const std::optional<OpKind> k = parse_kind(kind);
  return k && is_collective(*k);
}

std::string shape_string(const std::vector<int>& sizes) {
  std::string s;
  for (int v : sizes) {
    if (!s.empty()) s += 'x';
    s += std::to_string(v);
  }
  return s;
}

std::string axis_name(std::size_t i) { return std::string(1, static_cast<char>('X' + i)); }

std::string joined(const std::vector<std::string>& names, const char* sep) {
  std::string s;
  for (const std::string& n : names) {
    if (!s.empty()) s += sep;
    s += n;
  }
  return s;
}

// A cell of the CSV: as the run's --json writes the value, empty when it has
// none (or when it is not finite, which the JSON writes as null).
std::string cell(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? reports::json_number(*v) : std::string();
}

bool is_comm(const reports::OpRecord& op) { return !is_local(op.kind); }

}  // namespace

// The point's preset as tables and plots show it: "tpu-v5e", "tpu-v5e calibrated".
std::string preset_label(const PointResult& r) {
  std::string s = r.preset;
  if (r.point.calibrated) s += " calibrated";
  return s;
}

std::string SweepPoint::label() const {
  std::string s;
  auto add = [&](const std::string& part) {
    if (!s.empty()) s += ' ';
    s += part;
  };
  if (!preset.empty()) add("preset=" + preset);
  if (!mesh.empty()) add("mesh=" + shape_string(mesh));
  if (!algorithm.empty()) add("algorithm=" + algorithm);
  if (bytes) add("bytes=" + std::to_string(*bytes));
  if (calibrated) add("calibrated");
  return s.empty() ? "as written" : s;
}

std::optional<std::uint64_t> parse_size(const std::string& text) {
  if (text.empty()) return std::nullopt;
  std::uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || p == text.data()) return std::nullopt;
  int shift = 0;
  if (p != end) {
    if (p + 1 != end) return std::nullopt;
    switch (*p) {
      case 'K': case 'k': shift = 10; break;
      case 'M': case 'm': shift = 20; break;
      case 'G': case 'g': shift = 30; break;
      case 'T': case 't': shift = 40; break;
      default: return std::nullopt;
    }
  }
  if (value == 0 || value > (workloads::kMaxArrayBytes >> shift)) return std::nullopt;
  return value << shift;
}

std::vector<std::uint64_t> parse_bytes_range(const std::string& text) {
  const std::string usage = "--bytes: expected FROM[:TO[:FACTOR]] with sizes such as 1024, 64K, 1M, 1G (K = 1024) "
                            "from 1 to 2^62, FROM <= TO and an integer FACTOR >= 2, got '" + text + "'";
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t colon = text.find(':', start);
    parts.push_back(text.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (parts.size() > 3) throw Error(usage);
  const std::optional<std::uint64_t> from = parse_size(parts[0]);
  const std::optional<std::uint64_t> to = parts.size() > 1 ? parse_size(parts[1]) : from;
  std::uint64_t factor = 2;
  if (parts.size() > 2) {
    const auto [p, ec] = std::from_chars(parts[2].data(), parts[2].data() + parts[2].size(), factor);
    if (ec != std::errc() || p != parts[2].data() + parts[2].size() || factor < 2 || factor > 1024) throw Error(usage);
  }
  if (!from || !to || *from > *to) throw Error(usage);
  std::vector<std::uint64_t> out;
  for (std::uint64_t b = *from;; b *= factor) {
    out.push_back(b);
    if (b > *to / factor) break;
  }
  return out;
}

std::vector<int> parse_mesh_shape(const std::string& text) {
  if (std::optional<std::vector<int>> sizes = workloads::parse_shape_text(text)) return *std::move(sizes);
  throw Error("--mesh: expected mesh axis sizes such as 16 or 8x16 (each 1 to " +
              std::to_string(workloads::kMaxAxisSize) + ", at most 3 axes), got '" + text + "'");
}

Sweep::Sweep(SweepSpec spec) : spec_(std::move(spec)) {
  for (const std::string& a : spec_.algorithms)
    if (a != "auto" && a != "ring" && a != "tree" && a != "nvls" && a != "nvls_tree" && a != "hierarchical" &&
        a != "direct" && a != "balanced" && a != "equal")
      throw Error("--algorithm: expected ring, tree, nvls, nvls_tree, hierarchical, direct, auto (GPU) or balanced, "
                  "equal (TPU torus schedules), got '" + a + "'");
  if (!spec_.workload.empty()) {
    if (!spec_.op_kind.empty() || !spec_.op_axes.empty())
      throw Error("--op and --axes describe a collective instead of a WORKLOAD file; give one or the other");
    file_ = spec_.workload;
    // The base file first, exactly as `meshsim run` reads it (same errors).
    text_ = read_text_file(file_, "workload file");
    const workloads::WorkloadSpec base = workloads::read_workload_spec(text_, file_);
    (void)workloads::build_workload(base);
    if (base.training)
      throw Error(file_ + ": sweep varies ops' bytes, meshes, presets and GPU algorithms; a training step has no "
                          "ops to vary (run meshsim run on each variant of it)");
    if (!spec_.bytes.empty()) {
      bool any = false;
      for (const workloads::OpSpec& op : base.ops.ops) {
        const auto* c = std::get_if<workloads::CollectiveSpec>(&op.what);
        any = any || (c && c->bytes) || std::holds_alternative<workloads::SendSpec>(op.what);
      }
      if (!any)
        throw Error("--bytes: " + file_ + " has no op with a \"bytes\" key to set (ops with \"array\" take their size "
                    "from the array)");
    }
    const std::size_t axes = base.mesh.axes.size();
    for (const std::vector<int>& m : spec_.meshes)
      if (m.size() != axes)
        throw Error(fmt::format("--mesh: '{}' gives {} size{} but the mesh of {} has {} ax{}", shape_string(m),
                                m.size(), m.size() == 1 ? "" : "s", file_, axes, axes == 1 ? "is" : "es"));
    specs_.emplace("", base);
    for (const std::string& p : spec_.presets) {
      if (specs_.contains(p)) continue;
      try {
        specs_.emplace(p, workloads::read_workload_spec(text_, file_, p));
      } catch (const InputError& e) {
        specs_.emplace(p, e);
      }
    }
  } else {
    if (spec_.op_kind.empty()) throw Error("sweep: give a WORKLOAD file or a collective with --op");
    if (!is_collective_name(spec_.op_kind))
      throw Error("--op: expected all_gather, all_reduce, reduce_scatter or all_to_all, got '" + spec_.op_kind + "'");
    if (spec_.presets.empty()) throw Error("--op: needs --preset (the hardware), e.g. --preset tpu-v5e");
    if (spec_.meshes.empty()) throw Error("--op: needs --mesh (the mesh axis sizes X, Y, Z), e.g. --mesh 16");
    if (spec_.bytes.empty()) throw Error("--op: needs --bytes, e.g. --bytes 1K:1G");
    file_ = "sweep";
  }
  const std::vector<std::string> presets = spec_.presets.empty() ? std::vector<std::string>{""} : spec_.presets;
  const std::vector<std::vector<int>> meshes =
      spec_.meshes.empty() ? std::vector<std::vector<int>>{{}} : spec_.meshes;
  const std::vector<std::string> algorithms =
      spec_.algorithms.empty() ? std::vector<std::string>{""} : spec_.algorithms;
  std::vector<std::optional<std::uint64_t>> bytes;
  for (std::uint64_t b : spec_.bytes) bytes.emplace_back(b);
  if (bytes.empty()) bytes.emplace_back();
  const double count = static_cast<double>(presets.size()) * static_cast<double>(meshes.size()) *
                       static_cast<double>(algorithms.size()) * static_cast<double>(bytes.size()) *
                       (spec_.calibration.empty() ? 1.0 : 2.0);
  if (count > static_cast<double>(kMaxPoints))
    throw Error(fmt::format("sweep: {:.0f} points; meshsim sweeps at most {} at once", count, kMaxPoints));
  if (!spec_.calibration.empty())
    calibration_ = std::make_shared<const calibrate::Calibration>(calibrate::load_calibration(spec_.calibration));
  const std::vector<bool> calibrated = calibration_ ? std::vector<bool>{false, true} : std::vector<bool>{false};
  for (const std::string& p : presets)
    for (const std::vector<int>& m : meshes)
      for (const std::string& a : algorithms)
        for (const bool c : calibrated)
          for (const std::optional<std::uint64_t>& b : bytes)
            points_.push_back(SweepPoint{points_.size(), p, m, a, b, c});
}

workloads::WorkloadEdits SweepPoint::edits() const { return {preset, mesh, algorithm, bytes}; }

// A collective from the flags: the workload collective_workload_json writes,
// built in memory (its values' pointers are where that document has them).
workloads::WorkloadSpec Sweep::collective_spec(const SweepPoint& p) const {
  const SourceRef root{file_, ""};
  workloads::WorkloadSpec s;
  s.file = file_;
  s.hardware = workloads::resolve_preset({p.preset, root.child("hardware")});
  s.mesh.where = root.child("mesh");
  std::vector<std::string> axes = spec_.op_axes;
  for (std::size_t i = 0; i < p.mesh.size(); ++i) {
    s.mesh.axes.push_back({axis_name(i), p.mesh[i], s.mesh.where.child(axis_name(i))});
    if (spec_.op_axes.empty()) axes.push_back(axis_name(i));
  }
  workloads::OpSpec op;
  op.where = root.child("ops").child(std::size_t{0});
  op.name = workloads::NameRef{spec_.op_kind, op.where.child("name")};
  workloads::CollectiveSpec c;
  c.kind = *parse_kind(spec_.op_kind);
  c.axes_at = op.where.child("axes");
  for (std::size_t i = 0; i < axes.size(); ++i) c.axes.push_back({axes[i], c.axes_at.child(i)});
  c.bytes = *p.bytes;
  c.bytes_at = op.where.child("bytes");
  op.what = std::move(c);
  s.ops.ops_at = root.child("ops");
  s.ops.ops.push_back(std::move(op));
  workloads::apply_edits(s, {"", {}, p.algorithm, std::nullopt});
  return s;
}

std::string Sweep::workload_text(const SweepPoint& p) const {
  if (spec_.workload.empty())
    return workloads::edit_workload_json(
        workloads::collective_workload_json(p.preset, p.mesh, spec_.op_kind, spec_.op_axes, *p.bytes), file_,
        {"", {}, p.algorithm, std::nullopt});
  return workloads::edit_workload_json(text_, file_, p.edits());
}

workloads::Workload Sweep::workload(const SweepPoint& p) const {
  try {
    workloads::WorkloadSpec s;
    if (spec_.workload.empty()) {
      s = collective_spec(p);
    } else {
      const auto& read = specs_.find(p.preset)->second;
      if (const InputError* error = std::get_if<InputError>(&read)) throw *error;
      s = std::get<workloads::WorkloadSpec>(read);
      workloads::apply_edits(s, p.edits());
    }
    workloads::Workload w = workloads::build_workload(s);
    if (p.calibrated) calibrate::apply_calibration(w, *calibration_);
    return w;
  } catch (const InputError& e) {
    throw Error(fmt::format("{} (sweep point {}: {})", e.what(), p.index, p.label()));
  }
}

std::string format_sweep_table(const Sweep& s, const std::vector<PointResult>& results) {
  bool gpu = false;
  for (const PointResult& r : results)
    for (const reports::OpRecord& op : r.ops) gpu = gpu || !op.algorithm.empty();
  std::size_t name_width = 10, preset_width = 8;
  for (const PointResult& r : results) {
    preset_width = std::max(preset_width, preset_label(r).size());
    for (const reports::OpRecord& op : r.ops) name_width = std::max(name_width, op.name.size());
  }
  std::string out = fmt::format("# meshsim sweep: {} ({} point{})\n",
                                s.spec().workload.empty() ? s.spec().op_kind + " from the command line" : s.spec().workload,
                                results.size(), results.size() == 1 ? "" : "s");
  out += "# time: simulated; closed: the cheat sheet's closed form; ratio = time / closed; regime: latency- or\n"
         "# bandwidth-bound; lower bound: no schedule on these links beats it (docs/MODEL.md), t/bound = time / it;\n"
         "# algbw = size / time, busbw = algbw x the nccl-tests bus factor (docs/OUTPUT.md)\n#\n";
  const std::string head =
      fmt::format("# {:>5}  {:<{}} {:<9} {:<{}} {:<14} {:>14} {:>13} {:>12} {:>12} {:>13} {:>7}  {:<9} {:>13} {:>7}{}\n",
                  "point", "preset", preset_width, "mesh", "op", name_width, "kind", "size (B)", "time (us)",
                  "algbw (GB/s)", "busbw (GB/s)", "closed (us)", "ratio", "regime", "l.bound (us)", "t/bound",
                  gpu ? "  algorithm/protocol" : "");
  out += head;
  for (const PointResult& r : results) {
    for (const reports::OpRecord& op : r.ops) {
      const bool comm = is_comm(op);
      const auto time = static_cast<double>(op.time_ps), bound = static_cast<double>(op.lower_bound_ps);
      out += fmt::format(
          "  {:>5}  {:<{}} {:<9} {:<{}} {:<14} {:>14} {:>13.3f} {:>12} {:>12} {:>13.3f} {:>7}  {:<9} {:>13} {:>7}{}\n",
          r.point.index, preset_label(r), preset_width, shape_string(r.mesh), op.name, name_width, kind_name(op.kind),
          op.kind == OpKind::Matmul ? std::string("-") : std::to_string(op.bytes), time * 1e-6,
          comm ? fmt::format("{:.2f}", op.algbw_bytes_per_s / 1e9) : std::string("-"),
          comm ? fmt::format("{:.2f}", op.busbw_bytes_per_s / 1e9) : std::string("-"),
          static_cast<double>(op.closed_form_ps) * 1e-6,
          op.ratio ? fmt::format("{:.4f}", *op.ratio) : std::string("-"), op.bound,
          bound > 0 ? fmt::format("{:.3f}", bound * 1e-6) : std::string("-"),
          bound > 0 ? fmt::format("{:.4f}", time / bound) : std::string("-"),
          gpu ? "  " + (op.algorithm.empty()   ? std::string("-")
                        : op.protocol.empty() ? op.algorithm
                                              : op.algorithm + "/" + op.protocol)
              : "");
    }
  }
  // No trailing blanks (the last column is padded).
  std::string trimmed;
  std::size_t start = 0;
  while (start < out.size()) {
    const std::size_t end = out.find('\n', start);
    std::string line = out.substr(start, end - start);
    line.erase(line.find_last_not_of(' ') + 1);
    trimmed += line + "\n";
    start = end + 1;
  }
  return trimmed;
}

std::string format_sweep_csv(const std::vector<PointResult>& results) {
  std::string out =
      "point,preset,mesh,op,kind,axes,bytes,time_ps,closed_form_ps,latency_term_ps,bandwidth_term_ps,ratio,bound,"
      "algorithm,protocol,algbw_bytes_per_s,busbw_bytes_per_s,transfers,link_bytes,start_ps,end_ps,lower_bound_ps,"
      "lower_bound_term";
  // With a calibration, a last column says which points used it.
  bool calibrated = false;
  for (const PointResult& r : results) calibrated = calibrated || r.point.calibrated;
  out += calibrated ? ",calibrated\n" : "\n";
  for (const PointResult& r : results) {
    for (const reports::OpRecord& op : r.ops) {
      const bool comm = is_comm(op);
      // The communication columns are empty for a local op (the run's --json has no such keys).
      const auto when_comm = [&](const std::string& v) { return comm ? v : std::string(); };
      out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", r.point.index,
                         r.preset, shape_string(r.mesh), op.name, kind_name(op.kind), joined(op.mesh_axes, " "),
                         op.bytes, op.time_ps, op.closed_form_ps, when_comm(std::to_string(op.latency_term_ps)),
                         when_comm(std::to_string(op.bandwidth_term_ps)), cell(op.ratio), op.bound, op.algorithm,
                         op.protocol, when_comm(cell(op.algbw_bytes_per_s)),
                         when_comm(cell(op.busbw_bytes_per_s)), op.transfers, op.link_bytes,
                         op.start_ps, op.end_ps, when_comm(std::to_string(op.lower_bound_ps)),
                         when_comm(op.lower_bound_term));
      if (calibrated) out.insert(out.size() - 1, r.point.calibrated ? ",true" : ",false");
    }
  }
  return out;
}

PointResult simulate_point(const Sweep& s, const SweepPoint& p, const driver::SimulateOptions& options) {
  const workloads::Workload w = s.workload(p);
  driver::RunContext run(w);
  const driver::RunResult r = driver::simulate(w, run, options);
  PointResult out;
  out.point = p;
  out.preset = w.hardware.preset;
  for (const workloads::MeshAxis& m : w.mesh) out.mesh.push_back(m.size);
  for (const driver::OpResult& o : r.ops) out.ops.push_back(reports::op_record(o));
  out.run = reports::format_json(w, run, r);
  return out;
}

namespace {

// Fields of an encoded point: the run, the preset, the mesh, then these per op.
constexpr std::size_t kHead = 3, kOpFields = 20;

// A double as text that reads back to the same double.
std::string exact(double v) { return fmt::format("{}", v); }

template <class T>
T number(const std::string& text) {
  T v{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  MESHSIM_ASSERT(ec == std::errc() && end == text.data() + text.size(), "a number encode_point wrote");
  return v;
}

// "a b c" as {"a", "b", "c"}; "" as none.
std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  for (std::size_t start = 0; !text.empty();) {
    const std::size_t end = text.find(sep, start);
    out.push_back(text.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

}  // namespace

std::string encode_point(const PointResult& r) {
  std::vector<std::string> f = {r.run, r.preset, shape_string(r.mesh)};
  for (const reports::OpRecord& op : r.ops) {
    const std::string kind(kind_name(op.kind));
    f.insert(f.end(), {op.name, kind, joined(op.mesh_axes, " "), std::to_string(op.bytes),
                       std::to_string(op.start_ps), std::to_string(op.end_ps), std::to_string(op.time_ps),
                       std::to_string(op.closed_form_ps), std::to_string(op.latency_term_ps),
                       std::to_string(op.bandwidth_term_ps), std::to_string(op.lower_bound_ps), op.lower_bound_term,
                       exact(op.algbw_bytes_per_s), exact(op.busbw_bytes_per_s),
                       op.ratio ? exact(*op.ratio) : std::string(), op.bound, op.algorithm, op.protocol,
                       std::to_string(op.transfers), std::to_string(op.link_bytes)});
  }
  return pack_texts(f);
}

PointResult decode_point(const SweepPoint& p, std::string_view text) {
  const std::optional<std::vector<std::string>> f = unpack_texts(std::string(text));
  MESHSIM_ASSERT(f && f->size() >= kHead && (f->size() - kHead) % kOpFields == 0, "a point encode_point wrote");
  PointResult r;
  r.point = p;
  r.run = (*f)[0];
  r.preset = (*f)[1];
  for (const std::string& size : split((*f)[2], 'x')) r.mesh.push_back(number<int>(size));
  for (std::size_t at = kHead; at < f->size(); at += kOpFields) {
    const auto field = [&](std::size_t i) -> const std::string& { return (*f)[at + i]; };
    reports::OpRecord op;
    op.name = field(0);
    const std::optional<OpKind> kind = parse_kind(field(1));
    MESHSIM_ASSERT(kind.has_value(), "an op kind encode_point wrote");
    op.kind = *kind;
    op.mesh_axes = split(field(2), ' ');
    op.bytes = number<std::uint64_t>(field(3));
    op.start_ps = number<std::int64_t>(field(4));
    op.end_ps = number<std::int64_t>(field(5));
    op.time_ps = number<std::int64_t>(field(6));
    op.closed_form_ps = number<std::int64_t>(field(7));
    op.latency_term_ps = number<std::int64_t>(field(8));
    op.bandwidth_term_ps = number<std::int64_t>(field(9));
    op.lower_bound_ps = number<std::int64_t>(field(10));
    op.lower_bound_term = field(11);
    op.algbw_bytes_per_s = number<double>(field(12));
    op.busbw_bytes_per_s = number<double>(field(13));
    if (!field(14).empty()) op.ratio = number<double>(field(14));
    op.bound = field(15);
    op.algorithm = field(16);
    op.protocol = field(17);
    op.transfers = number<std::uint64_t>(field(18));
    op.link_bytes = number<std::uint64_t>(field(19));
    r.ops.push_back(std::move(op));
  }
  return r;
}

std::vector<Measured> read_measured(const std::string& path, const std::string& hardware,
                                    const std::function<bool(const calibrate::MeasuredPoint&)>& keep) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open file");
  {
    // A file of points or an nccl-tests log (docs/CALIBRATION.md): its times.
    std::ostringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    // The first line that is neither blank nor a comment.
    std::string head;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
      if (line.find_first_not_of(" \t\r") != std::string::npos && line[line.find_first_not_of(" \t\r")] != '#') {
        head = line;
        break;
      }
    const bool points = (!head.empty() && head.find('{') == head.find_first_not_of(" \t")) ||
                        text.find("# nThread") != std::string::npos || text.find("#wrong") != std::string::npos ||
                        head.find("time_s") != std::string::npos;
    if (points) {
      std::vector<Measured> out;
      calibrate::NcclTestsContext context;
      context.hardware = hardware;
      for (const calibrate::MeasuredPoint& p : calibrate::load_points(path, context))
        if (!keep || keep(p)) out.push_back({p.bytes, p.time_s * 1e6});
      if (out.empty()) throw Error(path + ": no measured point of this sweep's collective and system");
      return out;
    }
    in.clear();
    in.seekg(0);
  }
  std::vector<Measured> out;
  std::string line;
  int number = 0;
  bool header_allowed = true;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const std::size_t comma = line.find(',');
    const std::string a = line.substr(0, comma);
    const std::string b = comma == std::string::npos ? "" : line.substr(comma + 1);
    std::uint64_t bytes = 0;
    double time = 0;
    const auto [pa, ea] = std::from_chars(a.data(), a.data() + a.size(), bytes);
    const auto [pb, eb] = std::from_chars(b.data(), b.data() + b.size(), time);
    const bool ok = comma != std::string::npos && ea == std::errc() && pa == a.data() + a.size() && bytes > 0 &&
                    eb == std::errc() && pb == b.data() + b.size() && std::isfinite(time) && time > 0;
    if (!ok) {
      if (header_allowed && !line.empty() && !std::isdigit(static_cast<unsigned char>(line[0]))) {
        header_allowed = false;
        continue;
      }
      throw Error(fmt::format("{}:{}: expected 'bytes,time_us' (an integer > 0 and a time in microseconds > 0), got "
                              "'{}'",
                              path, number, line.size() > 80 ? line.substr(0, 80) + "..." : line));
    }
    header_allowed = false;
    out.push_back({bytes, time});
  }
  if (out.empty()) throw Error(path + ": no measured points (expected lines 'bytes,time_us')");
  return out;
}

namespace {

std::string size_label(double bytes) {
  const char* units[] = {"B", "K", "M", "G", "T"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return fmt::format("{:.3g}{}", bytes, units[u]);
}

struct Series {
  std::string title;
  std::vector<const reports::OpRecord*> ops;  // sorted by bytes
};

// A curve of every series: its column of the data file, its gnuplot style, its
// colour (null: the series's own number; "black"; else this colour with one
// series, the series's number with several, where its dash tells the curves
// apart) and its title.
struct Curve {
  int column;
  const char* style;
  const char* colour;
  const char* title;
};

// gnuplot's `plot` of `curves` for every series (data block `index i`, named by
// its first curve), then with
// `measured_column` (0: none) the measured points of the block after them.
std::string plot_command(const std::string& data, const std::vector<Series>& series, const std::vector<Curve>& curves,
                         int measured_column) {
  std::vector<std::string> items;
  for (std::size_t i = 0; i < series.size(); ++i) {
    const std::string t = series.size() == 1 ? "" : series[i].title + ": ";
    for (const Curve& c : curves) {
      const std::string colour = !c.colour                          ? std::to_string(i + 1)
                                 : std::string_view(c.colour) == "black" ? std::string("rgb 'black'")
                                 : series.size() == 1                    ? fmt::format("rgb '{}'", c.colour)
                                                                         : std::to_string(i + 1);
      items.push_back(fmt::format("{} index {} using 1:{} with {} lc {} title {}", &c == &curves.front() ? data : "''", i,
                                  c.column, c.style, colour, gp_quote(t + c.title)));
    }
  }
  if (measured_column > 0)
    items.push_back(fmt::format("{} index {} using 1:{} with points pt 6 ps 1.2 lc rgb 'red' title 'measured'", data,
                                series.size(), measured_column));
  return "plot " + fmt::format("{}", fmt::join(items, ", \\\n  "));
}

}  // namespace

void plot_sweep(const std::string& prefix, const std::vector<PointResult>& results,
                const std::vector<Measured>& measured) {
  // One series per (preset, mesh, algorithm asked, op): its points by bytes.
  std::vector<Series> series;
  std::map<std::string, std::size_t> index;
  for (const PointResult& r : results) {
    for (const reports::OpRecord& op : r.ops) {
      if (op.kind == OpKind::Matmul || !is_comm(op)) continue;
      std::string title = preset_label(r) + " " + shape_string(r.mesh) + " " + op.name;
      if (!r.point.algorithm.empty()) title += " " + r.point.algorithm;
      auto [it, added] = index.emplace(title, series.size());
      if (added) series.push_back({title, {}});
      series[it->second].ops.push_back(&op);
    }
  }
  std::size_t distinct_bytes = 0;
  for (const Series& s : series) distinct_bytes = std::max(distinct_bytes, s.ops.size());
  if (series.empty() || distinct_bytes < 2)
    throw Error("--plot: needs a sweep over bytes (--bytes FROM:TO) of at least one collective or send");
  for (Series& s : series)
    std::stable_sort(s.ops.begin(), s.ops.end(),
                     [](const reports::OpRecord* a, const reports::OpRecord* b) { return a->bytes < b->bytes; });

  // The data: one block per series, then the measured points.
  std::string dat = "# meshsim sweep plot data; one block per series (gnuplot index), then the measured points\n";
  std::uint64_t lo = UINT64_MAX, hi = 0;
  std::vector<double> knees;
  for (const Series& s : series) {
    dat += fmt::format("# {}\n# bytes time_us latency_term_us bandwidth_term_us closed_form_us algbw_GBps busbw_GBps "
                       "closed_busbw_GBps bandwidth_term_busbw_GBps lower_bound_us lower_bound_busbw_GBps\n",
                       s.title);
    for (const reports::OpRecord* op : s.ops) {
      lo = std::min(lo, op->bytes);
      hi = std::max(hi, op->bytes);
      const auto time = static_cast<double>(op->time_ps), closed = static_cast<double>(op->closed_form_ps),
                 lat = static_cast<double>(op->latency_term_ps), bw = static_cast<double>(op->bandwidth_term_ps);
      const double busbw = op->busbw_bytes_per_s / 1e9;
      const auto bound = static_cast<double>(op->lower_bound_ps);
      dat += fmt::format("{} {:.6f} {:.6f} {:.6f} {:.6f} {:.6f} {:.6f} {:.6f} {:.6f} {:.6f} {:.6f}\n", op->bytes,
                         time * 1e-6, lat * 1e-6, bw * 1e-6, closed * 1e-6, op->algbw_bytes_per_s / 1e9, busbw,
                         closed > 0 ? busbw * time / closed : 0.0, bw > 0 ? busbw * time / bw : 0.0, bound * 1e-6,
                         bound > 0 ? busbw * time / bound : 0.0);
    }
    dat += "\n\n";
    // The knee: the size at which the (linear) bandwidth term reaches the latency term.
    const reports::OpRecord& last = *s.ops.back();
    const auto lat = static_cast<double>(last.latency_term_ps), bw = static_cast<double>(last.bandwidth_term_ps);
    knees.push_back(bw > 0 && lat > 0 ? static_cast<double>(last.bytes) * lat / bw : 0.0);
  }
  // Measured bus bandwidth with the first series's bus factor (busbw / algbw).
  const reports::OpRecord& ref = *series.front().ops.front();
  const double factor = ref.algbw_bytes_per_s > 0 ? ref.busbw_bytes_per_s / ref.algbw_bytes_per_s : 1.0;
  if (!measured.empty()) {
    dat += "# measured\n# bytes time_us busbw_GBps\n";
    for (const Measured& m : measured) {
      lo = std::min(lo, m.bytes);
      hi = std::max(hi, m.bytes);
      dat += fmt::format("{} {:.6f} {:.6f}\n", m.bytes, m.time_us,
                         static_cast<double>(m.bytes) / (m.time_us * 1e-6) * factor / 1e9);
    }
    dat += "\n\n";
  }

  // x tics at powers of two, at most about ten of them.
  const int first = static_cast<int>(std::floor(std::log2(static_cast<double>(lo))));
  const int last = static_cast<int>(std::ceil(std::log2(static_cast<double>(hi))));
  const int step = std::max(1, (last - first + 9) / 10);
  std::string xtics;
  for (int e = first; e <= last; e += step)
    xtics += fmt::format("{}\"{}\" {:.0f}", xtics.empty() ? "" : ", ", size_label(std::ldexp(1.0, e)), std::ldexp(1.0, e));

  const std::string data = gp_quote(prefix + ".dat");
  std::string body;
  body += "set multiplot layout 2,1\n";
  body += fmt::format("set logscale x 2\nset xrange [{:.1f}:{:.1f}]\nset xtics ({})\nset grid\n",
                      std::ldexp(1.0, first) / 1.15, std::ldexp(1.0, last) * 1.15, xtics);
  body += "set key top left box opaque font ',9'\nset xlabel 'message size V (bytes, K = 1024)'\n";
  body += "set yrange [*:*]\nset logscale y 10\nset ylabel 'time (us)'\nset format y '%g'\n";
  body += "set title 'Time: simulated (points) beside the closed form (latency term, bandwidth term, their max) and the "
          "lower bound'\n";
  for (std::size_t i = 0; i < series.size(); ++i) {
    if (knees[i] <= 0) continue;
    body += fmt::format("set arrow {} from {:.3f}, graph 0 to {:.3f}, graph 1 nohead dt 3 lw 1.5 lc {}\n", i + 1,
                        knees[i], knees[i], i + 1);
    body += fmt::format("set label {} {} at {:.3f}, graph {:.2f} offset 0.5,0 font ',9' tc lt {}\n", i + 1,
                        gp_quote(fmt::format("knee {:.0f} bytes ({})", knees[i], size_label(std::round(knees[i])))), knees[i], 0.06 + 0.06 * static_cast<double>(i),
                        i + 1);
  }
  const auto plot = [&](const std::vector<Curve>& curves, int measured_column) {
    return plot_command(data, series, curves, measured.empty() ? 0 : measured_column);
  };
  body += plot({{2, "linespoints lw 2 pt 7 ps 0.7", nullptr, "simulated"},
                {3, "lines dt 2 lw 1.5", "#1f77b4", "latency term"},
                {4, "lines dt 4 lw 1.5", "#2ca02c", "bandwidth term"},
                {5, "lines lw 1", "black", "closed form = max"},
                {10, "lines dt 5 lw 1.5", "#d62728", "lower bound"}},
               2) +
          "\n";
  body += "unset arrow\nunset label\n";
  body += "unset logscale y\nset yrange [0:*]\nset ylabel 'bus bandwidth (GB/s)'\n";
  body += "set key bottom right box opaque font ',9'\n";
  body += "set title 'Bus bandwidth (nccl-tests busbw): simulated beside the closed form and the lower bound'\n";
  body += plot({{7, "linespoints lw 2 pt 7 ps 0.7", nullptr, "simulated busbw"},
                {9, "lines dt 4 lw 1.5", "#2ca02c", "bandwidth term only"},
                {8, "lines lw 1", "black", "closed form"},
                {11, "lines dt 5 lw 1.5", "#d62728", "at the lower bound"}},
               3);
  body += "\nunset multiplot\n";

  write_plot(prefix, "meshsim sweep plot", dat, body, 1100, 1000);
}

}  // namespace meshsim::studies
