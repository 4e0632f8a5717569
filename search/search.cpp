#include "search/search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>

#include "base/error.hpp"
#include "base/text_file.hpp"
#include "driver/costs.hpp"
#include "driver/simulate.hpp"
#include "driver/training_report.hpp"
#include "topology/gpu_preset.hpp"
#include "topology/preset.hpp"
#include "workloads/workload.hpp"

namespace meshsim::search {

using workloads::Cursor;
using workloads::Json;

namespace {

const std::vector<std::string> kStrategies = {"data", "fsdp", "tensor", "pipeline"};

std::string strategy_letter(const std::string& s) {
  return s == "data" ? "D" : s == "fsdp" ? "F" : s == "tensor" ? "T" : "P";
}

std::string preset_of(const Cursor& hw) {
  if (hw.raw().is_string()) return hw.as_string();
  if (!hw.raw().is_object()) hw.fail("expected a preset name or an object, got " + hw.type_name());
  return hw.at("preset").as_string();
}

template <class T, class Read>
std::vector<T> list_of(const Cursor& c, Read read) {
  if (!c.raw().is_array() || c.raw().empty()) c.fail("expected a non-empty array");
  std::vector<T> out;
  for (const Cursor& e : c.elements()) {
    T v = read(e);
    if (std::find(out.begin(), out.end(), v) != out.end()) e.fail("listed twice");
    out.push_back(v);
  }
  return out;
}

}  // namespace

SearchSpec parse_spec(std::string_view text, const std::string& file) {
  SearchSpec spec;
  spec.file = file;
  const Json root = workloads::parse_json(text, file);
  const Cursor top(root, "", file);
  top.expect_object();
  if (auto m = top.find("mesh")) m->fail("the search chooses the mesh: remove \"mesh\"");
  top.only_keys({"hardware", "topology", "training", "search"});
  const Cursor training = top.at("training");
  training.expect_object();
  if (auto p = training.find("parallelism")) p->fail("the search chooses the parallelism: remove \"parallelism\"");
  spec.base = root;
  spec.base.erase("search");

  const Cursor hw = top.at("hardware");
  const std::string preset = preset_of(hw);
  const auto topo = top.find("topology");
  if (const topology::GpuPreset* g = topology::find_gpu_preset(preset)) {
    if (!topo) top.fail("give the cluster's size: \"topology\": {\"nodes\": N}");
    topo->only_keys({"nodes"});
    const Cursor nodes = topo->at("nodes");
    const auto n = static_cast<int>(nodes.as_int_in(1, 32768));
    spec.hw_names = {"gpu", "node"};
    spec.hw_sizes = {g->gpus_per_node, n};
    spec.node_grids.push_back({n});
    for (int a = 2; a * 2 <= n; ++a)
      if (n % a == 0) spec.node_grids.push_back({a, n / a});
  } else if (topology::find_preset(preset)) {
    if (!topo) top.fail("give the slice's shape: \"topology\": {\"shape\": [...]}");
    topo->only_keys({"shape", "wraparound", "twisted", "slices"});
    const Cursor shape = topo->at("shape");
    if (!shape.raw().is_array() || shape.raw().empty() || shape.raw().size() > 3)
      shape.fail("expected an array of 1 to 3 sizes");
    static constexpr const char* kNames[] = {"x", "y", "z"};
    std::size_t i = 0;
    for (const Cursor& s : shape.elements()) {
      spec.hw_names.emplace_back(kNames[i++]);
      spec.hw_sizes.push_back(static_cast<int>(s.as_int_in(1, 4096)));
    }
    if (auto slices = topo->find("slices")) {
      spec.hw_names.emplace_back("dcn");
      spec.hw_sizes.push_back(static_cast<int>(slices->as_int_in(1, 4096)));
    }
  } else {
    (hw.raw().is_string() ? hw : hw.at("preset"))
        .fail(fmt::format("unknown preset '{}' (known: {}, {})", preset, topology::preset_names(),
                          topology::gpu_preset_names()));
  }
  if (auto s = top.find("search")) {
    s->only_keys({"strategies", "microbatch", "recompute"});
    if (auto v = s->find("strategies"))
      spec.strategies = list_of<std::string>(*v, [](const Cursor& e) {
        const std::string name = e.as_string();
        if (std::find(kStrategies.begin(), kStrategies.end(), name) == kStrategies.end())
          e.fail(fmt::format("unknown strategy '{}' (known: data, fsdp, tensor, pipeline)", name));
        return name;
      });
    if (auto v = s->find("microbatch"))
      spec.microbatches =
          list_of<std::uint64_t>(*v, [](const Cursor& e) { return static_cast<std::uint64_t>(e.as_int_in(1, 1 << 20)); });
    if (auto v = s->find("recompute"))
      spec.recompute = list_of<std::string>(*v, [](const Cursor& e) {
        const std::string name = e.as_string();
        if (name != "none" && name != "selective" && name != "full")
          e.fail(fmt::format("unknown recompute policy '{}' (known: none, selective, full)", name));
        return name;
      });
  }
  const Json& t = spec.base.at("training");
  if (spec.microbatches.empty())
    spec.microbatches = {t.contains("microbatch") && t.at("microbatch").is_number_unsigned()
                             ? t.at("microbatch").get<std::uint64_t>()
                             : 1};
  if (spec.recompute.empty())
    spec.recompute = {t.contains("recompute") && t.at("recompute").is_string() ? t.at("recompute").get<std::string>()
                                                                              : "none"};
  return spec;
}

SearchSpec load_spec(const std::string& path) { return parse_spec(read_text_file(path, "search spec"), path); }

Json plan_workload(const SearchSpec& spec, const Plan& plan) {
  Json w = spec.base;
  if (!plan.node_grid.empty())
    w["topology"]["nodes"] = plan.node_grid.size() == 1 ? Json(plan.node_grid[0]) : Json(plan.node_grid);
  Json mesh = Json::object();
  for (const auto& [name, size] : plan.mesh) mesh[name] = size;
  w["mesh"] = mesh;
  Json& t = w["training"];
  t["microbatch"] = plan.microbatch;
  t["recompute"] = plan.recompute;
  t["parallelism"] = plan.parallelism;
  return w;
}

namespace {

// Every plan: hardware axes grouped into consecutive runs, a strategy per run
// (adjacent runs differ: the same strategy over both is the merged run), at most
// one pipeline run; then microbatch and recompute.
std::vector<Plan> enumerate(const SearchSpec& spec) {
  std::vector<Plan> plans;
  std::vector<std::vector<int>> grids = spec.node_grids;
  if (grids.empty()) grids.push_back({});
  for (const std::vector<int>& grid : grids) {
    std::vector<std::string> names;
    std::vector<int> sizes;
    if (grid.empty()) {
      names = spec.hw_names;
      sizes = spec.hw_sizes;
    } else {
      names = {"gpu"};
      sizes = {spec.hw_sizes[0]};
      for (std::size_t i = 0; i < grid.size(); ++i) {
        names.push_back(grid.size() == 1 ? "node" : fmt::format("node{}", i));
        sizes.push_back(grid[i]);
      }
    }
    std::vector<std::string> axis_names;  // hardware axes of size > 1
    std::vector<int> axis_sizes;
    for (std::size_t i = 0; i < names.size(); ++i)
      if (sizes[i] > 1) axis_names.push_back(names[i]), axis_sizes.push_back(sizes[i]);
    const std::size_t k = axis_sizes.size();
    if (k == 0) continue;
    for (unsigned cuts = 0; cuts < (1u << (k - 1)); ++cuts) {
      std::vector<std::pair<std::size_t, std::size_t>> runs;  // [begin, end) of hardware axes
      std::size_t begin = 0;
      for (std::size_t i = 0; i + 1 < k; ++i)
        if (cuts & (1u << i)) runs.emplace_back(begin, i + 1), begin = i + 1;
      runs.emplace_back(begin, k);
      const std::size_t g = runs.size();
      std::size_t combos = 1;
      for (std::size_t i = 0; i < g; ++i) combos *= spec.strategies.size();
      for (std::size_t c = 0; c < combos; ++c) {
        std::vector<std::string> chosen;
        for (std::size_t i = 0, rest = c; i < g; ++i, rest /= spec.strategies.size())
          chosen.push_back(spec.strategies[rest % spec.strategies.size()]);
        bool ok = std::count(chosen.begin(), chosen.end(), "pipeline") <= 1;
        for (std::size_t i = 0; i + 1 < g && ok; ++i) ok = chosen[i] != chosen[i + 1];
        if (!ok) continue;
        Plan base;
        base.node_grid = grid;
        std::map<std::string, int> used;
        Json par = Json::object();
        std::vector<std::string> axes_text;
        std::map<std::string, std::uint64_t> degree;
        for (std::size_t i = 0; i < g; ++i) {
          const std::string& s = chosen[i];
          const int n = ++used[s];
          const std::string name = strategy_letter(s) + (n > 1 ? std::to_string(n) : "");
          int size = 1;
          std::string over;
          for (std::size_t a = runs[i].first; a < runs[i].second; ++a) {
            size *= axis_sizes[a];
            over += axis_names[a].size() == 1 ? axis_names[a] : (over.empty() ? "" : ",") + axis_names[a];
          }
          base.mesh.emplace_back(name, size);
          degree[s] = std::max<std::uint64_t>(degree[s], 1) * static_cast<std::uint64_t>(size);
          axes_text.push_back(fmt::format("{}={}({})", name, size, over));
          if (s == "pipeline")
            par["pipeline"] = name;
          else
            par[s].push_back(name);
        }
        if (par.contains("tensor")) par["sequence_parallel"] = true;
        base.parallelism = par;
        base.dp = std::max<std::uint64_t>(degree["data"], 1);
        base.fsdp = std::max<std::uint64_t>(degree["fsdp"], 1);
        base.tp = std::max<std::uint64_t>(degree["tensor"], 1);
        base.pp = std::max<std::uint64_t>(degree["pipeline"], 1);
        base.axes = fmt::format("{}", fmt::join(axes_text, " "));
        if (grid.size() > 1) base.axes += fmt::format(" (nodes {}x{})", grid[0], grid[1]);
        for (std::uint64_t mb : spec.microbatches)
          for (const std::string& rc : spec.recompute) {
            Plan p = base;
            p.index = plans.size();
            p.microbatch = mb;
            p.recompute = rc;
            p.label = fmt::format("dp {} fsdp {} tp {} pp {}, microbatch {}, recompute {}, {}", p.dp, p.fsdp, p.tp,
                                  p.pp, mb, rc, p.axes);
            plans.push_back(std::move(p));
          }
      }
    }
  }
  return plans;
}

// The busiest chip's local kernels at the roofline, back to back: its compute
// unit runs one at a time, so the simulated step cannot be shorter.
Tick compute_bound(const workloads::Workload& w) {
  const std::uint32_t chips = w.make_torus().num_chips();
  std::vector<Tick> busy(chips);
  Tick all;
  for (const workloads::Op& op : w.ops) {
    if (!is_local(op.kind)) continue;
    const Tick t = driver::local_cost(op, w.hardware, w.file).time();
    if (!op.chips)
      all += t;
    else
      for (topology::ChipId c : *op.chips) busy[c] += t;
  }
  Tick most;
  for (const Tick& b : busy) most = max(most, b);
  return all + most;
}

workloads::Workload parse_plan(const SearchSpec& spec, const Plan& plan, bool allow_oom) {
  Json doc = plan_workload(spec, plan);
  if (allow_oom) doc["training"]["allow_oom"] = true;
  return workloads::parse_workload(doc.dump(), spec.file);
}

void simulate_plan(const SearchSpec& spec, PlanResult& r) {
  const workloads::Workload w = parse_plan(spec, r.plan, true);
  const driver::RunResult run = driver::simulate(w);
  const driver::TrainingResult t = driver::training_result(w, run);
  r.simulated = true;
  r.step = t.step;
  r.mfu = t.mfu;
  for (const driver::StageBreakdown& s : t.stages) {
    r.tensor = max(r.tensor, s.tensor);
    r.fsdp = max(r.fsdp, s.fsdp);
    r.data = max(r.data, s.data);
    r.pipeline = max(r.pipeline, s.pipeline);
    r.idle = max(r.idle, s.idle);
  }
}

}  // namespace

SearchResult run_search(const SearchSpec& spec, const SearchOptions& options) {
  SearchResult out;
  std::vector<PlanResult> fits;
  for (Plan& plan : enumerate(spec)) {
    ++out.enumerated;
    PlanResult r;
    r.plan = std::move(plan);
    std::optional<workloads::Workload> w;
    try {
      w = parse_plan(spec, r.plan, true);
    } catch (const InputError& e) {
      ++out.invalid;
      if (out.invalid_reasons.size() < 5) out.invalid_reasons.push_back(fmt::format("{}: {}", r.plan.label, e.message()));
      continue;
    }
    const workloads::StepFormulas& f = w->training->formulas;
    r.peak_bytes = f.peak_bytes;
    out.hbm_bytes = f.hbm_bytes;
    if (f.peak_bytes > f.hbm_bytes) {
      ++out.pruned_memory;
      if (out.smallest_peak_bytes == 0 || f.peak_bytes < out.smallest_peak_bytes) out.smallest_peak_bytes = f.peak_bytes;
      continue;
    }
    r.bound = compute_bound(*w);
    fits.push_back(std::move(r));
  }
  if (out.enumerated == 0) throw InputError(spec.file, "/topology", "the system has no hardware axis to shard over");
  if (fits.empty() && out.pruned_memory == 0)
    throw InputError(spec.file, "/training",
                     fmt::format("none of the {} plans is valid on this system; the first: {}", out.enumerated,
                                 out.invalid_reasons.empty() ? std::string("?") : out.invalid_reasons.front()));
  if (fits.empty())
    throw InputError(spec.file, "/training",
                     fmt::format("the model fits in no plan: the smallest needs {:.2f} GB per chip of {:.2f} GB HBM "
                                 "({} plans too large, {} invalid)",
                                 static_cast<double>(out.smallest_peak_bytes) / 1e9,
                                 static_cast<double>(out.hbm_bytes) / 1e9, out.pruned_memory, out.invalid));
  // Best bound first; a plan whose bound is above the top-th best step so far cannot enter the top.
  std::stable_sort(fits.begin(), fits.end(), [](const PlanResult& a, const PlanResult& b) { return a.bound < b.bound; });
  const std::size_t top = std::max<std::size_t>(options.top, 1);
  std::vector<Tick> best;  // sorted simulated steps
  for (PlanResult& r : fits) {
    if (!options.exhaustive && best.size() >= top && r.bound > best[top - 1]) {
      ++out.pruned_bound;
      out.pruned.push_back(std::move(r));
      continue;
    }
    simulate_plan(spec, r);
    ++out.simulated;
    best.insert(std::upper_bound(best.begin(), best.end(), r.step), r.step);
    out.ranked.push_back(std::move(r));
  }
  std::stable_sort(out.ranked.begin(), out.ranked.end(), [](const PlanResult& a, const PlanResult& b) {
    return a.step != b.step ? a.step < b.step : a.plan.index < b.plan.index;
  });
  return out;
}

std::string format_search(const SearchSpec& spec, const SearchResult& r, std::size_t top) {
  std::string out = fmt::format("# meshsim search: {}\n", spec.file);
  out += fmt::format("plans     {} enumerated: {} invalid, {} pruned by memory (HBM {:.2f} GB per chip), {} pruned by "
                     "the bound, {} simulated\n",
                     r.enumerated, r.invalid, r.pruned_memory, static_cast<double>(r.hbm_bytes) / 1e9, r.pruned_bound,
                     r.simulated);
  out += fmt::format("\n{:>4} {:>12} {:>7} {:>10} {:>5} {:>5} {:>4} {:>4} {:>4} {:<10} {:>10} {:>10} {:>10} {:>10} {:>10}  "
                     "{}\n",
                     "rank", "step (ms)", "MFU %", "mem (GB)", "dp", "fsdp", "tp", "pp", "mb", "recompute",
                     "tensor", "fsdp", "data", "pipeline", "bubble", "axes");
  const auto ms = [](Tick t) { return fmt::format("{:.3f}", t.seconds() * 1e3); };
  for (std::size_t i = 0; i < r.ranked.size() && i < top; ++i) {
    const PlanResult& p = r.ranked[i];
    out += fmt::format("{:>4} {:>12} {:>7.1f} {:>10.2f} {:>5} {:>5} {:>4} {:>4} {:>4} {:<10} {:>10} {:>10} {:>10} {:>10} "
                       "{:>10}  {}\n",
                       i + 1, ms(p.step), 100 * p.mfu, static_cast<double>(p.peak_bytes) / 1e9, p.plan.dp, p.plan.fsdp,
                       p.plan.tp, p.plan.pp, p.plan.microbatch, p.plan.recompute, ms(p.tensor), ms(p.fsdp), ms(p.data),
                       ms(p.pipeline), ms(p.idle), p.plan.axes);
  }
  out += "(tensor, fsdp, data, pipeline: exposed communication of each strategy, bubble: idle time; ms, the most over "
         "pipeline stages)\n";
  for (const std::string& reason : r.invalid_reasons) out += "invalid: " + reason + "\n";
  return out;
}

Json search_json(const SearchSpec& spec, const SearchResult& r, std::size_t top) {
  Json j;
  j["format"] = "meshsim-search";
  j["format_version"] = 1;
  j["spec"] = spec.file;
  j["counts"] = {{"enumerated", r.enumerated}, {"invalid", r.invalid},      {"pruned_by_memory", r.pruned_memory},
                 {"pruned_by_bound", r.pruned_bound}, {"simulated", r.simulated}};
  j["hbm_bytes"] = r.hbm_bytes;
  Json plans = Json::array();
  for (std::size_t i = 0; i < r.ranked.size() && i < top; ++i) {
    const PlanResult& p = r.ranked[i];
    plans.push_back({{"rank", i + 1},
                     {"step_ps", p.step.ps()},
                     {"mfu", p.mfu},
                     {"peak_bytes", p.peak_bytes},
                     {"bound_ps", p.bound.ps()},
                     {"dp", p.plan.dp},
                     {"fsdp", p.plan.fsdp},
                     {"tp", p.plan.tp},
                     {"pp", p.plan.pp},
                     {"microbatch", p.plan.microbatch},
                     {"recompute", p.plan.recompute},
                     {"axes", p.plan.axes},
                     {"exposed_ps",
                      {{"tensor", p.tensor.ps()},
                       {"fsdp", p.fsdp.ps()},
                       {"data", p.data.ps()},
                       {"pipeline", p.pipeline.ps()},
                       {"bubble", p.idle.ps()}}},
                     {"workload", plan_workload(spec, p.plan)}});
  }
  j["plans"] = plans;
  return j;
}

}  // namespace meshsim::search
