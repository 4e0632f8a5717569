#include "search/search.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <new>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>

#include "base/error.hpp"
#include "driver/bounds.hpp"
#include "driver/costs.hpp"
#include "driver/simulate.hpp"
#include "reports/training_report.hpp"
#include "search/search_detail.hpp"
#include "topology/fabric.hpp"
#include "topology/gpu_preset.hpp"
#include "topology/preset.hpp"
#include "workloads/workload.hpp"

namespace meshsim::search {

const char* strategy_name(int s) {
  static constexpr const char* kNames[] = {"tensor", "expert", "context", "fsdp", "data", "pipeline"};
  return s >= 0 && s < kStrategies ? kNames[s] : "?";
}

namespace detail {

const std::array<SwitchInfo, kSwitches> kSwitchInfo = {{
    {"sharded_optimizer", nullptr, {false, true}, {"data"}, "zero-1", nullptr},
    {"overlap_tensor", "tensor", {false, true}, {"tensor"}, "tp overlap", nullptr},
    {"sequence_parallel", nullptr, {true}, {"tensor"}, nullptr, "no sp"},
    {"overlap_fsdp_prefetch", "fsdp_prefetch", {true}, {"fsdp"}, nullptr, "no prefetch"},
    {"overlap_gradient_reduction", "gradient_reduction", {true}, {"data", "fsdp", "expert", "context"}, nullptr,
     "late gradients"},
}};

}  // namespace detail

using detail::kSwitchInfo;

namespace {

std::string strategy_letter(const std::string& s) {
  return s == "data" ? "D" : s == "fsdp" ? "F" : s == "tensor" ? "T" : s == "pipeline" ? "P" : s == "expert" ? "E" : "C";
}

std::string shape_text(const std::vector<int>& s) {
  std::string t;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i > 0) t += 'x';
    t += std::to_string(s[i]);
  }
  return t;
}

}  // namespace

const char* switch_key(int s) { return s >= 0 && s < kSwitches ? kSwitchInfo[static_cast<std::size_t>(s)].key : "?"; }

namespace {

// The plan's system built into `w`, and its step as written (with allow_oom:
// the search prunes by memory itself).
workloads::TrainingSpec plan_system(const SearchSpec& spec, const Plan& plan, workloads::Workload& w) {
  using workloads::StrategySpec;
  workloads::TopologySpec topo = spec.topology;
  if (spec.gpu) {
    topo.nodes = plan.layout;
    topo.node_grid = plan.layout.size() > 1;
  } else {
    topo.shape = plan.layout;
  }
  const SourceRef root{spec.file, ""};
  workloads::MeshSpec mesh;
  mesh.where = root.child("mesh");
  for (const auto& [name, size] : plan.mesh) mesh.axes.push_back({name, size, mesh.where.child(name)});

  workloads::TrainingSpec t = spec.training;
  t.allow_oom = true;
  t.microbatch = plan.microbatch;
  t.recompute = plan.recompute == "full"        ? workloads::Recompute::Full
                : plan.recompute == "selective" ? workloads::Recompute::Selective
                                                : workloads::Recompute::None;
  workloads::TrainingSpec::Plan& p = t.parallelism;
  p.given = true;
  p.where = t.where.child("parallelism");
  for (const auto& [strategy, axes] : plan.parallelism) {
    StrategySpec& s = strategy == "data"     ? p.data
                      : strategy == "fsdp"   ? p.fsdp
                      : strategy == "tensor" ? p.tensor
                      : strategy == "expert" ? p.expert
                      : strategy == "context" ? p.context
                                              : p.pipeline;
    s.given = true;
    s.where = p.where.child(strategy);
    for (std::size_t i = 0; i < axes.size(); ++i)
      s.axes.push_back({axes[i], strategy == "pipeline" ? s.where : s.where.child(i)});
  }
  if (plan.pp > 1) {
    p.schedule = plan.schedule == "gpipe"         ? workloads::Schedule::GPipe
                 : plan.schedule == "interleaved" ? workloads::Schedule::Interleaved
                                                  : workloads::Schedule::OneFOneB;
    p.schedule_at = p.where.child("schedule");
    if (plan.virtual_stages > 1) {
      p.virtual_stages = plan.virtual_stages;
      p.virtual_stages_at = p.where.child("virtual_stages");
    }
  }
  if (plan.on[kShardedOptimizer]) {
    p.sharded_optimizer = true;
    p.sharded_optimizer_at = p.where.child("sharded_optimizer");
  }
  if (plan.tp > 1) {
    p.sequence_parallel = plan.on[kSequenceParallel];
    p.sequence_parallel_at = p.where.child("sequence_parallel");
    t.overlap.tensor = plan.on[kOverlapTensor];
    t.overlap_tensor_at = t.where.child("overlap").child("tensor");
  }
  if (plan.fsdp > 1) t.overlap.fsdp_prefetch = plan.on[kFsdpPrefetch];
  if (plan.dp * plan.fsdp * plan.ep * plan.cp > 1) t.overlap.gradient_reduction = plan.on[kGradientOverlap];

  w.file = spec.file;
  workloads::build_system(w, spec.hardware, topo, mesh);
  return t;
}

}  // namespace

workloads::Workload build_plan(const SearchSpec& spec, const Plan& plan) {
  workloads::Workload w;
  workloads::build_training(w, plan_system(spec, plan, w));
  return w;
}

namespace {

// A hardware axis split in two factors (a mesh axis over part of it): its
// index among the layout's hardware axes (the GPUs of a node: 0) and the
// inner factor; none: axis -1.
struct Split {
  int axis = -1;
  int inner = 0;
};

// The hardware axes of a layout (of size > 1), the split one as its two
// factors, inner first, named as the workload names them: gpu0, gpu1 on GPUs;
// x:4, x:4@4 on a torus. `cut`: the index of the inner factor (the plans put a
// cut after it), or -1.
struct Layout {
  std::vector<std::string> names;
  std::vector<int> sizes;
  int cut = -1;
};

Layout layout_axes(const SearchSpec& spec, const std::vector<int>& layout, const Split& split) {
  std::vector<std::string> names;
  std::vector<int> sizes;
  if (spec.gpu) {
    names = {"gpu"};
    sizes = {spec.gpus_per_node};
    for (std::size_t i = 0; i < layout.size(); ++i) {
      names.push_back(layout.size() == 1 ? "node" : fmt::format("node{}", i));
      sizes.push_back(layout[i]);
    }
  } else {
    static constexpr const char* kNames[] = {"x", "y", "z"};
    for (std::size_t i = 0; i < layout.size(); ++i) names.emplace_back(kNames[i]), sizes.push_back(layout[i]);
    if (spec.slices > 0) names.emplace_back("dcn"), sizes.push_back(spec.slices);
  }
  Layout out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (sizes[i] < 2) continue;
    if (static_cast<int>(i) != split.axis) {
      out.names.push_back(names[i]), out.sizes.push_back(sizes[i]);
      continue;
    }
    const int inner = split.inner, outer = sizes[i] / split.inner;
    out.cut = static_cast<int>(out.names.size());
    out.names.push_back(spec.gpu ? "gpu0" : fmt::format("{}:{}", names[i], inner));
    out.names.push_back(spec.gpu ? "gpu1" : fmt::format("{}:{}@{}", names[i], outer, inner));
    out.sizes.push_back(inner), out.sizes.push_back(outer);
  }
  return out;
}

// The splits to try on a layout: none, then every hardware axis (a GPU node's
// GPUs; a torus axis, not the slices nor a twisted torus's) in two factors
// (d, size/d) for every divisor 1 < d < size: Megatron's TP 2 or 4 beside data
// parallelism in a DGX node, the scaling book's TP 4 inside a torus axis of 16.
std::vector<Split> axis_splits(const SearchSpec& spec, const std::vector<int>& layout) {
  std::vector<Split> out{Split{}};
  if (!spec.split_axes) return out;
  const std::vector<int> sizes = spec.gpu ? std::vector<int>{spec.gpus_per_node} : layout;
  if (!spec.gpu && spec.topology.twisted) return out;
  for (std::size_t a = 0; a < sizes.size(); ++a)
    for (int d = 2; d < sizes[a]; ++d)
      if (sizes[a] % d == 0) out.push_back({static_cast<int>(a), d});
  return out;
}

// The per-plan choices (microbatch, recompute, schedule, optimizer sharding,
// collective matmuls) of one mesh assignment; a choice that does not apply to
// it (a schedule without a pipeline) is not varied.
void add_variants(const SearchSpec& spec, const Plan& base, std::vector<Plan>& plans) {
  std::vector<std::pair<std::string, std::uint64_t>> schedules{{"", 1}};
  if (base.pp > 1) {
    schedules.clear();
    for (const std::string& s : spec.schedules) {
      if (s != "interleaved") {
        schedules.emplace_back(s, 1);
        continue;
      }
      for (std::uint64_t v : spec.virtual_stages) schedules.emplace_back(s, v);
    }
  }
  // Each switch's values on this plan: its list where it applies, else its
  // first default (which then does not matter).
  std::array<std::vector<bool>, kSwitches> values;
  const bool applies[kSwitches] = {base.dp > 1, base.tp > 1, base.tp > 1, base.fsdp > 1,
                                   base.dp * base.fsdp * base.ep * base.cp > 1};
  std::size_t combos = 1;
  for (std::size_t i = 0; i < kSwitches; ++i) {
    values[i] = applies[i] ? spec.switches[i] : std::vector<bool>{kSwitchInfo[i].defaults.front()};
    combos *= values[i].size();
  }
  for (std::uint64_t mb : spec.microbatches)
    for (const std::string& rc : spec.recompute)
      for (const auto& [schedule, v] : schedules)
        for (std::size_t c = 0; c < combos; ++c) {
          Plan p = base;
          for (std::size_t i = 0, rest = c; i < kSwitches; rest /= values[i].size(), ++i)
            p.on[i] = values[i][rest % values[i].size()];
          if (p.on[kOverlapTensor] && !p.on[kSequenceParallel]) continue;  // collective matmuls need SP
          p.index = plans.size();
          p.microbatch = mb;
          p.recompute = rc;
          p.schedule = schedule;
          p.virtual_stages = v;
          std::vector<std::string> opts;
          if (!schedule.empty()) opts.push_back(v > 1 ? fmt::format("{} v{}", schedule, v) : schedule);
          for (std::size_t i = 0; i < kSwitches; ++i) {
            const char* label = p.on[i] ? kSwitchInfo[i].on_label : kSwitchInfo[i].off_label;
            if (applies[i] && label) opts.emplace_back(label);
          }
          p.options = opts.empty() ? "-" : fmt::format("{}", fmt::join(opts, ", "));
          p.label = fmt::format("{}, microbatch {}, recompute {}{}", p.axes, mb, rc, opts.empty() ? "" : ", " + p.options);
          plans.push_back(std::move(p));
        }
}

}  // namespace

// Every plan: per layout and split of a hardware axis (axis_splits), the
// hardware axes grouped into consecutive runs, a strategy per run (adjacent
// runs differ: the same strategy over both is the merged run; a split axis's
// factors in different runs, else it is the unsplit plan), at most one
// pipeline run; then the variants.
std::vector<Plan> enumerate_plans(const SearchSpec& spec) {
  std::vector<Plan> plans;
  for (const std::vector<int>& layout : spec.layouts)
    for (const Split& split : axis_splits(spec, layout)) {
      const Layout hw = layout_axes(spec, layout, split);
      const std::size_t k = hw.sizes.size();
      if (k == 0) continue;
      const std::size_t ns = spec.strategies.size();
      for (unsigned cuts = 0; cuts < (1u << (k - 1)); ++cuts) {
        if (hw.cut >= 0 && (cuts & (1u << hw.cut)) == 0) continue;  // the factors together: the unsplit plan
        std::vector<std::pair<std::size_t, std::size_t>> runs;  // [begin, end) of hardware axes
        std::size_t begin = 0;
        for (std::size_t i = 0; i + 1 < k; ++i)
          if (cuts & (1u << i)) runs.emplace_back(begin, i + 1), begin = i + 1;
        runs.emplace_back(begin, k);
        const std::size_t g = runs.size();
        std::size_t combos = 1;
        for (std::size_t i = 0; i < g; ++i) combos *= ns;
        for (std::size_t c = 0; c < combos; ++c) {
          std::vector<std::string> chosen;
          for (std::size_t i = 0, rest = c; i < g; ++i, rest /= ns) chosen.push_back(spec.strategies[rest % ns]);
          bool ok = std::count(chosen.begin(), chosen.end(), "pipeline") <= 1;
          for (std::size_t i = 0; i + 1 < g && ok; ++i) ok = chosen[i] != chosen[i + 1];
          if (!ok) continue;
          Plan base;
          base.layout = layout;
          std::map<std::string, int> used;
          std::vector<std::string> axes_text;
          std::map<std::string, std::uint64_t> degree;
          for (std::size_t i = 0; i < g; ++i) {
            const std::string& s = chosen[i];
            const int n = ++used[s];
            const std::string name = strategy_letter(s) + (n > 1 ? std::to_string(n) : "");
            int size = 1;
            std::string over;
            // "xy" (one-letter names), else "gpu1,node" or "x:2@2,y,z".
            bool letters = true;
            for (std::size_t a = runs[i].first; a < runs[i].second; ++a) letters = letters && hw.names[a].size() == 1;
            for (std::size_t a = runs[i].first; a < runs[i].second; ++a) {
              size *= hw.sizes[a];
              over += (letters || over.empty() ? "" : ",") + hw.names[a];
            }
            base.mesh.emplace_back(name, size);
            degree[s] = std::max<std::uint64_t>(degree[s], 1) * static_cast<std::uint64_t>(size);
            axes_text.push_back(fmt::format("{}={}({})", name, size, over));
            const auto it = std::find_if(base.parallelism.begin(), base.parallelism.end(),
                                         [&](const auto& p) { return p.first == s; });
            if (it == base.parallelism.end())
              base.parallelism.push_back({s, {name}});
            else
              it->second.push_back(name);
          }
          const auto deg = [&](const char* s) { return std::max<std::uint64_t>(degree[s], 1); };
          base.dp = deg("data"), base.fsdp = deg("fsdp"), base.tp = deg("tensor"), base.pp = deg("pipeline");
          base.ep = deg("expert"), base.cp = deg("context");
          base.axes = fmt::format("{}", fmt::join(axes_text, " "));
          if (spec.gpu && layout.size() > 1) base.axes += fmt::format(" (nodes {})", shape_text(layout));
          if (!spec.gpu && spec.layouts.size() > 1) base.axes += fmt::format(" [{}]", shape_text(layout));
          add_variants(spec, base, plans);
        }
      }
    }
  return plans;
}

namespace {

Tick floor_tick(double seconds) {
  // A hair below, so that rounding in the sums never lifts a bound above the step.
  return Tick::from_ps(static_cast<std::int64_t>(std::floor(seconds * 1e12 * (1 - 1e-9))));
}

// The busiest chip's local kernels at the roofline, back to back: its compute
// unit runs one at a time, so the simulated step cannot be shorter.
Tick compute_bound(const workloads::Workload& w, std::uint32_t chips) {
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

// Communication at the collectives' lower bounds (driver/bounds.hpp), under
// perfect overlap. Ops of one kind over the same axes and chips (a step's
// per-layer gathers) need the same links in the same direction, so their
// ingress bounds add up, and so do their cut bounds; each op also takes at
// least its own bound plus its fixed cost. The largest of these.
Tick comm_bound(const workloads::Workload& w, const topology::System& system) {
  const topology::Torus& torus = system.grid();
  const topology::Fabric* fabric = system.fabric();
  using Key = std::tuple<int, std::vector<int>, std::uint64_t, const std::vector<topology::ChipId>*>;
  std::map<Key, driver::LowerBound> cache;
  using Class = std::tuple<int, std::vector<int>, std::vector<topology::ChipId>,
                           std::vector<std::pair<topology::ChipId, topology::ChipId>>>;
  std::map<Class, std::pair<double, double>> sums;  // ingress, cut
  double most = 0;
  for (const workloads::Op& op : w.ops) {
    if (is_local(op.kind)) continue;
    driver::LowerBound lb;
    if (op.kind == OpKind::Send) {
      lb = driver::lower_bound(op, w, torus, fabric);
    } else {
      // With the latencies of NCCL's LL, the lowest of any protocol's: a bound
      // whichever protocol the op runs (the choice is not made here).
      const Key key{static_cast<int>(op.kind), op.comm_axes(), op.comm_bytes(), op.chips.get()};
      auto it = cache.find(key);
      if (it == cache.end())
        it = cache
                 .emplace(key, driver::lower_bound(op, w, torus, fabric,
                                                   collectives::gpu::Protocol::LL))
                 .first;
      lb = it->second;
    }
    most = std::max(most, lb.time_s() + driver::comm_fixed_cost(op, w, system).seconds());
    Class c{static_cast<int>(op.kind), op.comm_axes(), op.chips ? *op.chips : std::vector<topology::ChipId>{},
            op.kind == OpKind::Send ? workloads::send_pairs(op) : decltype(op.send().pairs){}};
    auto& [in, cut] = sums[std::move(c)];
    in += lb.ingress_s;
    cut += lb.cut_s;
  }
  for (const auto& [c, s] : sums) most = std::max({most, s.first, s.second});
  return floor_tick(most);
}

int role_strategy(workloads::Role r) {
  switch (r) {
    case workloads::Role::Tensor: return kTensor;
    case workloads::Role::Expert: return kExpert;
    case workloads::Role::Context: return kContext;
    case workloads::Role::Fsdp: return kFsdp;
    case workloads::Role::Data: return kData;
    case workloads::Role::Pipeline: return kPipeline;
    default: return -1;
  }
}

// One plan's simulation as a rank sends it back under mpirun: "ok" and the
// step's figures (integer picoseconds, the MFU to 17 digits, which reads back
// to the same double), or "error" and the message.
struct Outcome {
  std::int64_t step = 0, compute = 0, optimizer = 0, idle = 0;
  std::array<std::int64_t, kStrategies> exposed{}, in_flight{};
  double mfu = 0;
};

std::string encode(const Outcome& o) {
  return fmt::format("ok {} {} {} {} {} {} {:.17g}", o.step, o.compute, o.optimizer, o.idle, fmt::join(o.exposed, " "),
                     fmt::join(o.in_flight, " "), o.mfu);
}

std::string simulate_text(const SearchSpec& spec, const Plan& plan) {
  try {
    const workloads::Workload w = build_plan(spec, plan);
    const driver::RunResult run = driver::simulate(w);
    const reports::TrainingResult t = reports::training_result(w, run);
    Outcome o;
    o.step = t.step.ps();
    o.mfu = t.mfu;
    for (const reports::StageBreakdown& s : t.stages) {
      const std::array<Tick, kStrategies> e{s.tensor, s.expert, s.context, s.fsdp, s.data, s.pipeline};
      for (std::size_t i = 0; i < kStrategies; ++i) o.exposed[i] = std::max(o.exposed[i], e[i].ps());
      for (std::size_t role = 0; role < s.in_flight.size(); ++role) {
        const int k = role_strategy(static_cast<workloads::Role>(role));
        if (k >= 0)
          o.in_flight[static_cast<std::size_t>(k)] = std::max(o.in_flight[static_cast<std::size_t>(k)], s.in_flight[role].ps());
      }
      o.compute = std::max(o.compute, s.compute.ps());
      o.optimizer = std::max(o.optimizer, s.optimizer.ps());
      o.idle = std::max(o.idle, s.idle.ps());
    }
    return encode(o);
  } catch (const InputError& e) {
    // The plan was built and sized before; what the run refuses now is its
    // size: the estimate counted on a reduction whose quotient the build did
    // not verify, and the whole program passes the limits.
    return fmt::format("too-large {}", e.message());
  } catch (const Error& e) {
    return fmt::format("error {} (plan: {})", e.what(), plan.label);
  } catch (const std::bad_alloc&) {
    return fmt::format("error out of memory (plan: {})", plan.label);
  } catch (const std::exception& e) {  // never thrown past a rank: the others would wait for it
    return fmt::format("error internal error: {} (plan: {})", e.what(), plan.label);
  }
}

void read_outcome(const std::string& text, PlanResult& r) {
  if (text.rfind("error ", 0) == 0) throw Error(text.substr(6));
  std::istringstream in(text);
  std::string ok;
  Outcome o;
  in >> ok >> o.step >> o.compute >> o.optimizer >> o.idle;
  for (std::int64_t& v : o.exposed) in >> v;
  for (std::int64_t& v : o.in_flight) in >> v;
  std::string mfu;
  in >> mfu;
  MESHSIM_ASSERT(ok == "ok" && !in.fail(), "a plan's outcome that simulate_text did not write");
  o.mfu = std::strtod(mfu.c_str(), nullptr);
  r.simulated = true;
  r.step = Tick::from_ps(o.step);
  r.mfu = o.mfu;
  r.compute = Tick::from_ps(o.compute);
  r.optimizer = Tick::from_ps(o.optimizer);
  r.idle = Tick::from_ps(o.idle);
  for (std::size_t i = 0; i < kStrategies; ++i) {
    r.comm[i].exposed = Tick::from_ps(o.exposed[i]);
    r.comm[i].in_flight = Tick::from_ps(o.in_flight[i]);
  }
}

}  // namespace

SearchResult run_search(const SearchSpec& spec, const SearchOptions& options) {
  SearchResult out;
  std::vector<PlanResult> fits;
  for (Plan& plan : enumerate_plans(spec)) {
    ++out.enumerated;
    PlanResult r;
    r.plan = std::move(plan);
    // The plan checked and its closed forms made first: a plan pruned by
    // memory is never lowered.
    workloads::Workload w;
    const auto invalid = [&](const InputError& e) {
      ++out.invalid;
      if (out.invalid_reasons.size() < 5) out.invalid_reasons.push_back(fmt::format("{}: {}", r.plan.label, e.message()));
    };
    workloads::Training t;
    SourceRef where;
    try {
      const workloads::TrainingSpec ts = plan_system(spec, r.plan, w);
      t = workloads::plan_training(w, ts);
      where = ts.where;
    } catch (const InputError& e) {
      invalid(e);
      continue;
    }
    const workloads::StepFormulas f = t.formulas;
    r.peak_bytes = f.peak_bytes;
    out.hbm_bytes = f.hbm_bytes;
    out.peak_flops_per_s = f.peak_flops_per_s;
    out.global_batch = t.global_batch;
    const std::uint64_t link = w.hardware.peak.ici > 0 ? w.hardware.peak.ici : w.hardware.ici.bandwidth_bytes_per_s;
    out.link_bytes_per_s = w.hardware.gpu ? 0 : 2.0 * static_cast<double>(link);
    if (f.peak_bytes > f.hbm_bytes) {
      ++out.pruned_memory;
      if (out.smallest_peak_bytes == 0 || f.peak_bytes < out.smallest_peak_bytes) out.smallest_peak_bytes = f.peak_bytes;
      continue;
    }
    try {
      workloads::add_training(w, std::move(t), where);
    } catch (const InputError& e) {
      invalid(e);
      continue;
    }
    driver::RunContext run(w);
    const topology::Torus& torus = run.torus();
    out.chips = torus.num_chips();
    try {
      driver::SimulateOptions sized;
      sized.limits = options.limits;
      driver::check_limits(w, driver::run_size(w, run, sized), options.limits);
    } catch (const InputError& e) {
      ++out.too_large;
      if (out.too_large_reasons.size() < 3)
        out.too_large_reasons.push_back(fmt::format("{}: {}", r.plan.label, e.message()));
      continue;
    }
    r.compute_bound = compute_bound(w, torus.num_chips());
    r.comm_bound = comm_bound(w, run.system());
    r.bound = max(r.compute_bound, r.comm_bound);
    fits.push_back(std::move(r));
  }
  if (out.enumerated == 0) throw InputError(spec.file, "/topology", "the system has no hardware axis to shard over");
  if (fits.empty() && out.too_large > 0)
    throw InputError(spec.file, "/training",
                     fmt::format("every plan that fits in memory is too large to simulate; the first: {}",
                                 out.too_large_reasons.front()));
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
  // Best bound first. A plan whose bound is above the top-th best step so far
  // cannot enter the top; with `pareto`, nor may a simulated plan with no more
  // memory be faster than its bound (else it might be on the front).
  std::stable_sort(fits.begin(), fits.end(), [](const PlanResult& a, const PlanResult& b) { return a.bound < b.bound; });
  const std::size_t top = std::max<std::size_t>(options.top, 1);
  std::vector<Tick> best;  // sorted simulated steps
  const auto prunable = [&](const PlanResult& r) {
    if (options.exhaustive || best.size() < top || r.bound <= best[top - 1]) return false;
    if (!options.pareto) return true;
    return std::any_of(out.ranked.begin(), out.ranked.end(), [&](const PlanResult& q) {
      return q.step < r.bound && q.peak_bytes <= r.peak_bytes;
    });
  };
  const std::size_t batch = std::max<std::size_t>(options.batch, 1);
  for (std::size_t next = 0; next < fits.size();) {
    std::vector<std::size_t> round;
    for (; next < fits.size() && round.size() < batch; ++next) {
      if (prunable(fits[next])) {
        ++out.pruned_bound;
        out.pruned.push_back(std::move(fits[next]));
        continue;
      }
      round.push_back(next);
    }
    if (round.empty()) break;
    const auto run = [&](std::size_t i) { return simulate_text(spec, fits[round[i]].plan); };
    std::vector<std::string> texts;
    if (options.map) {
      texts = options.map(round.size(), run);
    } else {
      for (std::size_t i = 0; i < round.size(); ++i) texts.push_back(run(i));
    }
    if (texts.size() != round.size()) throw Error("search: a batch of plans came back incomplete");
    for (std::size_t i = 0; i < round.size(); ++i) {
      PlanResult& r = fits[round[i]];
      if (texts[i].rfind("too-large ", 0) == 0) {
        ++out.too_large;
        if (out.too_large_reasons.size() < 3)
          out.too_large_reasons.push_back(fmt::format("{}: {}", r.plan.label, texts[i].substr(10)));
        continue;
      }
      read_outcome(texts[i], r);
      ++out.simulated;
      best.insert(std::upper_bound(best.begin(), best.end(), r.step), r.step);
      out.ranked.push_back(std::move(r));
    }
  }
  std::stable_sort(out.ranked.begin(), out.ranked.end(), [](const PlanResult& a, const PlanResult& b) {
    return a.step != b.step ? a.step < b.step : a.plan.index < b.plan.index;
  });
  return out;
}

std::vector<const PlanResult*> pareto_front(const SearchResult& r) {
  std::vector<const PlanResult*> by_memory;
  for (const PlanResult& p : r.ranked) by_memory.push_back(&p);
  std::stable_sort(by_memory.begin(), by_memory.end(), [](const PlanResult* a, const PlanResult* b) {
    return a->peak_bytes != b->peak_bytes ? a->peak_bytes < b->peak_bytes : a->step < b->step;
  });
  std::vector<const PlanResult*> front;
  for (const PlanResult* p : by_memory)
    if (front.empty() || p->step < front.back()->step) front.push_back(p);
  return front;
}

namespace {

std::string ms(Tick t) { return fmt::format("{:.3f}", t.seconds() * 1e3); }
// Differences below this are not worth a sentence (they print as 0.000 ms).
constexpr Tick kMicrosecond = Tick::from_ps(1'000'000);

}  // namespace

namespace detail {

Rules rules_of(const SearchSpec& spec, const SearchResult& r) {
  Rules k;
  k.tokens = static_cast<double>(r.global_batch) * static_cast<double>(spec.seq_len);
  if (r.link_bytes_per_s > 0) k.c_over_w = r.peak_flops_per_s / r.link_bytes_per_s;
  if (spec.ffn > 0) k.x_opt = std::sqrt(2 * k.tokens * static_cast<double>(r.chips) / static_cast<double>(spec.ffn));
  return k;
}

double book_x(const SearchResult& r, const Plan& p) { return static_cast<double>(r.chips) / static_cast<double>(p.tp); }

double nearest_x(const SearchResult& r, double x_opt) {
  double best = 0, gap = 0;
  for (const auto* list : {&r.ranked, &r.pruned})
    for (const PlanResult& p : *list) {
      const double x = book_x(r, p.plan), g = std::abs(std::log(x / x_opt));
      if (best == 0 || g < gap) best = x, gap = g;
    }
  return best;
}

}  // namespace detail

using detail::book_x;
using detail::nearest_x;
using detail::Rules;
using detail::rules_of;

std::string format_explanation(const SearchSpec& spec, const SearchResult& r) {
  std::string out;
  // The runner-up: the best plan slower than the winner (plans that tie with it
  // are the same strategies on other axes of equal links, or equivalent choices).
  std::size_t second = 1;
  while (second < r.ranked.size() && r.ranked[second].step == r.ranked[0].step) ++second;
  if (second > 1)
    out += fmt::format("\nranks 1 to {} tie at {} ms ({})\n", second, ms(r.ranked[0].step),
                       "the same step: equal links under other axes, or choices that do not matter here");
  if (second < r.ranked.size()) {
    const PlanResult& a = r.ranked[0];
    const PlanResult& b = r.ranked[second];
    const std::string rb = fmt::format("rank {}", second + 1);
    const Tick gap = b.step - a.step;
    out += fmt::format("\nwhy rank 1 beats {}: {} ms against {} ms ({} ms, {:.2f} % faster)\n", rb, ms(a.step),
                       ms(b.step), ms(gap), 100.0 * gap.seconds() / b.step.seconds());
    out += fmt::format("  rank 1: {}\n  {}: {}\n", a.plan.label, rb, b.plan.label);
    out += fmt::format("  {:<22} {:>12} {:>12} {:>12}   (ms, the most over pipeline stages)\n", "", "rank 1", rb,
                       "difference");
    const auto row = [&](const std::string& what, Tick x, Tick y) {
      if (x == kZeroTick && y == kZeroTick) return;
      const Tick d = x - y;
      out += fmt::format("  {:<22} {:>12} {:>12} {:>12}\n", what, ms(x), ms(y),
                         d < kMicrosecond && kZeroTick - d < kMicrosecond ? std::string("0") : ms(d));
    };
    row("compute", a.compute, b.compute);
    row("optimizer", a.optimizer, b.optimizer);
    for (int s = 0; s < kStrategies; ++s) {
      const auto i = static_cast<std::size_t>(s);
      row(fmt::format("{} exposed", strategy_name(s)), a.comm[i].exposed, b.comm[i].exposed);
      row(fmt::format("{} in flight", strategy_name(s)), a.comm[i].in_flight, b.comm[i].in_flight);
    }
    row("bubble (idle)", a.idle, b.idle);
    out += fmt::format("  {:<22} {:>12.2f} {:>12.2f} {:>12.2f}   (GB per chip)\n", "memory",
                       static_cast<double>(a.peak_bytes) / 1e9, static_cast<double>(b.peak_bytes) / 1e9,
                       (static_cast<double>(a.peak_bytes) - static_cast<double>(b.peak_bytes)) / 1e9);
    // In words: what rank 1 avoids (issues none of) and what it hides better.
    for (int s = 0; s < kStrategies; ++s) {
      const auto i = static_cast<std::size_t>(s);
      const Comm& x = a.comm[i];
      const Comm& y = b.comm[i];
      if (y.exposed < x.exposed + kMicrosecond) continue;
      if (x.in_flight == kZeroTick)
        out += fmt::format("  rank 1 avoids {} communication: {} has {} ms of it in flight, {} ms exposed\n",
                           strategy_name(s), rb, ms(y.in_flight), ms(y.exposed));
      else
        out += fmt::format("  rank 1 exposes {} ms less {} communication: it hides {} of its {} ms in flight, {} {} "
                           "of {} ms\n",
                           ms(y.exposed - x.exposed), strategy_name(s), ms(x.in_flight - x.exposed), ms(x.in_flight),
                           rb, ms(y.in_flight - y.exposed), ms(y.in_flight));
    }
    for (int s = 0; s < kStrategies; ++s) {
      const auto i = static_cast<std::size_t>(s);
      const Comm& x = a.comm[i];
      const Comm& y = b.comm[i];
      if (x.exposed < y.exposed + kMicrosecond) continue;
      out += fmt::format("  in exchange rank 1 exposes {} ms more {} communication ({} ms in flight; {} {} ms)\n",
                         ms(x.exposed - y.exposed), strategy_name(s), ms(x.in_flight), rb, ms(y.in_flight));
    }
    if (a.idle + kMicrosecond <= b.idle)
      out += fmt::format("  rank 1 idles {} ms less (the pipeline bubble)\n", ms(b.idle - a.idle));
    if (a.compute + kMicrosecond <= b.compute)
      out += fmt::format("  rank 1 computes {} ms less (recomputation, or smaller and slower kernels in {})\n",
                         ms(b.compute - a.compute), rb);
  }
  const Rules k = rules_of(spec, r);
  if (k.c_over_w > 0 && !r.ranked.empty()) {
    const PlanResult& a = r.ranked[0];
    const double n = static_cast<double>(r.chips);
    out += fmt::format("\nrules of thumb (the scaling book, training chapter; C = {:.3g} FLOP/s per chip, W = {:.3g} B/s "
                       "per link both ways):\n",
                       r.peak_flops_per_s, r.link_bytes_per_s);
    out += fmt::format("  tokens per step B = {:.0f}, chips N = {:.0f}: {:.0f} tokens per chip; C/W = {:.0f}\n", k.tokens,
                       n, k.tokens / n, k.c_over_w);
    out += fmt::format("  data/FSDP over M axes is compute-bound above (C/W)/M tokens per chip: {:.0f} (1 axis), {:.0f} "
                       "(2), {:.0f} (3): {} here\n",
                       k.c_over_w, k.c_over_w / 2, k.c_over_w / 3,
                       k.tokens / n > k.c_over_w ? "compute-bound on any axes"
                       : k.tokens / n > k.c_over_w / 3 ? "compute-bound over enough axes"
                                                       : "communication-bound: tensor parallelism must help");
    out += fmt::format("  tensor parallelism over M axes is compute-bound while tp < M F/(C/W) = {:.1f} M (F = {})\n",
                       static_cast<double>(spec.ffn) / k.c_over_w, spec.ffn);
    const double x = book_x(r, a.plan);
    const double x_opt = std::min(k.x_opt, n);
    const double ratio = x > x_opt ? x / x_opt : x_opt / x;
    out += fmt::format("  FSDP x TP optimum X = sqrt(2 B N / F) = {:.1f}{}: the winner's X = N/tp = {:.0f} (tp {}), {}",
                       k.x_opt, k.x_opt > n ? fmt::format(" (capped at N = {:.0f})", n) : "", x, a.plan.tp,
                       ratio <= 2 ? "within one power of two of it" : fmt::format("{:.1f}x away from it", ratio));
    const double near = nearest_x(r, x_opt);
    out += near == x ? "; no plan that fits has an X nearer to it\n"
                     : fmt::format("; the nearest X of a plan that fits: {:.0f}\n", near);
  }
  return out;
}

std::string format_search(const SearchSpec& spec, const SearchResult& r, std::size_t top) {
  std::string out = fmt::format("# meshsim search: {}\n", spec.file);
  out += fmt::format("plans     {} enumerated: {} invalid, {} pruned by memory (HBM {:.2f} GB per chip), {} pruned by "
                     "the bound, {} simulated{}\n",
                     r.enumerated, r.invalid, r.pruned_memory, static_cast<double>(r.hbm_bytes) / 1e9, r.pruned_bound,
                     r.simulated,
                     r.too_large == 0 ? std::string()
                                      : fmt::format(", {} too large to simulate (not ranked: the top is exact among "
                                                    "the others)",
                                                    r.too_large));
  out += fmt::format("\n{:>4} {:>12} {:>6} {:>8} {:>4} {:>5} {:>4} {:>4} {:>4} {:>4} {:>4} {:<9} {:<16}", "rank",
                     "step (ms)", "MFU %", "mem (GB)", "dp", "fsdp", "tp", "pp", "ep", "cp", "mb", "recompute",
                     "options");
  for (int s = 0; s < kStrategies; ++s) out += fmt::format(" {:>9}", strategy_name(s));
  out += fmt::format(" {:>9}  axes\n", "bubble");
  for (std::size_t i = 0; i < r.ranked.size() && i < top; ++i) {
    const PlanResult& p = r.ranked[i];
    out += fmt::format("{:>4} {:>12} {:>6.1f} {:>8.2f} {:>4} {:>5} {:>4} {:>4} {:>4} {:>4} {:>4} {:<9} {:<16}", i + 1,
                       ms(p.step), 100 * p.mfu, static_cast<double>(p.peak_bytes) / 1e9, p.plan.dp, p.plan.fsdp,
                       p.plan.tp, p.plan.pp, p.plan.ep, p.plan.cp, p.plan.microbatch, p.plan.recompute, p.plan.options);
    for (const Comm& c : p.comm) out += fmt::format(" {:>9}", ms(c.exposed));
    out += fmt::format(" {:>9}  {}\n", ms(p.idle), p.plan.axes);
  }
  out += "(tensor ... pipeline: the communication of each strategy that no computation hides; bubble: idle time; ms, the "
         "most over pipeline stages)\n";
  for (const std::string& reason : r.invalid_reasons) out += "invalid: " + reason + "\n";
  for (const std::string& reason : r.too_large_reasons) out += "too large: " + reason + "\n";
  out += format_explanation(spec, r);
  return out;
}

}  // namespace meshsim::search
