// The quotient by a torus' translations (driver/translations.hpp): when it
// applies, that it gives the very bytes of the full simulation, and that it
// steps aside (the full program runs) when a tie, an asymmetry or a program the
// builders did not lay out alike would make it inexact.
#include <catch2/catch.hpp>

#include <memory>
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "driver/expand.hpp"
#include "driver/simulate.hpp"
#include "driver/translations.hpp"
#include "reports/report.hpp"
#include "workloads/workload.hpp"

using namespace meshsim;

namespace {

// The translations that may leave `ex` (expanded from `w` on `t`) unchanged,
// along translated_axes(w, t), on w's fabric when it is a GPU system's.
std::optional<driver::Translations> find_translations(const workloads::Workload& w, const topology::Torus& t,
                                                      const driver::Expanded& ex) {
  driver::RunContext run(w);
  const std::vector<driver::Shift> axes = driver::translated_axes(w, run);
  if (!w.hardware.gpu) return driver::Translations::find(t, ex, axes, nullptr);
  const topology::Fabric fabric = w.make_fabric();
  return driver::Translations::find(t, ex, axes, &fabric);
}

workloads::Workload parse(const std::string& text) { return workloads::parse_workload(text, "t.json"); }

struct Run {
  std::string json;
  std::uint64_t translations = 0;
  std::uint64_t simulated = 0;
};

Run run(const std::string& text, bool reduce) {
  const workloads::Workload w = parse(text);
  driver::SimulateOptions o;
  o.reduce = reduce;
  o.busiest_links = 8;
  driver::RunContext context(w);
  const driver::RunResult r = driver::simulate(w, context, o);
  return {reports::format_json(w, context, r), r.translations, r.simulated_transfers};
}

const std::string kV4 = R"({"hardware": "tpu-v4", "mesh": {"X": 4, "Y": 4, "Z": 8}, "ops": [)";

// A training step with pipeline stages along X, tensor parallelism along Y and
// data parallelism along Z of a v5p 4x4x8.
const std::string kPipeline = R"({"hardware": "tpu-v5p", "topology": {"shape": [4, 4, 8]},
    "mesh": {"P": 4, "T": 4, "D": 8},
    "training": {"model": {"layers": 4, "d_model": 256, "heads": 8, "kv_heads": 4, "ffn": 512, "vocab": 256,
                           "seq_len": 64, "gated": true},
                 "global_batch": 64, "microbatch": 2,
                 "parallelism": {"pipeline": "P", "tensor": ["T"], "data": ["D"]}}})";

// The same on 8 DGX H100 nodes as a 2x4 grid: tensor parallelism (sequence
// parallel) inside each node, 2 pipeline stages along the first node axis and
// data parallelism (a sharded optimizer) along the second.
const std::string kGpuStep = R"({"hardware": "h100-dgx", "topology": {"nodes": [2, 4]},
    "mesh": {"T": 8, "P": 2, "D": 4},
    "training": {"model": {"layers": 4, "d_model": 256, "heads": 8, "kv_heads": 8, "ffn": 512, "vocab": 256,
                           "seq_len": 64, "gated": true},
                 "global_batch": 32, "microbatch": 2,
                 "parallelism": {"tensor": ["T"], "sequence_parallel": true, "pipeline": "P", "data": ["D"],
                                 "sharded_optimizer": true}}})";

// Every task of `p` named by its slot (its resource, or a join's chip after the
// `resources`) and its place on it, in that order: its kind, amount, op, step
// and its successors so named (with the edge's kind), sorted.
using SlotTask = std::tuple<std::uint64_t, std::uint64_t, int, std::uint64_t, std::uint16_t,
                            std::vector<std::uint64_t>>;
std::vector<SlotTask> slot_view(const sim::Program& p, std::size_t resources) {
  const std::size_t n = p.num_tasks();
  std::vector<std::uint64_t> name(n);
  std::map<std::uint64_t, std::uint64_t> filled;  // per slot, its tasks so far
  for (sim::TaskId id = 0; id < n; ++id) {
    const sim::Task& t = p.task(id);
    const std::uint64_t slot = t.kind() == sim::TaskKind::Join ? resources + t.resource : t.resource;
    name[id] = slot << 32 | filled[slot]++;
  }
  std::vector<SlotTask> out;
  for (sim::TaskId id = 0; id < n; ++id) {
    const sim::Task& t = p.task(id);
    std::vector<std::uint64_t> succ;
    for (std::uint32_t e : p.successors(id)) succ.push_back(name[e >> 1] << 1 | (e & 1u));
    std::sort(succ.begin(), succ.end());
    out.emplace_back(name[id], t.amount, static_cast<int>(t.kind()), std::uint64_t{t.op_kind}, p.step(id),
                     std::move(succ));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("translations: a collective over every axis runs one chip's tasks, with the full run's bytes",
          "[translations]") {
  // Each case: the workload, and how many translations the quotient uses (0: it must not apply).
  const std::vector<std::pair<std::string, std::uint64_t>> cases = {
      // Every axis of a 4x4x8 v4 (all wrapped): 128 translations.
      {kV4 + R"({"name": "ar", "kind": "all_reduce", "bytes": 16777216, "axes": ["X", "Y", "Z"]}]})", 128},
      // Three ops one after another.
      {kV4 + R"({"name": "ar", "kind": "all_reduce", "bytes": 16777216, "axes": ["X", "Y", "Z"]},
               {"name": "ag", "kind": "all_gather", "bytes": 8388608, "axes": ["X", "Y", "Z"], "after": ["ar"]},
               {"name": "rs", "kind": "reduce_scatter", "bytes": 8388608, "axes": ["Z"], "after": ["ag"]}]})",
       128},
      // A v5e 8x16 wraps on its 16 axis only: 16 translations, the line of 8 stays whole.
      {R"({"hardware": "tpu-v5e", "mesh": {"X": 8, "Y": 16}, "ops": [
           {"name": "ag", "kind": "all_gather", "bytes": 8388608, "axes": ["X", "Y"]}]})",
       16},
      // A 2x2 ring-of-rings on a v5e 4x4 with wraparound given.
      {R"({"hardware": "tpu-v5e", "topology": {"shape": [4, 4], "wraparound": true}, "mesh": {"X": 4, "Y": 4},
           "ops": [{"name": "rs", "kind": "reduce_scatter", "bytes": 4194304, "axes": ["X", "Y"]}]})",
       16},
      // No wraparound anywhere: no translation leaves the program alone.
      {R"({"hardware": "tpu-v5e", "mesh": {"X": 4, "Y": 8}, "ops": [
           {"name": "ag", "kind": "all_gather", "bytes": 8388608, "axes": ["X", "Y"]}]})",
       0},
      // Two ops at once on the same links: tasks ready at the same time on one
      // link, in every run ordered by activation time and then by keys that
      // every translate shares.
      {kV4 + R"({"name": "ar", "kind": "all_reduce", "bytes": 16777216, "axes": ["X", "Y", "Z"]},
               {"name": "ag", "kind": "all_gather", "bytes": 8388608, "axes": ["X", "Y", "Z"]}]})",
       128},
      // An all-to-all sends each piece straight to its member, offset by
      // offset and hop by hop over every chip, so a link's k-th task is its
      // translate's.
      {kV4 + R"({"name": "a2a", "kind": "all_to_all", "bytes": 16777216, "axes": ["X", "Y", "Z"]}]})", 128},
      // Over Z alone after an all-reduce over X and Y (every chip in one
      // component, no identical groups): still every translation.
      {kV4 + R"({"name": "ar", "kind": "all_reduce", "bytes": 1048576, "axes": ["X", "Y"]},
               {"name": "a2a", "kind": "all_to_all", "bytes": 16777216, "axes": ["Z"], "after": ["ar"]}]})",
       128},
      // A pipeline of 4 stages along X (its stages' ops and sends on part of
      // the chips): the translations along Y and Z keep every stage, 32 of them.
      {kPipeline, 32},
      // A send singles out two chips.
      {kV4 + R"({"name": "ar", "kind": "all_reduce", "bytes": 16777216, "axes": ["X", "Y", "Z"]},
               {"name": "s", "kind": "send", "bytes": 4096, "from": [0, 0, 0], "to": [1, 0, 0], "after": ["ar"]}]})",
       0},
      // GPU fabrics: shifts of the nodes. A training step on a 2x4 node grid:
      // its stages along the first axis, the 4 data-parallel replicas along
      // the second; in-node ops by ring, NVLS and send between stages.
      {kGpuStep, 4},
      // An in-node NVLS all-reduce beside rails' all-gathers (a ring through
      // the same GPU of every node) and reduce-scatters over both node axes: a
      // shift along P is no rotation of the latter (P runs fastest in it), so
      // the 4 shifts along D.
      {R"({"hardware": "h100-dgx", "topology": {"nodes": [2, 4]}, "mesh": {"X": 8, "P": 2, "D": 4}, "ops": [
           {"name": "ar", "kind": "all_reduce", "bytes": 16777216, "axes": ["X"], "algorithm": "nvls"},
           {"name": "ag", "kind": "all_gather", "bytes": 1048576, "axes": ["D"]},
           {"name": "rs", "kind": "reduce_scatter", "bytes": 1048576, "axes": ["P", "D"], "after": ["ar"]}]})",
       4},
      // With one node axis: in-node groups run forwards in every node, so
      // steps of 1 node, 4 translations (2 while they went by the node's parity).
      {R"({"hardware": "h100-dgx", "topology": {"nodes": 4}, "mesh": {"X": 8, "N": 4}, "ops": [
           {"name": "ar", "kind": "all_reduce", "bytes": 16777216, "axes": ["X"], "algorithm": "nvls"},
           {"name": "ag", "kind": "all_gather", "bytes": 1048576, "axes": ["N"]}]})",
       4},
      // A ring through all 64 GPUs of 8 nodes, every other node backwards,
      // beside an in-node all-gather: steps of 2 nodes, 4 translations.
      {R"({"hardware": "h100-dgx", "topology": {"nodes": 8}, "mesh": {"X": 8, "N": 8}, "ops": [
           {"name": "ar", "kind": "all_reduce", "bytes": 16777216, "axes": ["X", "N"], "algorithm": "ring"},
           {"name": "ag", "kind": "all_gather", "bytes": 8388608, "axes": ["X"]}]})",
       4},
      // A training step on 8 nodes in a row: tensor parallelism inside each
      // node, data parallelism over the nodes (a sharded optimizer: rings;
      // NCCL's tree, which an all-reduce there takes, has no such shift): 8
      // translations, one per node.
      {R"({"hardware": "h100-dgx", "topology": {"nodes": 8}, "mesh": {"T": 8, "D": 8},
           "training": {"model": {"layers": 2, "d_model": 256, "heads": 8, "kv_heads": 8, "ffn": 512, "vocab": 256,
                                  "seq_len": 64, "gated": true},
                        "global_batch": 16, "microbatch": 2,
                        "parallelism": {"tensor": ["T"], "data": ["D"], "sharded_optimizer": true}}})",
       8},
      // The same under leaves of 2 nodes (a unit: the 2 nodes along P): the
      // rings cross the spine cables, which a shift of whole units carries
      // with the nodes, one unit a step along D: 4 translations.
      {R"({"hardware": {"preset": "h100-dgx", "leaf_nodes": 2}, "topology": {"nodes": [2, 4]},
           "mesh": {"X": 8, "P": 2, "D": 4}, "ops": [
           {"name": "ar", "kind": "all_reduce", "bytes": 16777216, "axes": ["X"], "algorithm": "nvls"},
           {"name": "ag", "kind": "all_gather", "bytes": 1048576, "axes": ["D"]},
           {"name": "rs", "kind": "reduce_scatter", "bytes": 1048576, "axes": ["P", "D"], "after": ["ar"]}]})",
       4},
      // Three tiers: units of 2 nodes, pods of 4 under 2 spines each (2 cables
      // per leaf and spine, oversubscribed core), 8 nodes in a row: only a
      // shift of whole pods keeps the routes, so 4 nodes a step, 2
      // translations; rings and an all-to-all across the pods, and a send.
      {R"({"hardware": {"preset": "h100-dgx", "leaf_nodes": 2, "pod_nodes": 4, "spines": 2,
                        "leaf_oversubscription": 1, "spine_oversubscription": 2},
           "topology": {"nodes": 8}, "mesh": {"X": 8, "N": 8}, "ops": [
           {"name": "ag", "kind": "all_gather", "bytes": 4194304, "axes": ["N"]},
           {"name": "a2a", "kind": "all_to_all", "bytes": 8388608, "axes": ["N"], "after": ["ag"]},
           {"name": "ar", "kind": "all_reduce", "bytes": 8388608, "axes": ["X", "N"], "algorithm": "ring"}]})",
       2},
      // A training step under units of 2 nodes (a replica's 2 pipeline stages,
      // along P) and 2 spines: a step along D moves a whole unit, 4
      // translations; the stages leave P out.
      {R"({"hardware": {"preset": "h100-dgx", "leaf_nodes": 2, "spines": 2}, "topology": {"nodes": [2, 4]},
           "mesh": {"T": 8, "P": 2, "D": 4},
           "training": {"model": {"layers": 2, "d_model": 256, "heads": 8, "kv_heads": 8, "ffn": 512, "vocab": 256,
                                  "seq_len": 64, "gated": true},
                        "global_batch": 16, "microbatch": 2,
                        "parallelism": {"tensor": ["T"], "pipeline": "P", "data": ["D"], "sharded_optimizer": true}}})",
       4},
      // Uneven stages (1 and 2 layers) along P: the shifts along D keep each
      // stage's ops (rings: a sharded optimizer), 4 translations.
      {R"({"hardware": "h100-dgx", "topology": {"nodes": [2, 4]}, "mesh": {"T": 8, "P": 2, "D": 4},
           "training": {"model": {"layers": 3, "d_model": 256, "heads": 8, "kv_heads": 8, "ffn": 512, "vocab": 256,
                                  "seq_len": 64, "gated": true},
                        "global_batch": 16, "microbatch": 2,
                        "parallelism": {"tensor": ["T"], "pipeline": "P", "data": ["D"], "stage_layers": [1, 2],
                                        "sharded_optimizer": true}}})",
       4},
      // Replicated KV heads: pairs of chips along z sum their K/V gradients
      // over explicit groups, which the shifts along x and y keep, and those
      // of 2 along z (1 would move a pair onto halves of two): 32 translations.
      {R"({"hardware": "tpu-v5p", "topology": {"shape": [4, 4, 4]}, "mesh": {"F": 16, "T": 4},
           "training": {"model": {"layers": 2, "d_model": 256, "heads": 8, "kv_heads": 2, "ffn": 512, "vocab": 256,
                                  "seq_len": 64, "gated": true},
                        "global_batch": 16, "microbatch": 1,
                        "parallelism": {"fsdp": ["F"], "tensor": ["T"]}}})",
       32},
  };
  for (const auto& [text, translations] : cases) {
    INFO(text);
    const Run reduced = run(text, true);
    const Run full = run(text, false);
    CHECK(reduced.json == full.json);
    CHECK(reduced.translations == translations);
    CHECK(full.translations == 0);
    if (translations > 0) CHECK(reduced.simulated * translations == full.simulated);
  }
}

TEST_CASE("translations: the quotient's tasks and the automorphism check", "[translations]") {
  const workloads::Workload w =
      parse(kV4 + R"({"name": "ar", "kind": "all_reduce", "bytes": 16777216, "axes": ["X", "Y", "Z"]}]})");
  driver::RunContext t_run(w);
  const topology::Torus& t = t_run.torus();
  const driver::Expanded ex = driver::expand(w, t_run);
  std::optional<driver::Translations> x = find_translations(w, t, ex);
  REQUIRE(x.has_value());
  CHECK(x->copies() == 128);
  const std::optional<driver::TranslationQuotient> q = x->quotient();
  REQUIRE(q.has_value());
  // One task of every 128, on chip 0's links and compute unit.
  CHECK(q->program.num_tasks() * 128 == ex.program.num_tasks());
  CHECK(q->program.num_edges() * 128 == ex.program.num_edges());
  CHECK(q->translated.copies == 128);
  CHECK(q->translated.replicas.size() == 127);
  for (std::uint32_t r : q->translated.resources) CHECK(ex.resource_ends[r].first == 0);
  for (const std::vector<std::uint32_t>& images : q->translated.replicas) {
    REQUIRE(images.size() == q->translated.resources.size());
    for (std::size_t k = 0; k < images.size(); ++k) CHECK(images[k] != q->translated.resources[k]);
  }
  CHECK(x->verify());

  // The same program with one chip's transfer made longer is not invariant:
  // the per-slot counts agree, the check does not.
  sim::ProgramBuilder b;
  const sim::Program& p = ex.program;
  for (std::uint32_t op = 0; op < p.num_ops(); ++op) b.add_op();
  bool changed = false;
  for (sim::TaskId id = 0; id < p.num_tasks(); ++id) {
    sim::Task task = p.task(id);
    const bool bump =
        !changed && task.kind() == sim::TaskKind::Transfer && ex.resource_ends[task.resource].first == 5;
    changed = changed || bump;
    task.amount += bump ? 1 : 0;
    b.copy(task, task.resource, p.step(id));
  }
  for (sim::TaskId id = 0; id < p.num_tasks(); ++id)
    for (std::uint32_t e : p.successors(id))
      b.depend(id, e >> 1, (e & 1u) ? sim::EdgeKind::Stream : sim::EdgeKind::Full);
  REQUIRE(changed);
  driver::Expanded bumped = ex;
  bumped.program = std::move(b).finish();
  std::optional<driver::Translations> y = find_translations(w, t, bumped);
  REQUIRE(y.has_value());
  CHECK_FALSE(y->verify());
  // Through the driver: the bumped program runs in full, as --no-reduce would.
  driver::SimulateOptions full;
  full.reduce = false;
  const driver::RunResult a = driver::simulate_expanded(w, t_run, bumped);
  const driver::RunResult c = driver::simulate_expanded(w, t_run, bumped, full);
  // simulate_expanded runs the program it is given, with the tie keys of its
  // translations: the bumped one in full either way.
  CHECK(a.translations == 0);
  CHECK(reports::format_json(w, t_run, a) == reports::format_json(w, t_run, c));
}

TEST_CASE("translations: the quotient built op by op is the whole program's", "[translations]") {
  // A training step with pipeline stages (ops and sends on part of the chips)
  // and one without (many ops, some alike, dependencies), several ops at once,
  // and data parallelism between three slices (both directions of the DCN ring
  // on each chip's links).
  const std::vector<std::string> cases = {
      kPipeline,
      R"({"hardware": "tpu-v5p", "topology": {"shape": [4, 4, 4]}, "mesh": {"T": 4, "F": 16},
          "training": {"model": {"layers": 2, "d_model": 256, "heads": 8, "kv_heads": 4, "ffn": 512, "vocab": 256,
                                 "seq_len": 64, "gated": true},
                       "global_batch": 32, "microbatch": 2, "parallelism": {"tensor": ["T"], "fsdp": ["F"]}}})",
      kV4 + R"({"name": "ar", "kind": "all_reduce", "bytes": 16777216, "axes": ["X", "Y", "Z"]},
               {"name": "ag", "kind": "all_gather", "bytes": 8388608, "axes": ["X", "Y", "Z"]},
               {"name": "rs", "kind": "reduce_scatter", "bytes": 8388608, "axes": ["Z"], "after": ["ar", "ag"]},
               {"name": "ar2", "kind": "all_reduce", "bytes": 16777216, "axes": ["X", "Y", "Z"], "after": ["rs"]},
               {"name": "a2a", "kind": "all_to_all", "bytes": 4194304, "axes": ["Y", "Z"], "after": ["ar2"]}]})",
      R"({"hardware": "tpu-v5p", "topology": {"shape": [4, 4, 4], "slices": 3}, "mesh": {"F": 64, "D": 3},
          "ops": [{"name": "ag", "kind": "all_gather", "bytes": 6291456, "axes": ["F"]},
                  {"name": "dp", "kind": "all_reduce", "bytes": 6291456, "axes": ["D"], "after": ["ag"]},
                  {"name": "all", "kind": "all_reduce", "bytes": 6291456, "axes": ["F", "D"], "after": ["dp"]}]})",
      kGpuStep,
      // Steps of 2 nodes (in-node groups on 8 nodes in a row): two representative nodes.
      R"({"hardware": "h100-dgx", "topology": {"nodes": 8}, "mesh": {"T": 8, "D": 8},
          "training": {"model": {"layers": 2, "d_model": 256, "heads": 8, "kv_heads": 8, "ffn": 512, "vocab": 256,
                                 "seq_len": 64, "gated": true},
                       "global_batch": 16, "microbatch": 2,
                       "parallelism": {"tensor": ["T"], "data": ["D"], "sharded_optimizer": true}}})",
      // NCCL's tree over every GPU, turned: its quotient built without the op
      // (rail 0's channels on GPU 0's links), beside ops over the nodes alone;
      // on 5 nodes (tree 1 is tree 0 shifted), and on a grid of nodes with
      // the tree over one node axis (a group per row).
      R"({"hardware": "h100-dgx", "topology": {"nodes": 5}, "mesh": {"G": 8, "N": 5},
          "ops": [{"name": "tree", "kind": "all_reduce", "bytes": 10485765, "axes": ["G", "N"], "algorithm": "tree"},
                  {"name": "rails", "kind": "all_reduce", "bytes": 2097152, "axes": ["N"], "algorithm": "tree"},
                  {"name": "ag", "kind": "all_gather", "bytes": 1048576, "axes": ["N"], "after": ["tree"]},
                  {"name": "again", "kind": "all_reduce", "bytes": 10485765, "axes": ["G", "N"],
                   "algorithm": "tree", "after": ["ag", "rails"]}]})",
      R"({"hardware": "h100-dgx", "topology": {"nodes": [3, 2]}, "mesh": {"G": 8, "P": 3, "Q": 2},
          "ops": [{"name": "tree", "kind": "all_reduce", "bytes": 4194304, "axes": ["G", "P"], "algorithm": "tree"},
                  {"name": "again", "kind": "all_reduce", "bytes": 4194304, "axes": ["G", "P"], "algorithm": "tree",
                   "after": ["tree"]}]})",
  };
  for (const std::string& text : cases) {
    INFO(text);
    const workloads::Workload w = parse(text);
    driver::RunContext t_run(w);
    const topology::Torus& t = t_run.torus();
    const driver::Expanded ex = driver::expand(w, t_run);
    const std::optional<driver::Translations> x = find_translations(w, t, ex);
    REQUIRE(x.has_value());
    REQUIRE(x->verify());
    const std::optional<driver::TranslationQuotient> whole = x->quotient();
    const std::optional<driver::OpQuotient> by_ops = driver::quotient_by_ops(w, t_run);
    REQUIRE(whole.has_value());
    REQUIRE(by_ops.has_value());
    const sim::Program& a = whole->program;
    const sim::Program& b = by_ops->quotient.program;
    // Ops alike are built once: the step's layers; "ar2" like "ar".
    CHECK(by_ops->built_ops < w.ops.size() + (t.dcn_axis() >= 0 ? 1 : 0));
    CHECK(by_ops->full_tasks == ex.program.num_tasks());
    // The same tasks with the same successors; resources numbered alike (the
    // same ones, ascending).
    REQUIRE(a.num_tasks() == b.num_tasks());
    CHECK(a.num_edges() == b.num_edges());
    CHECK(whole->translated.resources == by_ops->quotient.translated.resources);
    CHECK(whole->translated.replicas == by_ops->quotient.translated.replicas);
    CHECK(whole->translated.copies == by_ops->quotient.translated.copies);
    CHECK(std::is_sorted(whole->keys.begin(), whole->keys.end()));
    CHECK(by_ops->quotient.keys.empty());  // its own ids are its keys
    // Task for task, each named by its slot and its place there (an op whose
    // rails are alike is laid out rail after rail, not as its builder
    // interleaves them: only each slot's order matters to the run).
    const std::size_t resources = whole->resources.size();
    CHECK(slot_view(a, resources) == slot_view(b, resources));
    // The layout: every op's counts as the whole program has them.
    CHECK(by_ops->ex.op_transfers == ex.op_transfers);
    CHECK(by_ops->ex.op_link_bytes == ex.op_link_bytes);
    CHECK(by_ops->ex.resources.size() == ex.resources.size());
  }
}

TEST_CASE("translations: along the wrapped axes that keep every op's chips and every send's pairs",
          "[translations]") {
  const workloads::Workload w = parse(kPipeline);
  driver::RunContext t_run(w);
  const topology::Torus& t = t_run.torus();
  // The stages lie along X (axis 0): Y and Z keep them.
  CHECK(driver::translated_axes(w, t_run) == std::vector<driver::Shift>{{1, 1}, {2, 1}});
  CHECK(driver::translation_count(driver::translated_axes(w, t_run), t) == 32);
  // A send from every chip to its +X neighbour is kept by every translation; one
  // pair alone by none.
  workloads::Workload shift = parse(kV4 + R"({"name": "ar", "kind": "all_reduce", "bytes": 4096, "axes": ["X"]}]})");
  const workloads::Op ar = shift.ops[0];
  shift.ops[0] = workloads::Op(OpKind::Send);
  shift.ops[0].name = shift.ops[0].group = ar.name;
  shift.ops[0].send().bytes = ar.collective().bytes;
  driver::RunContext v4_run(shift);
  const topology::Torus& v4 = v4_run.torus();
  for (topology::ChipId c = 0; c < v4.num_chips(); ++c)
    shift.ops[0].send().pairs.emplace_back(c, v4.neighbor(c, 0, topology::Direction::Plus));
  CHECK(driver::translated_axes(shift, v4_run) == std::vector<driver::Shift>{{0, 1}, {1, 1}, {2, 1}});
  shift.ops[0].send().pairs.resize(1);
  CHECK(driver::translated_axes(shift, v4_run).empty());
}

TEST_CASE("translations: only on an untwisted TPU torus with a wrapped axis, or a GPU fabric's nodes",
          "[translations]") {
  const auto may = [](const std::string& text) {
    const workloads::Workload w = parse(text);
    return !driver::translated_axes(w, *std::make_unique<driver::RunContext>(w)).empty();
  };
  CHECK(may(kV4 + R"({"name": "ar", "kind": "all_reduce", "bytes": 1024, "axes": ["X"]}]})"));
  CHECK_FALSE(may(kV4 + R"({"name": "s", "kind": "send", "bytes": 1024, "from": [0, 0, 0], "to": [1, 0, 0]}]})"));
  CHECK_FALSE(may(R"({"hardware": "tpu-v4", "topology": {"shape": [4, 4, 8], "twisted": true},
                      "mesh": {"X": 4, "Y": 4, "Z": 8},
                      "ops": [{"name": "ar", "kind": "all_reduce", "bytes": 1024, "axes": ["X", "Y", "Z"]}]})"));
  // A GPU fabric's node axes, but not for a ring through the GPUs of two
  // nodes (every other node's backwards: a shift of 2 nodes is no shift).
  CHECK_FALSE(may(R"({"hardware": "h100-dgx", "topology": {"nodes": 2}, "mesh": {"G": 8, "N": 2},
                      "ops": [{"name": "ar", "kind": "all_reduce", "bytes": 1024, "axes": ["G", "N"],
                               "algorithm": "ring"}]})"));
  // NCCL's tree across nodes: no node shift, but the rotation of every node's
  // GPUs (its channels are the rails' rotations of each other); not when an op
  // over the GPUs of a node is something else.
  const auto axes = [](const std::string& text) {
    const workloads::Workload w = parse(text);
    return driver::translated_axes(w, *std::make_unique<driver::RunContext>(w));
  };
  const std::vector<driver::Shift> rotation{{0, 1}};
  CHECK(axes(R"({"hardware": "h100-dgx", "topology": {"nodes": 2}, "mesh": {"G": 8, "N": 2},
                 "ops": [{"name": "ar", "kind": "all_reduce", "bytes": 1024, "axes": ["G", "N"]}]})") == rotation);
  CHECK(axes(R"({"hardware": "h100-dgx", "topology": {"nodes": 4}, "mesh": {"G": 8, "N": 4},
                 "ops": [{"name": "ar", "kind": "all_reduce", "bytes": 1073741824, "axes": ["N"],
                          "algorithm": "tree"}]})") == rotation);
  CHECK(axes(R"({"hardware": "h100-dgx", "topology": {"nodes": 4}, "mesh": {"G": 8, "N": 4},
                 "ops": [{"name": "ar", "kind": "all_reduce", "bytes": 1073741824, "axes": ["N"], "algorithm": "tree"},
                         {"name": "tp", "kind": "all_reduce", "bytes": 1048576, "axes": ["G"]}]})")
            .empty());
  CHECK(may(R"({"hardware": "h100-dgx", "topology": {"nodes": 4}, "mesh": {"G": 8, "N": 4},
                "ops": [{"name": "ar", "kind": "all_reduce", "bytes": 1073741824, "axes": ["N"],
                         "algorithm": "ring"}]})"));
  // NCCL's NVLS tree: neither a node shift along its node axes (its double
  // binary tree) nor the rotation (not offered for it); along another node
  // axis, where its groups are apart, a shift.
  CHECK(axes(R"({"hardware": "h100-dgx", "topology": {"nodes": 4}, "mesh": {"G": 8, "N": 4},
                 "ops": [{"name": "ar", "kind": "all_reduce", "bytes": 1073741824, "axes": ["G", "N"],
                          "algorithm": "nvls_tree"}]})")
            .empty());
  CHECK(axes(R"({"hardware": "h100-dgx", "topology": {"nodes": [2, 3]}, "mesh": {"G": 8, "P": 2, "D": 3},
                 "ops": [{"name": "ar", "kind": "all_reduce", "bytes": 1048576, "axes": ["G", "D"],
                          "algorithm": "nvls_tree"}]})") == std::vector<driver::Shift>{{1, 1}});
  // A program on the switches' cables (leaves of 2 nodes, rings across them):
  // a step of a whole unit carries the cables with the nodes.
  const workloads::Workload cables = parse(R"({"hardware": {"preset": "h100-dgx", "leaf_nodes": 2},
      "topology": {"nodes": 4}, "mesh": {"G": 8, "N": 4},
      "ops": [{"name": "ag", "kind": "all_gather", "bytes": 1048576, "axes": ["N"]}]})");
  driver::RunContext ct_run(cables);
  const topology::Torus& ct = ct_run.torus();
  CHECK(driver::translated_axes(cables, ct_run) == std::vector<driver::Shift>{{1, 2}});
  const driver::Expanded cx = driver::expand(cables, ct_run);
  std::optional<driver::Translations> moved = find_translations(cables, ct, cx);
  REQUIRE(moved.has_value());
  CHECK(moved->copies() == 2);
  CHECK(moved->verify());
  // A partial unit (6 nodes under leaves of 4): no shift keeps the cables, so
  // they are mapped to nothing and a program on them is refused.
  const workloads::Workload partial = parse(R"({"hardware": {"preset": "h100-dgx", "leaf_nodes": 4},
      "topology": {"nodes": 6}, "mesh": {"G": 8, "N": 6},
      "ops": [{"name": "ag", "kind": "all_gather", "bytes": 1048576, "axes": ["N"]}]})");
  driver::RunContext pt_run(partial);
  const topology::Torus& pt = pt_run.torus();
  CHECK(driver::translated_axes(partial, pt_run) == std::vector<driver::Shift>{{1, 1}});
  CHECK_FALSE(find_translations(partial, pt, driver::expand(partial, pt_run)).has_value());
  CHECK_FALSE(may(R"({"hardware": "tpu-v5e", "mesh": {"X": 4, "Y": 8}, "ops": [
                      {"name": "ag", "kind": "all_gather", "bytes": 1024, "axes": ["X", "Y"]}]})"));
}

TEST_CASE("translations: a quotient run past the time limit reports it, though the whole program is too big",
          "[translations]") {
  // Three all-gathers at once whose simulated time passes 2^62 ps: the
  // quotient reaches the limit where the full run would, and the error names
  // the same op, even when only the quotient fits the run-size limits.
  const workloads::Workload w = parse(R"({"hardware": "tpu-v4", "mesh": {"X": 4, "Y": 4, "Z": 4}, "ops": [
      {"kind": "all_gather", "bytes": 8e17, "axes": ["X", "Y", "Z"]},
      {"kind": "all_gather", "bytes": 8e17, "axes": ["X", "Y", "Z"]},
      {"kind": "all_gather", "bytes": 8e17, "axes": ["X", "Y", "Z"]}]})");
  driver::RunContext t_run(w);
  driver::SimulateOptions o;
  o.limits.max_transfers = driver::run_size(w, t_run).transfers;
  REQUIRE(o.limits.max_transfers * 64 <= driver::estimate_run(w, t_run).transfers);
  CHECK_THROWS_WITH(driver::simulate(w, o), Catch::Contains("t.json:/ops/1: simulated time would exceed the limit"));
  o.reduce = false;
  CHECK_THROWS_WITH(driver::simulate(w, o), Catch::Contains("the run would need about"));
}

TEST_CASE("translations: NCCL's tree turns every node's GPUs, not a spine's cables", "[translations]") {
  const auto workload = [](const std::string& leaves) {
    return parse(R"({"hardware": {"preset": "h100-dgx")" + leaves + R"(}, "topology": {"nodes": 4},
      "mesh": {"G": 8, "N": 4}, "ops": [{"name": "ar", "kind": "all_reduce", "bytes": 33554432,
      "axes": ["G", "N"], "algorithm": "tree"}]})");
  };
  // One leaf per rail: channel (r, t) is channel (0, t) turned by r GPUs, and
  // every link's tasks come in an order the turn keeps.
  const workloads::Workload one = workload("");
  driver::RunContext t_run(one);
  const topology::Torus& t = t_run.torus();
  CHECK(driver::translated_axes(one, t_run) == std::vector<driver::Shift>{{0, 1}});
  const driver::Expanded ex = driver::expand(one, t_run);
  const std::optional<driver::Translations> x = find_translations(one, t, ex);
  REQUIRE(x);
  CHECK(x->copies() == 8);
  CHECK(x->quotient());
  CHECK(x->verify());
  // quotient_by_ops builds its quotient without the op (rail 0's channels on
  // GPU 0's links; the test above compares it with this one, slot by slot).
  driver::GpuChoices& choices = *t_run.gpu();
  CHECK(driver::turns_unbuilt(one.ops[0], choices, {{0, 1}}));
  // Over 4 nodes, the mirror of the nodes too: rail 0's tree 0 alone.
  CHECK(driver::mirrors_unbuilt(one, t_run, {{0, 1}}));
  const std::optional<driver::OpQuotient> q = driver::quotient_by_ops(one, t_run);
  REQUIRE(q);
  CHECK(q->quotient.mirrored);
  CHECK(q->quotient.translated.copies == 16);
  CHECK(q->built_tasks == q->quotient.program.num_tasks());
  // Its transfers (past the entry and exit joins of nodes 0 and 1's GPU 0) are
  // a sixteenth of the op's (past the joins of 32 GPUs).
  CHECK((q->built_tasks - 2 * 2) * 16 == ex.program.num_tasks() - 2 * 32);
  CHECK(q->full_tasks == ex.program.num_tasks());
  // Leaves of 2 nodes: trees cross the spines, whose cables the turn would
  // move to the next rail's leaf (not mapped): no quotient, the whole program runs.
  const workloads::Workload two = workload(R"(, "leaf_nodes": 2, "spines": 2)");
  driver::RunContext t2_run(two);
  const topology::Torus& t2 = t2_run.torus();
  CHECK(driver::translated_axes(two, t2_run) == std::vector<driver::Shift>{{0, 1}});
  CHECK_FALSE(find_translations(two, t2, driver::expand(two, t2_run)));
  CHECK(driver::simulate(two).simulated_transfers == driver::expand(two, t2_run).op_transfers[0]);
}

TEST_CASE("translations: a one-op quotient is its op's, also laid out rail by rail", "[translations]") {
  // An op over the nodes alone is built on rail 0 and laid out rail after rail
  // (its resources then not ascending): it is renumbered, not taken as it is;
  // NCCL's tree turned is taken as it is (over 5 nodes: no mirror, its quotient
  // is the rotation's alone).
  for (const auto& [op, nodes] : {std::pair{std::string(R"("axes": ["N"], "algorithm": "ring")"), 4},
                                  std::pair{std::string(R"("axes": ["G", "N"], "algorithm": "tree")"), 5}}) {
    INFO(op);
    const std::string m = std::to_string(nodes);
    const workloads::Workload w = parse(R"({"hardware": "h100-dgx", "topology": {"nodes": )" + m + R"(},
        "mesh": {"G": 8, "N": )" + m + R"(}, "ops": [{"name": "ar", "kind": "all_reduce", "bytes": 4194304, )" +
                                        op + "}]}");
    driver::RunContext t_run(w);
    const topology::Torus& t = t_run.torus();
    const driver::Expanded ex = driver::expand(w, t_run);
    const std::optional<driver::Translations> x = find_translations(w, t, ex);
    REQUIRE(x);
    REQUIRE(x->verify());
    const std::optional<driver::TranslationQuotient> whole = x->quotient();
    const std::optional<driver::OpQuotient> by_ops = driver::quotient_by_ops(w, t_run);
    REQUIRE(whole);
    REQUIRE(by_ops);
    CHECK(whole->translated.resources == by_ops->quotient.translated.resources);
    const std::size_t resources = whole->resources.size();
    CHECK(slot_view(whole->program, resources) == slot_view(by_ops->quotient.program, resources));
    CHECK(by_ops->ex.op_transfers == ex.op_transfers);
  }
}

TEST_CASE("translations: NCCL's tree over an even number of nodes is its mirror's too", "[translations]") {
  const auto workload = [](const std::string& hardware, const std::string& nodes, const std::string& mesh,
                           const std::string& ops) {
    return R"({"hardware": )" + hardware + R"(, "topology": {"nodes": )" + nodes + R"(}, "mesh": )" + mesh +
           R"(, "ops": [)" + ops + "]}";
  };
  const auto tree = [](std::uint64_t bytes, const std::string& axes) {
    return R"({"name": "ar", "kind": "all_reduce", "bytes": )" + std::to_string(bytes) + R"(, "axes": )" + axes +
           R"(, "algorithm": "tree"})";
  };
  // Each case: the workload, and the images per simulated task (16: the
  // rotation and the mirror; 8: the rotation alone).
  const std::vector<std::pair<std::string, std::uint64_t>> cases = {
      // 2, 4 and 6 nodes; odd bytes, and fewer than a chunk.
      {workload(R"("h100-dgx")", "2", R"({"G": 8, "N": 2})", tree(50331653, R"(["G", "N"])")), 16},
      {workload(R"("h100-dgx")", "4", R"({"G": 8, "N": 4})", tree(4097, R"(["G", "N"])")), 16},
      {workload(R"("a100-dgx")", "6", R"({"G": 8, "N": 6})", tree(50331653, R"(["G", "N"])")), 16},
      // A 3x4 grid of nodes, the ring (and so the ranks) along B first: the
      // mirror reverses both node coordinates.
      {workload(R"("h100-dgx")", "[3, 4]", R"({"G": 8, "A": 3, "B": 4})", tree(16777219, R"(["G", "B", "A"])")),
       16},
      // 5 nodes: tree 1 is tree 0 shifted, no mirror.
      {workload(R"("h100-dgx")", "5", R"({"G": 8, "N": 5})", tree(16777219, R"(["G", "N"])")), 8},
      // A group per row of the grid: no mirror (one group over every GPU only).
      {workload(R"("h100-dgx")", "[2, 4]", R"({"G": 8, "A": 2, "B": 4})", tree(16777219, R"(["G", "B"])")), 8},
      // Two ops: no mirror (one op only).
      {workload(R"("h100-dgx")", "4", R"({"G": 8, "N": 4})",
                tree(16777219, R"(["G", "N"])") + R"(, {"name": "again", "kind": "all_reduce", "bytes": 4194304,
                "axes": ["G", "N"], "algorithm": "tree", "after": ["ar"]})"),
       8},
  };
  for (const auto& [text, images] : cases) {
    INFO(text);
    const Run reduced = run(text, true);
    const Run full = run(text, false);
    CHECK(reduced.translations == images);
    CHECK(reduced.json == full.json);
    CHECK(full.translations == 0);
  }
  // The mirror halves the rotation's quotient (one tree of two), and the
  // report says which symmetries it used.
  const std::string even = workload(R"("h100-dgx")", "4", R"({"G": 8, "N": 4})", tree(4194304, R"(["G", "N"])"));
  const std::string odd = workload(R"("h100-dgx")", "5", R"({"G": 8, "N": 5})", tree(4194304, R"(["G", "N"])"));
  const Run mirrored = run(even, true);
  CHECK(mirrored.simulated * 16 == run(even, false).simulated);
  CHECK(run(odd, true).simulated * 8 == run(odd, false).simulated);
  const workloads::Workload w = parse(even);
  const driver::RunResult r = driver::simulate(w);
  CHECK(r.mirrored);
  CHECK_THAT(reports::reduction_note(r), Catch::Contains("one task of each set of 16 images (rotations of every node's "
                                                        "GPUs and the mirror of the nodes"));
}
