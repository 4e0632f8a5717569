// The search's JSON frontend and writer (docs/SEARCH.md): a spec's text read
// into a SearchSpec (its system and step through the workload frontend's
// readers), and a plan's workload and the search's results written as JSON.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "base/error.hpp"
#include "base/text_file.hpp"
#include "search/search_detail.hpp"
#include "search/search_json.hpp"
#include "topology/gpu_preset.hpp"
#include "topology/preset.hpp"
#include "workloads/json_frontend.hpp"

namespace meshsim::search {

using detail::book_x;
using detail::kSwitchInfo;
using detail::nearest_x;
using detail::Rules;
using detail::rules_of;
using workloads::Cursor;
using workloads::Json;

namespace {

constexpr std::uint64_t kLongSequence = 32768;

const std::vector<std::string> kKnownStrategies = {"data", "fsdp", "tensor", "pipeline", "expert", "context"};

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

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

// The slices of `chips` chips a TPU generation offers: shapes of its axes
// (every order, so that every run of axes can be tried), each axis 1, 2 or 4
// (inside one 4x4x4 cube) or every axis a multiple of 4 (whole cubes) on v4 and
// v5p; each axis a power of two up to 16 on v5e and v6e. Shapes that differ
// only by axes of size 1 are listed once.
std::vector<std::vector<int>> slice_shapes(const topology::Preset& p, std::uint64_t chips) {
  std::vector<std::vector<int>> out;
  std::vector<std::vector<int>> seen;  // the sizes > 1 of each
  const std::size_t dims = static_cast<std::size_t>(p.max_axes);
  std::vector<int> s(dims, 1);
  const auto allowed = [&] {
    if (p.wrap_rule == topology::WrapRule::AxisOf16)
      return std::all_of(s.begin(), s.end(), [](int v) { return v <= 16 && (v & (v - 1)) == 0; });
    return std::all_of(s.begin(), s.end(), [](int v) { return v == 1 || v == 2 || v == 4; }) ||
           std::all_of(s.begin(), s.end(), [](int v) { return v % 4 == 0; });
  };
  const auto walk = [&](auto& self, std::size_t i, std::uint64_t left) -> void {
    if (i + 1 == dims) {
      if (left > 4096) return;
      s[i] = static_cast<int>(left);
      if (!allowed()) return;
      std::vector<int> big;
      for (int v : s)
        if (v > 1) big.push_back(v);
      if (std::find(seen.begin(), seen.end(), big) != seen.end()) return;
      seen.push_back(big);
      out.push_back(s);
      return;
    }
    for (std::uint64_t d = 1; d <= left && d <= 4096; ++d)
      if (left % d == 0) {
        s[i] = static_cast<int>(d);
        self(self, i + 1, left / d);
      }
  };
  walk(walk, 0, chips);
  return out;
}

std::vector<bool> bools_of(const Cursor& c) {
  return list_of<bool>(c, [](const Cursor& e) {
    if (!e.raw().is_boolean()) e.fail("expected true or false, got " + e.type_name());
    return e.raw().get<bool>();
  });
}

// The keys of "search" (none when it is absent).
struct SearchKeys {
  std::optional<Cursor> search;
  std::optional<Cursor> operator()(const char* k) const { return search ? search->find(k) : std::nullopt; }
};

// A GPU cluster's sizes, "search.chips" or topology.nodes, as the nodes'
// layouts: N, and every grid N0 x N1.
void read_gpu_layouts(SearchSpec& spec, const topology::GpuPreset& g, const std::string& preset, const Cursor& top,
                      const std::optional<Cursor>& topo, const SearchKeys& key) {
  spec.gpu = true;
  spec.gpus_per_node = g.gpus_per_node;
  if (auto shapes = key("shapes")) shapes->fail("a GPU cluster is sized by its nodes: give \"chips\" or topology.nodes");
  int n = 0;
  if (topo) topo->only_keys({"nodes"});
  if (auto chips = key("chips")) {
    if (topo && topo->find("nodes"))
      chips->fail("topology.nodes already sizes the cluster; give one of \"chips\" and topology.nodes");
    const auto c = static_cast<std::uint64_t>(chips->as_int_in(1, std::int64_t{1} << 20));
    if (c % static_cast<std::uint64_t>(g.gpus_per_node) != 0)
      chips->fail(fmt::format("{} GPUs are not whole {} nodes of {} GPUs", c, preset, g.gpus_per_node));
    n = static_cast<int>(c / static_cast<std::uint64_t>(g.gpus_per_node));
    if (n > 32768) chips->fail("more than 32768 nodes");
  } else {
    if (!topo) top.fail("give the cluster's size: \"topology\": {\"nodes\": N} (or \"search\": {\"chips\": N})");
    n = static_cast<int>(topo->at("nodes").as_int_in(1, 32768));
  }
  spec.layouts.push_back({n});
  for (int a = 2; a * 2 <= n; ++a)
    if (n % a == 0) spec.layouts.push_back({a, n / a});
}

// A TPU's slices: "search.shapes", "search.chips" (every slice of that many
// chips) or topology.shape; and topology.slices.
void read_tpu_layouts(SearchSpec& spec, const topology::Preset& p, const std::string& preset, const Cursor& top,
                      const std::optional<Cursor>& topo, const SearchKeys& key) {
  if (topo) topo->only_keys({"shape", "wraparound", "twisted", "slices"});
  const auto shape = topo ? topo->find("shape") : std::nullopt;
  const auto read_shape = [&](const Cursor& c) {
    if (!c.raw().is_array() || c.raw().empty() || c.raw().size() > static_cast<std::size_t>(p.max_axes))
      c.fail(fmt::format("expected an array of 1 to {} sizes", p.max_axes));
    std::vector<int> out;
    for (const Cursor& e : c.elements()) out.push_back(static_cast<int>(e.as_int_in(1, 4096)));
    return out;
  };
  const auto shapes = key("shapes");
  const auto chips = key("chips");
  if (shapes && chips) chips->fail("\"shapes\" already lists the slices; give one of \"shapes\" and \"chips\"");
  for (const auto& k : {shapes, chips}) {
    if (!k) continue;
    if (shape) k->fail("topology.shape already fixes the slice; give one of them");
    if (auto w = topo ? topo->find("wraparound") : std::nullopt)
      w->fail("a wraparound per axis fits one shape: with search.shapes or search.chips each shape gets its "
              "preset's");
  }
  if (shapes) {
    spec.layouts = list_of<std::vector<int>>(*shapes, read_shape);
    const auto count = [](const std::vector<int>& l) {
      std::int64_t n = 1;
      for (int v : l) n *= v;
      return n;
    };
    for (std::size_t i = 1; i < spec.layouts.size(); ++i)
      if (count(spec.layouts[i]) != count(spec.layouts[0]))
        shapes->fail(fmt::format("the shapes have {} and {} chips: the search compares plans on one system size",
                                 count(spec.layouts[0]), count(spec.layouts[i])));
  } else if (chips) {
    const auto c = static_cast<std::uint64_t>(chips->as_int_in(1, std::int64_t{1} << 20));
    spec.layouts = slice_shapes(p, c);
    if (spec.layouts.empty())
      chips->fail(fmt::format("no {} slice has {} chips ({})", preset, c,
                              p.wrap_rule == topology::WrapRule::AxisOf16
                                  ? "a slice is a power of two up to 16 chips along each axis"
                                  : "a slice is 1, 2 or 4 chips along each axis, or whole 4x4x4 cubes"));
  } else {
    if (!shape)
      top.fail("give the slice's shape: \"topology\": {\"shape\": [...]} (or \"search\": {\"shapes\": [...]} or "
               "{\"chips\": N})");
    spec.layouts.push_back(read_shape(*shape));
  }
  if (auto slices = topo ? topo->find("slices") : std::nullopt)
    spec.slices = static_cast<int>(slices->as_int_in(1, 4096));
}

// The strategies, microbatches, recompute policies, schedules and virtual
// stages to choose among; `training` is the spec's step as written.
void read_choices(SearchSpec& spec, const Cursor& training, const SearchKeys& key) {
  // Context parallelism by default only for long sequences (32k tokens or more,
  // long-context training); at shorter ones its plans lower to many more ops
  // (more microbatches per replica) for little gain. "strategies" can name it.
  spec.strategies = {"data", "fsdp", "tensor", "pipeline"};
  if (spec.moe) spec.strategies.emplace_back("expert");
  if (spec.seq_len >= kLongSequence) spec.strategies.emplace_back("context");
  if (auto v = key("strategies"))
    spec.strategies = list_of<std::string>(*v, [&](const Cursor& e) {
      const std::string name = e.as_string();
      if (!has(kKnownStrategies, name))
        e.fail(fmt::format("unknown strategy '{}' (known: data, fsdp, tensor, pipeline, expert, context)", name));
      if (name == "expert" && !spec.moe) e.fail("the model has no experts");
      return name;
    });
  // A list in "search" or one value in "training", never both.
  const auto one_place = [&](const char* k, const char* training_key) {
    auto v = key(k);
    if (v && training.find(training_key))
      v->fail(fmt::format("training.{} already fixes it; give one of them", training_key));
    return v;
  };
  if (auto v = one_place("microbatch", "microbatch"))
    spec.microbatches =
        list_of<std::uint64_t>(*v, [](const Cursor& e) { return static_cast<std::uint64_t>(e.as_int_in(1, 1 << 20)); });
  if (auto v = one_place("recompute", "recompute"))
    spec.recompute = list_of<std::string>(*v, [](const Cursor& e) {
      const std::string name = e.as_string();
      if (name != "none" && name != "selective" && name != "full")
        e.fail(fmt::format("unknown recompute policy '{}' (known: none, selective, full)", name));
      return name;
    });
  const Json& t = training.raw();
  if (spec.microbatches.empty())
    spec.microbatches = {t.contains("microbatch") && t.at("microbatch").is_number_unsigned()
                             ? t.at("microbatch").get<std::uint64_t>()
                             : 1};
  if (spec.recompute.empty())
    spec.recompute = {t.contains("recompute") && t.at("recompute").is_string() ? t.at("recompute").get<std::string>()
                                                                              : "none"};
  const bool pipelines = has(spec.strategies, "pipeline");
  spec.schedules = {"1f1b", "interleaved"};
  if (auto v = key("schedule")) {
    if (!pipelines) v->fail("no plan has a pipeline: \"pipeline\" is not among the strategies");
    spec.schedules = list_of<std::string>(*v, [](const Cursor& e) {
      const std::string name = e.as_string();
      if (name != "gpipe" && name != "1f1b" && name != "interleaved")
        e.fail(fmt::format("unknown schedule '{}' (known: gpipe, 1f1b, interleaved)", name));
      return name;
    });
  }
  spec.virtual_stages = {2};
  if (auto v = key("virtual_stages")) {
    if (!has(spec.schedules, "interleaved"))
      v->fail("virtual stages need the interleaved schedule, which \"schedule\" leaves out");
    if (!pipelines) v->fail("no plan has a pipeline: \"pipeline\" is not among the strategies");
    spec.virtual_stages =
        list_of<std::uint64_t>(*v, [](const Cursor& e) { return static_cast<std::uint64_t>(e.as_int_in(2, 1024)); });
  }
}

// The switches: a list in "search", or the spec's one value in
// training.overlap, never both (a value taken from there leaves `base`).
void read_switches(SearchSpec& spec, const Cursor& training, const SearchKeys& key, Json& base) {
  const auto spec_overlap = training.find("overlap");
  for (int i = 0; i < kSwitches; ++i) {
    const detail::SwitchInfo& w = kSwitchInfo[static_cast<std::size_t>(i)];
    std::vector<bool>& values = spec.switches[static_cast<std::size_t>(i)];
    values = w.defaults;
    const auto given = w.overlap_key && spec_overlap && spec_overlap->raw().is_object()
                           ? spec_overlap->find(w.overlap_key)
                           : std::nullopt;
    if (given && given->raw().is_boolean()) values = {given->raw().get<bool>()};
    if (auto v = key(w.key)) {
      if (given) v->fail(fmt::format("training.overlap.{} already fixes it; give one of them", w.overlap_key));
      values = bools_of(*v);
      if (std::none_of(w.strategies.begin(), w.strategies.end(), [&](const char* n) { return has(spec.strategies, n); }))
        v->fail(fmt::format("it applies to plans with {} parallelism, and \"{}\" is not among the strategies",
                            w.strategies.front(), w.strategies.front()));
    }
    if (given) base["training"]["overlap"].erase(w.overlap_key);
  }
  const auto& sp = spec.switches[kSequenceParallel];
  if (spec.switches[kOverlapTensor] == std::vector<bool>{true} && sp == std::vector<bool>{false})
    (key("overlap_tensor") ? *key("overlap_tensor") : *key("sequence_parallel"))
        .fail("collective matmuls need sequence parallelism, which \"sequence_parallel\" turns off");
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
  const workloads::ModelSpec model = workloads::parse_model(training.at("model"));
  spec.moe = model.experts > 0;
  spec.ffn = model.ffn;
  spec.seq_len = model.seq_len;
  Json base = root;
  base.erase("search");
  const SearchKeys key{top.find("search")};
  if (key.search)
    key.search->only_keys({"strategies", "microbatch", "recompute", "schedule", "virtual_stages", "sharded_optimizer",
                           "overlap_tensor", "sequence_parallel", "overlap_fsdp_prefetch", "overlap_gradient_reduction",
                           "shapes", "chips", "split_axes"});

  const Cursor hw = top.at("hardware");
  const std::string preset = preset_of(hw);
  const auto topo = top.find("topology");
  if (const topology::GpuPreset* g = topology::find_gpu_preset(preset))
    read_gpu_layouts(spec, *g, preset, top, topo, key);
  else if (const topology::Preset* p = topology::find_preset(preset))
    read_tpu_layouts(spec, *p, preset, top, topo, key);
  else
    (hw.raw().is_string() ? hw : hw.at("preset"))
        .fail(fmt::format("unknown preset '{}' (known: {}, {})", preset, topology::preset_names(),
                          topology::gpu_preset_names()));
  spec.split_axes = spec.gpu;
  if (auto v = key("split_axes")) spec.split_axes = v->as_bool();
  read_choices(spec, training, key);
  read_switches(spec, training, key, base);

  // The system and the step, read once (the plans change their layout, mesh and
  // choices): the base with the first layout, as a plan's workload has it.
  Json system = base;
  if (spec.gpu)
    system["topology"]["nodes"] = spec.layouts.front().size() == 1 ? Json(spec.layouts.front()[0]) : Json(spec.layouts.front());
  else
    system["topology"]["shape"] = spec.layouts.front();
  const Cursor read(system, "", file);
  spec.hardware = workloads::parse_hardware(read.at("hardware"));
  spec.topology = workloads::read_topology(read.at("topology"), spec.hardware);
  spec.training = workloads::read_training(read.at("training"));
  spec.base = base.dump();
  return spec;
}

SearchSpec load_spec(const std::string& path) { return parse_spec(read_text_file(path, "search spec"), path); }

Json plan_workload(const SearchSpec& spec, const Plan& plan) {
  Json w = workloads::parse_json(spec.base, spec.file);
  if (spec.gpu)
    w["topology"]["nodes"] = plan.layout.size() == 1 ? Json(plan.layout[0]) : Json(plan.layout);
  else
    w["topology"]["shape"] = plan.layout;
  Json mesh = Json::object();
  for (const auto& [name, size] : plan.mesh) mesh[name] = size;
  w["mesh"] = mesh;
  Json& t = w["training"];
  t["microbatch"] = plan.microbatch;
  t["recompute"] = plan.recompute;
  Json par = Json::object();
  for (const auto& [strategy, axes] : plan.parallelism)
    par[strategy] = strategy == "pipeline" ? Json(axes.front()) : Json(axes);
  if (plan.pp > 1) {
    par["schedule"] = plan.schedule;
    if (plan.virtual_stages > 1) par["virtual_stages"] = plan.virtual_stages;
  }
  if (plan.on[kShardedOptimizer]) par["sharded_optimizer"] = true;
  if (plan.tp > 1) par["sequence_parallel"] = plan.on[kSequenceParallel];
  t["parallelism"] = par;
  if (plan.tp > 1) t["overlap"]["tensor"] = plan.on[kOverlapTensor];
  if (plan.fsdp > 1) t["overlap"]["fsdp_prefetch"] = plan.on[kFsdpPrefetch];
  if (plan.dp * plan.fsdp * plan.ep * plan.cp > 1) t["overlap"]["gradient_reduction"] = plan.on[kGradientOverlap];
  return w;
}

Json search_json(const SearchSpec& spec, const SearchResult& r, std::size_t top) {
  Json j;
  j["format"] = "meshsim-search";
  j["format_version"] = 2;
  j["spec"] = spec.file;
  j["counts"] = {{"enumerated", r.enumerated}, {"invalid", r.invalid},      {"pruned_by_memory", r.pruned_memory},
                 {"pruned_by_bound", r.pruned_bound}, {"simulated", r.simulated}, {"too_large", r.too_large}};
  j["hbm_bytes"] = r.hbm_bytes;
  const auto plan_json = [&](const PlanResult& p) {
    Json exposed = Json::object(), in_flight = Json::object();
    for (int s = 0; s < kStrategies; ++s) {
      exposed[strategy_name(s)] = p.comm[static_cast<std::size_t>(s)].exposed.ps();
      in_flight[strategy_name(s)] = p.comm[static_cast<std::size_t>(s)].in_flight.ps();
    }
    exposed["bubble"] = p.idle.ps();
    Json switches = Json::object();  // every switch's value (where it does not apply, the default)
    for (int i = 0; i < kSwitches; ++i) switches[switch_key(i)] = p.plan.on[static_cast<std::size_t>(i)];
    return Json{{"step_ps", p.step.ps()},
                {"mfu", p.mfu},
                {"peak_bytes", p.peak_bytes},
                {"bound_ps", p.bound.ps()},
                {"compute_bound_ps", p.compute_bound.ps()},
                {"comm_bound_ps", p.comm_bound.ps()},
                {"dp", p.plan.dp},
                {"fsdp", p.plan.fsdp},
                {"tp", p.plan.tp},
                {"pp", p.plan.pp},
                {"ep", p.plan.ep},
                {"cp", p.plan.cp},
                {"microbatch", p.plan.microbatch},
                {"recompute", p.plan.recompute},
                {"options", p.plan.options},
                {"schedule", p.plan.schedule},
                {"virtual_stages", p.plan.virtual_stages},
                {"switches", switches},
                {"axes", p.plan.axes},
                {"compute_ps", p.compute.ps()},
                {"optimizer_ps", p.optimizer.ps()},
                {"exposed_ps", exposed},
                {"in_flight_ps", in_flight},
                {"workload", plan_workload(spec, p.plan)}};
  };
  Json plans = Json::array();
  for (std::size_t i = 0; i < r.ranked.size() && i < top; ++i) {
    Json p = plan_json(r.ranked[i]);
    p["rank"] = i + 1;
    plans.push_back(std::move(p));
  }
  j["plans"] = plans;
  Json front = Json::array();
  for (const PlanResult* p : pareto_front(r)) {
    const auto rank = static_cast<std::size_t>(p - r.ranked.data()) + 1;
    front.push_back({{"rank", rank}, {"step_ps", p->step.ps()}, {"peak_bytes", p->peak_bytes}, {"axes", p->plan.axes}});
  }
  j["pareto"] = front;
  const Rules k = rules_of(spec, r);
  if (k.c_over_w > 0 && !r.ranked.empty())
    j["rules_of_thumb"] = {{"tokens_per_step", k.tokens},
                           {"chips", r.chips},
                           {"c_over_w", k.c_over_w},
                           {"x_opt", k.x_opt},
                           {"winner_x", book_x(r, r.ranked.front().plan)},
                           {"nearest_x", nearest_x(r, std::min(k.x_opt, static_cast<double>(r.chips)))}};
  return j;
}

}  // namespace meshsim::search
