// A run on two threads (sim::Executor::run, docs/ARCHITECTURE.md "Two
// threads"): where the program splits, the very bytes of the run on one.
#include <catch2/catch.hpp>

#include <string>

#include "driver/simulate.hpp"
#include "reports/report.hpp"
#include "workloads/workload.hpp"

using namespace meshsim;

namespace {

workloads::Workload parse(const std::string& text) { return workloads::parse_workload(text, "t.json"); }

struct Run {
  std::string json;
  unsigned threads = 0;
  std::uint64_t windows = 0;
};

Run run(const workloads::Workload& w, unsigned threads, bool reduce) {
  driver::SimulateOptions o;
  o.threads = threads;
  o.reduce = reduce;
  o.busiest_links = 8;
  driver::RunContext context(w);
  const driver::RunResult r = driver::simulate(w, context, o);
  return {reports::format_json(w, context, r), r.threads, r.windows};
}

}  // namespace

TEST_CASE("threads: a program split in two runs as on one thread, byte for byte", "[threads]") {
  // Each: a workload, and whether its program splits reduced and with
  // --no-reduce (its ties go by keys where the torus' translations or a GPU
  // fabric's node shifts leave it unchanged; a quotient may be too small).
  struct Case {
    std::string text;
    bool reduced, full;
  };
  const Case cases[] = {
      // NCCL's tree over 16 DGX H100 nodes: its quotient, and whole.
      {R"({"hardware": "h100-dgx", "topology": {"nodes": 16}, "mesh": {"G": 8, "N": 16}, "ops": [
          {"kind": "all_reduce", "bytes": 16777216, "axes": ["G", "N"], "algorithm": "tree"}]})",
       true, true},
      // Rings over a v4 4x4x8 torus, two ops that contend: one chip's quotient
      // is one part; the whole program splits.
      {R"({"hardware": "tpu-v4", "mesh": {"X": 4, "Y": 4, "Z": 8}, "ops": [
          {"kind": "all_reduce", "bytes": 8388608, "axes": ["X", "Z"]},
          {"kind": "all_gather", "bytes": 4194304, "axes": ["Y", "Z"], "after": []}]})",
       false, true},
      // A training step on a v5p 4x4x8: pipeline stages, tensor and data parallelism.
      {R"({"hardware": "tpu-v5p", "topology": {"shape": [4, 4, 8]}, "mesh": {"P": 4, "T": 4, "D": 8},
          "training": {"model": {"layers": 4, "d_model": 256, "heads": 8, "kv_heads": 4, "ffn": 512, "vocab": 256,
                                 "seq_len": 64, "gated": true},
                       "global_batch": 64, "microbatch": 2,
                       "parallelism": {"pipeline": "P", "tensor": ["T"], "data": ["D"]}}})",
       true, true},
      // A send: no keys, one thread.
      {R"({"hardware": "tpu-v5e", "mesh": {"X": 4, "Y": 4}, "ops": [
          {"kind": "send", "bytes": 1048576, "from": [0, 0], "to": [2, 1]}]})",
       false, false},
  };
  for (const Case& c : cases) {
    const workloads::Workload w = parse(c.text);
    for (const bool reduce : {true, false}) {
      CAPTURE(c.text, reduce);
      const bool splits = reduce ? c.reduced : c.full;
      const Run one = run(w, 1, reduce);
      const Run two = run(w, 2, reduce);
      CHECK(one.threads == 1);
      CHECK(two.threads == (splits ? 2u : 1u));
      if (splits) CHECK(two.windows > 1);
      CHECK(one.json == two.json);
    }
  }
}

TEST_CASE("threads: a split run past the time limit reports the op one thread does", "[threads]") {
  // Three all-gathers at once over a v4 4x4x4, whole (--no-reduce): small, the
  // program splits; past 2^62 ps, the split run stops and runs again on one
  // thread, which names the op that passed the limit first.
  const auto workload = [](const std::string& bytes) {
    std::string ops;
    for (int i = 0; i < 3; ++i)
      ops += std::string(i ? ", " : "") + R"({"kind": "all_gather", "bytes": )" + bytes + R"(, "axes": ["X", "Y", "Z"]})";
    return parse(R"({"hardware": "tpu-v4", "mesh": {"X": 4, "Y": 4, "Z": 4}, "ops": [)" + ops + "]}");
  };
  driver::SimulateOptions o;
  o.reduce = false;
  o.threads = 2;
  CHECK(driver::simulate(workload("8e6"), o).threads == 2);
  const workloads::Workload w = workload("8e17");
  for (const unsigned threads : {1u, 2u}) {
    o.threads = threads;
    CHECK_THROWS_WITH(driver::simulate(w, o), Catch::Contains("t.json:/ops/1: simulated time would exceed the limit"));
  }
}
