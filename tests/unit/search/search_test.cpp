// meshsim search: pruning is exact (the search's top equals the exhaustive top,
// and no pruned plan would have entered it), the bound is never above a
// simulated step, and each bad spec is one error line.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "base/error.hpp"
#include "search/search.hpp"

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
  CHECK(pruned.enumerated == pruned.invalid + pruned.pruned_memory + pruned.pruned_bound + pruned.simulated);
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
        "s.json:: give the slice's shape: \"topology\": {\"shape\": [...]}");
  CHECK(error_of(R"({"hardware": "tpu-v5e", "topology": {"shape": [4, 4]},
                     "training": {"model": "llama3-8b", "global_batch": 16}, "search": {"strategies": ["zero"]}})") ==
        "s.json:/search/strategies/0: unknown strategy 'zero' (known: data, fsdp, tensor, pipeline)");
  CHECK(error_of(R"({"hardware": "tpu-v5e", "topology": {"shape": [4, 4]},
                     "training": {"model": "llama3-8b", "global_batch": 16}, "search": {"beam": 3}})") ==
        "s.json:/search/beam: unknown key 'beam' (expected one of: strategies, microbatch, recompute)");
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
