// The numerical verifier proves lowerings correct, and catches broken ones.
#include <catch2/catch.hpp>

#include <string>

#include "verify/verifier.hpp"
#include "workloads/workload.hpp"

using namespace meshsim;

namespace {

workloads::Workload matmul(const std::string& a, const std::string& b, const std::string& extra = "") {
  const std::string text = R"({"hardware": "tpu-v5e", "mesh": {"X": 4, "Y": 2},
    "topology": {"shape": [4, 2], "wraparound": true},
    "arrays": {"A": {"shape": {"I": 64, "J": 32}, "dtype": "bf16", "sharding": ")" + a + R"("},
               "B": {"shape": {"J": 32, "K": 16}, "dtype": "bf16", "sharding": ")" + b + R"("}},
    "ops": [{"name": "mm", "kind": "matmul", "a": "A", "b": "B", "out": "C")" + extra + "}]}";
  return workloads::parse_workload(text, "t.json");
}

std::string last_sharding(const workloads::Workload& w) { return w.ops.back().sharding_after; }

}  // namespace

TEST_CASE("Verify: the four cases of the cheat sheet compute the unsharded product", "[verify]") {
  struct Case {
    const char* a;
    const char* b;
    const char* extra;
    const char* result;
  };
  const Case cases[] = {
      {"A[I_X, J]", "B[J, K_Y]", "", "C[I_X, K_Y]"},                          // case 1
      {"A[I, J_X]", "B[J, K]", "", "C[I, K]"},                                // case 2
      {"A[I, J_Y]", "B[J_Y, K]", "", "C[I, K]"},                              // case 3, all-reduce
      {"A[I_X, J_Y]", "B[J_Y, K]", "", "C[I_X, K]"},                          // case 3, I passes through
      {"A[I_X, J_Y]", "B[J_Y, K]", R"(, "out_sharding": "C[I_X, K_Y]")", "C[I_X, K_Y]"},  // reduce-scatter
      {"A[I_X, J]", "B[J, K_X]", "", "C[I_X, K]"},                            // case 4
      {"A[I, J_X]", "B[J_Y, K]", "", ""},                                     // J split on different axes
      {"A[I_XY, J]", "B[J, K]", R"(, "out_sharding": "C[I, K_XY]")", "C[I, K_XY]"},  // all-to-all reshard
      {"A[I, J]", "B[J, K]", R"(, "out_sharding": "C[I_Y, K_X]")", "C[I_Y, K_X]"},   // free local slices
      {"A[I_X, J]", "B[J, K_Y]", R"(, "out_sharding": "C[I, K]")", "C[I, K]"},       // gathers after
  };
  for (const Case& c : cases) {
    const workloads::Workload w = matmul(c.a, c.b, c.extra);
    INFO(c.a << " . " << c.b << c.extra);
    if (*c.result) CHECK(last_sharding(w) == c.result);
    const verify::Report r = verify::verify(w);
    INFO(verify::format_report(r));
    CHECK(r.ok());
  }
}

TEST_CASE("Verify: case 2 moves the smaller of input and output", "[verify]") {
  // A is small: gather it. With a huge A and a small C, reduce the output instead.
  const workloads::Workload gather = matmul("A[I, J_X]", "B[J, K]");
  CHECK(gather.ops.front().kind == OpKind::AllGather);
  const std::string text = R"({"hardware": "tpu-v5e", "mesh": {"X": 4},
    "topology": {"shape": [4], "wraparound": true},
    "arrays": {"A": {"shape": {"I": 8, "J": 4096}, "dtype": "bf16", "sharding": "A[I, J_X]"},
               "B": {"shape": {"J": 4096, "K": 8}, "dtype": "bf16", "sharding": "B[J, K]"}},
    "ops": [{"name": "mm", "kind": "matmul", "a": "A", "b": "B", "out": "C"}]})";
  const workloads::Workload reduce = workloads::parse_workload(text, "t.json");
  CHECK(reduce.ops.front().kind == OpKind::Matmul);
  CHECK(reduce.ops.back().kind == OpKind::AllReduce);
  CHECK(verify::verify(reduce).ok());
}

TEST_CASE("Verify: a broken lowering is caught", "[verify]") {
  workloads::Workload w = matmul("A[I, J_Y]", "B[J_Y, K]");
  REQUIRE(w.ops.back().kind == OpKind::AllReduce);
  REQUIRE(verify::verify(w).ok());
  SECTION("the all-reduce copies instead of summing") {
    w.ops.back().kind = OpKind::AllGather;
    const verify::Report r = verify::verify(w);
    CHECK_FALSE(r.ok());
    CHECK(r.ops.back().status == "FAILED");
  }
  SECTION("the all-reduce is skipped") {
    w.ops.pop_back();
    const verify::Report r = verify::verify(w);
    CHECK_FALSE(r.ok());
    REQUIRE(r.problems.size() == 1);
    CHECK(r.problems[0] == "C is left as unreduced partial sums");
  }
  SECTION("the local matmul multiplies the wrong split") {
    w.ops.front().inputs[1].shard_axes[0].clear();  // B as if replicated on J
    CHECK_FALSE(verify::verify(w).ok());
  }
}

TEST_CASE("Verify: MLP blocks, both variants, repeated", "[verify]") {
  const std::string text = R"({"hardware": "tpu-v5e", "mesh": {"X": 2, "Y": 4},
    "topology": {"shape": [2, 4], "wraparound": true},
    "arrays": {"Xa": {"shape": {"B": 16, "D": 8}, "dtype": "bf16", "sharding": "Xa[B_X, D]"},
               "W1": {"shape": {"D": 8, "F": 32}, "dtype": "bf16", "sharding": "W1[D, F_Y]"},
               "W2": {"shape": {"F": 32, "D": 8}, "dtype": "bf16", "sharding": "W2[F_Y, D]"}},
    "ops": [{"name": "a", "kind": "mlp", "x": "Xa", "w1": "W1", "w2": "W2", "out": "Y1", "repeat": 3},
            {"name": "b", "kind": "mlp", "x": "Xa", "w1": "W1", "w2": "W2", "out": "Y2",
             "variant": "gather_middle"}]})";
  const workloads::Workload w = workloads::parse_workload(text, "t.json");
  const verify::Report r = verify::verify(w);
  INFO(verify::format_report(r));
  CHECK(r.ok());
  // column->row: per block two local matmuls and one all-reduce, nothing between.
  int reduces = 0, gathers = 0;
  for (const auto& op : w.ops) {
    if (op.group.rfind("a.", 0) == 0 && op.kind == OpKind::AllReduce) ++reduces;
    if (op.group.rfind("a.", 0) == 0 && op.kind == OpKind::AllGather) ++gathers;
  }
  CHECK(reduces == 3);
  CHECK(gathers == 0);
}

TEST_CASE("Verify: user collectives move the data they claim", "[verify]") {
  const std::string text = R"({"hardware": "tpu-v5e", "mesh": {"X": 4, "Y": 2},
    "topology": {"shape": [4, 2], "wraparound": true},
    "arrays": {"A": {"shape": {"I": 16, "J": 8}, "dtype": "bf16", "sharding": "A[I_XY, J]"}},
    "ops": [{"kind": "all_gather", "array": "A", "axes": ["Y"]},
            {"kind": "all_to_all", "array": "A", "axes": ["X"], "dim": "J"},
            {"kind": "all_reduce", "array": "A", "axes": ["Y"]},
            {"kind": "reduce_scatter", "array": "A", "axes": ["Y"], "dim": "I"}]})";
  const workloads::Workload w = workloads::parse_workload(text, "t.json");
  CHECK(w.ops[1].sharding_after == "A[I, J_X]");
  CHECK(w.ops[3].sharding_after == "A[I_Y, J_X]");
  const verify::Report r = verify::verify(w);
  INFO(verify::format_report(r));
  CHECK(r.ok());
}
