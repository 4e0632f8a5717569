// meshsim search: pruning is exact (the search's top equals the exhaustive top,
// and no pruned plan would have entered it), the bound is never above a
// simulated step, and each bad spec is one error line.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <fmt/format.h>
#include <string>

#include "base/error.hpp"
#include "search/search_json.hpp"
#include "unit/workloads/digest.hpp"

using namespace meshsim;
using namespace meshsim::search;

namespace {

// A small dense model on a 16-chip v5e slice: every plan simulates in milliseconds.
std::string spec_text(const std::string& extra = "") {
  return R"({"hardware": "tpu-v5e", "topology": {"shape": [4, 4]},
    "training": {"model": {"layers": 4, "d_model": 512, "heads": 8, "ffn": 2048, "vocab": 2048, "seq_len": 512},
                 "global_batch": 32)" +
         extra + "}}";
}

std::string error_of(const std::string& text) {
  try {
    run_search(parse_spec(text, "s.json"), {});
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// The search's top `top` and the exhaustive search's: the same plans in the
// same order, and no bound above a simulated step.
std::pair<SearchResult, SearchResult> pruned_and_exhaustive(const SearchSpec& spec, std::size_t top) {
  SearchOptions some;
  some.top = top;
  SearchOptions all = some;
  all.exhaustive = true;
  std::pair<SearchResult, SearchResult> out{run_search(spec, some), run_search(spec, all)};
  const auto& [pruned, full] = out;
  REQUIRE(pruned.ranked.size() >= top);
  REQUIRE(full.ranked.size() >= top);
  for (std::size_t i = 0; i < top; ++i) CHECK(pruned.ranked[i].plan.index == full.ranked[i].plan.index);
  for (const PlanResult& r : full.ranked) CHECK(r.bound <= r.step);
  return out;
}

}  // namespace

TEST_CASE("search: the pruned search's top equals the exhaustive one; no pruned plan would have entered it",
          "[search]") {
  const SearchSpec spec = parse_spec(
      R"({"hardware": "tpu-v5e", "topology": {"shape": [4, 4]},
          "training": {"model": {"layers": 4, "d_model": 512, "heads": 8, "ffn": 2048, "vocab": 2048, "seq_len": 512},
                       "global_batch": 32},
          "search": {"microbatch": [1, 2], "recompute": ["none", "full"]}})",
      "s.json");
  SearchOptions top3;
  top3.top = 3;
  SearchOptions all = top3;
  all.exhaustive = true;
  const SearchResult pruned = run_search(spec, top3), full = run_search(spec, all);
  CHECK(full.pruned_bound == 0);
  CHECK(full.simulated == full.ranked.size());
  CHECK(pruned.pruned_bound > 0);  // the bound does prune here
  CHECK(pruned.simulated + pruned.pruned_bound == full.simulated);
  REQUIRE(pruned.ranked.size() >= 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(pruned.ranked[i].plan.index == full.ranked[i].plan.index);
    CHECK(pruned.ranked[i].step == full.ranked[i].step);
  }
  // Every simulated plan: the bound is not above its step.
  for (const PlanResult& r : full.ranked) CHECK(r.bound <= r.step);
  // Every plan the search pruned is, simulated, no faster than its third best.
  std::map<std::size_t, Tick> step_of;
  for (const PlanResult& r : full.ranked) step_of[r.plan.index] = r.step;
  for (const PlanResult& r : pruned.pruned) CHECK(step_of.at(r.plan.index) >= pruned.ranked[2].step);
  // The counts add up.
  CHECK(pruned.enumerated ==
        pruned.invalid + pruned.pruned_memory + pruned.pruned_bound + pruned.simulated + pruned.too_large);
  // The communication part of the bound is what binds for some plans (else the
  // check above would not test it).
  CHECK(std::any_of(full.ranked.begin(), full.ranked.end(),
                    [](const PlanResult& r) { return r.comm_bound > r.compute_bound; }));
}

TEST_CASE("search: replicated KV heads and uneven stages are enumerated; the top is exact, the bound a bound",
          "[search]") {
  // 2 KV heads (tensor parallelism of 4 to 16 replicates them) and 6 layers
  // (over 4 or 8 stages: uneven, or refused).
  const SearchSpec spec = parse_spec(
      R"({"hardware": "tpu-v5e", "topology": {"shape": [4, 4]},
          "training": {"model": {"layers": 6, "d_model": 512, "heads": 16, "kv_heads": 2, "head_dim": 32,
                                 "ffn": 2048, "vocab": 2048, "seq_len": 512}, "global_batch": 32}})",
      "s.json");
  const auto [pruned, full] = pruned_and_exhaustive(spec, 3);
  REQUIRE(pruned.ranked.size() >= 3);
  for (std::size_t i = 0; i < 3; ++i) CHECK(pruned.ranked[i].step == full.ranked[i].step);
  // Both kinds of plan were simulated.
  CHECK(std::any_of(full.ranked.begin(), full.ranked.end(), [](const PlanResult& r) { return r.plan.tp > 2; }));
  CHECK(std::any_of(full.ranked.begin(), full.ranked.end(), [](const PlanResult& r) { return r.plan.pp == 4; }));
}

TEST_CASE("search: on a GPU cluster too, the bound is never above a simulated step and the top is exact",
          "[search]") {
  // Two DGX H100 nodes, a small model: every variant (node grids, the node's
  // GPUs split in two factors, schedules, the sharded optimizer, collective
  // matmuls) simulated.
  const SearchSpec spec = parse_spec(
      R"({"hardware": "h100-dgx", "topology": {"nodes": 2},
          "training": {"model": {"layers": 4, "d_model": 512, "heads": 8, "ffn": 2048, "vocab": 2048, "seq_len": 256},
                       "global_batch": 32},
          "search": {"sequence_parallel": [true, false], "overlap_fsdp_prefetch": [true, false],
                     "overlap_gradient_reduction": [true, false]}})",
      "g.json");
  const auto [pruned, full] = pruned_and_exhaustive(spec, 2);
  CHECK(std::any_of(full.ranked.begin(), full.ranked.end(),
                    [](const PlanResult& r) { return r.comm_bound > r.compute_bound; }));
  // Each kind of variant was tried.
  bool schedule = false, zero = false, overlap = false, no_sp = false, no_prefetch = false, late = false;
  bool tp2_in_node = false, tp4_across = false;  // mesh axes over part of a node (gpu0, gpu1)
  for (const PlanResult& r : full.ranked) {
    tp2_in_node |= r.plan.tp == 2 && r.plan.axes.find("T=2(gpu0)") != std::string::npos;
    tp4_across |= r.plan.tp == 4 && r.plan.axes.find("(gpu1,node)") != std::string::npos;
    schedule |= r.plan.schedule == "interleaved";
    zero |= r.plan.on[kShardedOptimizer];
    overlap |= r.plan.on[kOverlapTensor];
    no_sp |= r.plan.tp > 1 && !r.plan.on[kSequenceParallel];
    no_prefetch |= r.plan.fsdp > 1 && !r.plan.on[kFsdpPrefetch];
    late |= !r.plan.on[kGradientOverlap];
    // Collective matmuls only with sequence parallelism; the workload says what the plan is.
    CHECK((!r.plan.on[kOverlapTensor] || r.plan.on[kSequenceParallel]));
    const workloads::Json w = plan_workload(spec, r.plan);
    if (r.plan.tp > 1) CHECK(w.at("training").at("parallelism").at("sequence_parallel") == r.plan.on[kSequenceParallel]);
    if (r.plan.fsdp > 1) CHECK(w.at("training").at("overlap").at("fsdp_prefetch") == r.plan.on[kFsdpPrefetch]);
  }
  CHECK(schedule);
  CHECK(zero);
  CHECK(overlap);
  CHECK(no_sp);
  CHECK(no_prefetch);
  CHECK(late);
  CHECK(tp2_in_node);
  CHECK(tp4_across);
}

TEST_CASE("search: torus axes split in two factors (split_axes); the top is exact, the bound a bound", "[search]") {
  // A 16-chip slice, a small model: x of 4 as x:2 and x:2@2 (and y likewise).
  const std::string text =
      R"({"hardware": "tpu-v5p", "topology": {"shape": [4, 4, 1]},
          "training": {"model": {"layers": 4, "d_model": 512, "heads": 8, "ffn": 2048, "vocab": 2048, "seq_len": 256},
                       "global_batch": 32}, "search": {"split_axes": true, "strategies": ["data", "fsdp", "tensor"]}})";
  const SearchSpec spec = parse_spec(text, "s.json");
  CHECK(spec.split_axes);
  const auto [pruned, full] = pruned_and_exhaustive(spec, 3);
  bool inner = false, outer = false;
  for (const PlanResult& r : full.ranked) {
    inner |= r.plan.axes.find("(x:2)") != std::string::npos;
    outer |= r.plan.axes.find("(x:2@2,y)") != std::string::npos;
  }
  CHECK(inner);
  CHECK(outer);
  // Off by default on a TPU: the whole axes only.
  std::string plain = text;
  plain.replace(plain.find(R"("split_axes": true, )"), 20, "");
  const SearchSpec whole = parse_spec(plain, "s.json");
  CHECK_FALSE(whole.split_axes);
  CHECK(enumerate_plans(whole).size() < enumerate_plans(spec).size());
  for (const Plan& p : enumerate_plans(whole)) CHECK(p.axes.find(':') == std::string::npos);
}

TEST_CASE("search: with pareto, the front equals the exhaustive front; batches give the same top", "[search]") {
  const SearchSpec spec = parse_spec(spec_text(R"(, "microbatch": 1}, "search": {"recompute": ["none", "full"])"),
                                     "s.json");
  SearchOptions front;
  front.top = 1;
  front.pareto = true;
  SearchOptions all = front;
  all.exhaustive = true;
  const SearchResult r = run_search(spec, front), full = run_search(spec, all);
  const auto f = pareto_front(r), g = pareto_front(full);
  REQUIRE(f.size() == g.size());
  CHECK(f.size() >= 2);
  for (std::size_t i = 0; i < f.size(); ++i) {
    CHECK(f[i]->plan.index == g[i]->plan.index);
    CHECK(f[i]->step == g[i]->step);
  }
  // Plans handed out three at a time (as to three mpirun ranks): the same top.
  SearchOptions top3;
  top3.top = 3;
  SearchOptions batched = top3;
  batched.batch = 3;
  std::size_t calls = 0;
  batched.map = [&](std::size_t n, const std::function<std::string(std::size_t)>& run) {
    ++calls;
    CHECK(n <= 3);
    std::vector<std::string> out;
    for (std::size_t i = n; i-- > 0;) out.insert(out.begin(), run(i));  // any order of running
    return out;
  };
  const SearchResult one = run_search(spec, top3), three = run_search(spec, batched);
  CHECK(calls > 0);
  CHECK(calls < three.simulated);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(one.ranked[i].plan.index == three.ranked[i].plan.index);
    CHECK(one.ranked[i].step == three.ranked[i].step);
  }
}

TEST_CASE("search: the scaling book's FSDP x TP optimum on a v5p cube, within one power of two", "[search]") {
  // llama3-8b's widths (F = 14336, 8 KV heads) at 512 tokens, 8 layers, on a
  // v5p 4x4x4 with FSDP and tensor parallelism, any microbatch: the book's
  // X_opt = sqrt(2 B N / F) for B tokens per step on N chips. The search, by
  // simulation, lands within a factor of 2 of it on both sides of the cube's
  // choices (X = 64, or 16 with tensor parallelism 4).
  for (const auto& [batch, x_opt] : {std::pair{64, 17.1}, std::pair{512, 48.4}}) {
    const SearchSpec spec = parse_spec(fmt::format(R"({{"hardware": "tpu-v5p", "topology": {{"shape": [4, 4, 4]}},
        "training": {{"model": {{"preset": "llama3-8b", "seq_len": 512, "layers": 8}}, "global_batch": {}}},
        "search": {{"strategies": ["fsdp", "tensor"], "microbatch": [1, 2, 4, 8]}}}})",
                                                   batch),
                                       "b.json");
    SearchOptions o;
    o.top = 1;
    const SearchResult r = run_search(spec, o);
    const double tokens = batch * 512.0, n = 64;
    CHECK(std::sqrt(2 * tokens * n / 14336) == Approx(x_opt).epsilon(0.01));
    const double x = n / static_cast<double>(r.ranked.front().plan.tp);
    INFO("batch " << batch << ": winner " << r.ranked.front().plan.label);
    CHECK(x <= 2 * x_opt);
    CHECK(x >= x_opt / 2);
    CHECK_THAT(format_explanation(spec, r), Catch::Contains("within one power of two of it"));
  }
}

TEST_CASE("search: slice shapes to choose among", "[search]") {
  const std::string base = R"({"hardware": "tpu-v5e",
      "training": {"model": {"layers": 4, "d_model": 512, "heads": 8, "ffn": 2048, "vocab": 2048, "seq_len": 512},
                   "global_batch": 32}, )";
  const SearchSpec listed = parse_spec(base + R"("search": {"shapes": [[4, 4], [2, 8]]}})", "s.json");
  REQUIRE(listed.layouts.size() == 2);
  SearchOptions all;
  all.exhaustive = true;
  const SearchResult r = run_search(listed, all);
  bool both[2] = {false, false};
  for (const PlanResult& p : r.ranked) {
    both[0] |= p.plan.layout == std::vector<int>{4, 4};
    both[1] |= p.plan.layout == std::vector<int>{2, 8};
  }
  CHECK(both[0]);
  CHECK(both[1]);
  CHECK(plan_workload(listed, r.ranked.front().plan).at("topology").at("shape") == r.ranked.front().plan.layout);
  // By chip count: every order of the axes, axes of 1 once.
  const SearchSpec by_count = parse_spec(base + R"("search": {"chips": 16}})", "s.json");
  std::vector<std::vector<int>> expect = {{1, 16}, {2, 8}, {4, 4}, {8, 2}};
  CHECK(by_count.layouts == expect);
  const SearchSpec v5p = parse_spec(R"({"hardware": "tpu-v5p", "training": {"model": "llama3-8b", "global_batch": 32},
                                        "search": {"chips": 32}})",
                                    "s.json");
  // 1, 2 or 4 along each axis, or whole cubes: 2x4x4 and its orders; 32 chips are no whole cube.
  expect = {{2, 4, 4}, {4, 2, 4}, {4, 4, 2}};
  CHECK(v5p.layouts == expect);
}

TEST_CASE("search: the best plan's workload reproduces it", "[search]") {
  const SearchSpec spec = parse_spec(spec_text(), "s.json");
  const SearchResult r = run_search(spec, {});
  REQUIRE(!r.ranked.empty());
  const workloads::Json w = plan_workload(spec, r.ranked.front().plan);
  CHECK(w.contains("mesh"));
  CHECK(w.at("training").contains("parallelism"));
  // Plans on the same hardware axes with the same strategies are not listed twice.
  for (std::size_t i = 0; i < r.ranked.size(); ++i)
    for (std::size_t j = i + 1; j < r.ranked.size(); ++j)
      CHECK(r.ranked[i].plan.label != r.ranked[j].plan.label);
}

TEST_CASE("search: bad specs are one error line each", "[search]") {
  CHECK(error_of(R"({"hardware": "tpu-v5e", "topology": {"shape": [4, 4]}, "mesh": {"X": 16},
                     "training": {"model": "llama3-8b", "global_batch": 16}})") ==
        "s.json:/mesh: the search chooses the mesh: remove \"mesh\"");
  CHECK(error_of(spec_text(R"(, "parallelism": {"fsdp": "F"})")) ==
        "s.json:/training/parallelism: the search chooses the parallelism: remove \"parallelism\"");
  CHECK(error_of(R"({"hardware": "tpu-v5e", "training": {"model": "llama3-8b", "global_batch": 16}})") ==
        "s.json:: give the slice's shape: \"topology\": {\"shape\": [...]} (or \"search\": {\"shapes\": [...]} or "
        "{\"chips\": N})");
  CHECK(error_of(R"({"hardware": "tpu-v5e", "topology": {"shape": [4, 4]},
                     "training": {"model": "llama3-8b", "global_batch": 16}, "search": {"strategies": ["zero"]}})") ==
        "s.json:/search/strategies/0: unknown strategy 'zero' (known: data, fsdp, tensor, pipeline, expert, context)");
  CHECK(error_of(R"({"hardware": "tpu-v5e", "topology": {"shape": [4, 4]},
                     "training": {"model": "llama3-8b", "global_batch": 16}, "search": {"beam": 3}})") ==
        "s.json:/search/beam: unknown key 'beam' (expected one of: strategies, microbatch, recompute, schedule, "
        "virtual_stages, sharded_optimizer, overlap_tensor, sequence_parallel, overlap_fsdp_prefetch, "
        "overlap_gradient_reduction, shapes, chips, split_axes)");
  CHECK(error_of(R"({"hardware": "tpu-v5e", "topology": {"shape": [4, 4]},
                     "training": {"model": "llama3-8b", "global_batch": 16}, "search": {"split_axes": "yes"}})") ==
        "s.json:/search/split_axes: expected true or false, got a string");
  CHECK_THAT(error_of(R"({"hardware": "tpu-v9", "topology": {"shape": [4, 4]},
                          "training": {"model": "llama3-8b", "global_batch": 16}})"),
             Catch::StartsWith("s.json:/hardware: unknown preset 'tpu-v9'"));
  // A model that fits in no plan: llama3-70b on 4 chips of 16 GB.
  CHECK_THAT(error_of(R"({"hardware": "tpu-v5e", "topology": {"shape": [2, 2]},
                          "training": {"model": "llama3-70b", "global_batch": 4}})"),
             Catch::StartsWith("s.json:/training: the model fits in no plan: the smallest needs"));
  // A system no plan can use: one layer, one head, one sequence on 4 chips.
  CHECK_THAT(error_of(R"({"hardware": "tpu-v5e", "topology": {"shape": [2, 2]},
      "training": {"model": {"layers": 1, "d_model": 64, "heads": 1, "ffn": 64, "vocab": 64, "seq_len": 64},
                   "global_batch": 1}})"),
             Catch::StartsWith("s.json:/training: none of the "));
}

TEST_CASE("search: contradictory constraints are one error line each", "[search]") {
  const auto with = [](const std::string& search, const std::string& training = "") {
    return error_of(R"({"hardware": "tpu-v5e", "topology": {"shape": [4, 4]},
        "training": {"model": {"layers": 4, "d_model": 512, "heads": 8, "ffn": 2048, "vocab": 2048, "seq_len": 512},
                     "global_batch": 32)" +
                    training + R"(}, "search": )" + search + "}");
  };
  CHECK(with(R"({"shapes": [[4, 4]]})") ==
        "s.json:/search/shapes: topology.shape already fixes the slice; give one of them");
  CHECK(with(R"({"chips": 16})") == "s.json:/search/chips: topology.shape already fixes the slice; give one of them");
  CHECK(with(R"({"strategies": ["expert"]})") == "s.json:/search/strategies/0: the model has no experts");
  CHECK(with(R"({"strategies": ["fsdp"], "schedule": ["1f1b"]})") ==
        "s.json:/search/schedule: no plan has a pipeline: \"pipeline\" is not among the strategies");
  CHECK(with(R"({"schedule": ["1f1b"], "virtual_stages": [2]})") ==
        "s.json:/search/virtual_stages: virtual stages need the interleaved schedule, which \"schedule\" leaves out");
  CHECK(with(R"({"strategies": ["fsdp", "tensor"], "sharded_optimizer": [true]})") ==
        "s.json:/search/sharded_optimizer: it applies to plans with data parallelism, and \"data\" is not among the "
        "strategies");
  CHECK(with(R"({"strategies": ["fsdp"], "overlap_tensor": [true]})") ==
        "s.json:/search/overlap_tensor: it applies to plans with tensor parallelism, and \"tensor\" is not among the "
        "strategies");
  CHECK(with(R"({"strategies": ["data", "tensor"], "overlap_fsdp_prefetch": [false]})") ==
        "s.json:/search/overlap_fsdp_prefetch: it applies to plans with fsdp parallelism, and \"fsdp\" is not among "
        "the strategies");
  CHECK(with(R"({"overlap_tensor": [true], "sequence_parallel": [false]})") ==
        "s.json:/search/overlap_tensor: collective matmuls need sequence parallelism, which \"sequence_parallel\" "
        "turns off");
  CHECK(with(R"({"overlap_fsdp_prefetch": [true]})", R"(, "overlap": {"fsdp_prefetch": false})") ==
        "s.json:/search/overlap_fsdp_prefetch: training.overlap.fsdp_prefetch already fixes it; give one of them");
  CHECK(with(R"({"overlap_tensor": [true]})", R"(, "overlap": {"tensor": false})") ==
        "s.json:/search/overlap_tensor: training.overlap.tensor already fixes it; give one of them");
  CHECK(with(R"({"microbatch": [1, 2]})", R"(, "microbatch": 2)") ==
        "s.json:/search/microbatch: training.microbatch already fixes it; give one of them");
  CHECK(with(R"({"recompute": ["full"]})", R"(, "recompute": "none")") ==
        "s.json:/search/recompute: training.recompute already fixes it; give one of them");
  CHECK(with(R"({"sharded_optimizer": [1]})") == "s.json:/search/sharded_optimizer/0: expected true or false, got a number");
  // Slices and clusters no plan can use.
  CHECK(error_of(R"({"hardware": "tpu-v5p", "training": {"model": "llama3-8b", "global_batch": 32},
                     "search": {"chips": 7}})") ==
        "s.json:/search/chips: no tpu-v5p slice has 7 chips (a slice is 1, 2 or 4 chips along each axis, or whole "
        "4x4x4 cubes)");
  CHECK(error_of(R"({"hardware": "tpu-v5e", "training": {"model": "llama3-8b", "global_batch": 32},
                     "search": {"chips": 48}})") ==
        "s.json:/search/chips: no tpu-v5e slice has 48 chips (a slice is a power of two up to 16 chips along each "
        "axis)");
  CHECK(error_of(R"({"hardware": "tpu-v5e", "training": {"model": "llama3-8b", "global_batch": 32},
                     "search": {"shapes": [[4, 4], [4, 8]]}})") ==
        "s.json:/search/shapes: the shapes have 16 and 32 chips: the search compares plans on one system size");
  CHECK(error_of(R"({"hardware": "tpu-v5p", "training": {"model": "llama3-8b", "global_batch": 32},
                     "search": {"chips": 16, "shapes": [[4, 4]]}})") ==
        "s.json:/search/chips: \"shapes\" already lists the slices; give one of \"shapes\" and \"chips\"");
  CHECK(error_of(R"({"hardware": "h100-dgx", "training": {"model": "llama3-8b", "global_batch": 32},
                     "search": {"chips": 12}})") == "s.json:/search/chips: 12 GPUs are not whole h100-dgx nodes of 8 GPUs");
  CHECK(error_of(R"({"hardware": "h100-dgx", "topology": {"nodes": 2},
                     "training": {"model": "llama3-8b", "global_batch": 32}, "search": {"chips": 16}})") ==
        "s.json:/search/chips: topology.nodes already sizes the cluster; give one of \"chips\" and topology.nodes");
  CHECK(error_of(R"({"hardware": "h100-dgx", "training": {"model": "llama3-8b", "global_batch": 32},
                     "search": {"shapes": [[2, 2]]}})") ==
        "s.json:/search/shapes: a GPU cluster is sized by its nodes: give \"chips\" or topology.nodes");
}

TEST_CASE("search: every plan built in memory is the workload its JSON gives", "[search]") {
  // The plan's workload as `meshsim run` would read it (plan_workload, with
  // allow_oom as the search builds it), against the builder's: the same
  // fields, or the same refusal.
  const auto same = [](const SearchSpec& spec) {
    std::size_t valid = 0;
    const std::vector<Plan> plans = enumerate_plans(spec);
    for (const Plan& plan : plans) {
      workloads::Json doc = plan_workload(spec, plan);
      doc["training"]["allow_oom"] = true;
      std::string parsed, built;
      try {
        parsed = test::workload_digest(workloads::parse_workload(doc.dump(), spec.file));
      } catch (const InputError& e) {
        parsed = e.message();
      }
      try {
        built = test::workload_digest(build_plan(spec, plan));
        ++valid;
      } catch (const InputError& e) {
        built = e.message();
      }
      INFO(plan.label);
      CHECK(built == parsed);
    }
    return std::pair{plans.size(), valid};
  };
  const auto [tpu_plans, tpu_valid] = same(parse_spec(spec_text(R"(, "recompute": "selective")"), "s.json"));
  CHECK(tpu_valid > 0);
  CHECK(tpu_valid < tpu_plans);
  const auto [gpu_plans, gpu_valid] = same(parse_spec(R"({"hardware": "h100-dgx", "topology": {"nodes": 4},
    "training": {"model": {"layers": 4, "d_model": 512, "heads": 8, "ffn": 2048, "vocab": 2048, "seq_len": 512},
                 "global_batch": 32}, "search": {"schedule": ["1f1b", "interleaved", "gpipe"]}})", "s.json"));
  CHECK(gpu_valid > 0);
  CHECK(gpu_valid < gpu_plans);
}
