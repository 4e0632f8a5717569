// The training-step verifier executes the lowered layers chip by chip and
// matches the unsharded layers under every parallelism; lowerings broken on
// purpose (a collective dropped, a shape or size changed, a send lost) fail.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "base/error.hpp"
#include "verify/training_verifier.hpp"
#include "workloads/workload.hpp"

using namespace meshsim;

namespace {

struct Model {
  int layers = 1;
  bool gated = true;
  int microbatch = 1;
};

// A tiny GQA transformer (d_model 16, 4 heads of 4, 2 KV heads, FFN 32, seq 8).
workloads::Workload step(const std::string& mesh, const std::string& plan, int global_batch, Model m = {},
                         const std::string& extra = "") {
  const std::string model = R"({"layers": )" + std::to_string(m.layers) +
                            R"(, "d_model": 16, "heads": 4, "kv_heads": 2, "ffn": 32, "vocab": 8, "seq_len": 8, )" +
                            R"("gated": )" + (m.gated ? "true" : "false") + "}";
  const std::string text = R"({"hardware": "tpu-v5p", "mesh": )" + mesh + R"(, "training": {"model": )" + model +
                           R"(, "global_batch": )" + std::to_string(global_batch) + R"(, "microbatch": )" +
                           std::to_string(m.microbatch) + R"(, "parallelism": )" + plan + extra + "}}";
  return workloads::parse_workload(text, "t.json");
}

bool passes(const workloads::Workload& w) {
  const verify::Report r = verify::verify_training(w);
  INFO(verify::format_training_report(r));
  // Every layer's output, input gradient and weight gradients are checked.
  std::size_t checked = 0;
  for (const verify::OpCheck& c : r.ops)
    if (c.status == "ok") ++checked;
  const std::size_t per_layer = 2 + (w.training->model.gated ? 7 : 6);
  CHECK(checked == per_layer * w.training->model.layers);
  return r.ok();
}

std::size_t index_of(const workloads::Workload& w, const std::string& name) {
  const auto it = std::find_if(w.ops.begin(), w.ops.end(), [&](const workloads::Op& op) { return op.name == name; });
  REQUIRE(it != w.ops.end());
  return static_cast<std::size_t>(it - w.ops.begin());
}
void erase(workloads::Workload& w, const std::string& name) {
  w.ops.erase(w.ops.begin() + static_cast<std::ptrdiff_t>(index_of(w, name)));
}

// The report of a broken lowering: not ok, and the row of `what` FAILED with a
// detail containing `why`.
void fails(const workloads::Workload& w, const std::string& what, const std::string& why) {
  const verify::Report r = verify::verify_training(w);
  const std::string text = verify::format_training_report(r);
  INFO(text);
  CHECK_FALSE(r.ok());
  const auto row = std::find_if(r.ops.begin(), r.ops.end(), [&](const verify::OpCheck& c) { return c.op == what; });
  REQUIRE(row != r.ops.end());
  CHECK(row->status == "FAILED");
  CHECK(row->detail.find(why) != std::string::npos);
  CHECK(text.find("verification FAILED") != std::string::npos);
}

}  // namespace

TEST_CASE("Verify training: the reference layer's gradients are its derivatives", "[verify][training]") {
  for (const bool gated : {true, false})
    for (const bool causal : {true, false}) {
      workloads::ModelSpec m;
      m.d_model = 8, m.heads = 4, m.kv_heads = 2, m.head_dim = 2, m.ffn = 12, m.seq_len = 4, m.gated = gated;
      INFO("gated " << gated << " causal " << causal);
      CHECK(verify::detail::reference_gradient_error(m, 2, causal) < 1e-6);
    }
}

TEST_CASE("Verify training: tensor parallelism without and with sequence parallelism", "[verify][training]") {
  CHECK(passes(step(R"({"T": 2})", R"({"tensor": ["T"]})", 1)));
  CHECK(passes(step(R"({"T": 2})", R"({"tensor": ["T"]})", 2, {2, false, 2})));
  CHECK(passes(step(R"({"T": 2})", R"({"tensor": ["T"], "sequence_parallel": true})", 1)));
  CHECK(passes(step(R"({"T": 2})", R"({"tensor": ["T"], "sequence_parallel": true})", 2, {1, false, 2})));
  CHECK(passes(step(R"({"T": 2})", R"({"tensor": ["T"], "sequence_parallel": true})", 1, {}, R"(, "causal": false)")));
  // MHA over 4 chips: every chip one KV head.
  const std::string mha = R"({"hardware": "tpu-v5p", "mesh": {"T": 4}, "training": {
    "model": {"layers": 1, "d_model": 16, "heads": 4, "ffn": 32, "vocab": 8, "seq_len": 8},
    "global_batch": 1, "parallelism": {"tensor": ["T"], "sequence_parallel": true}}})";
  CHECK(passes(workloads::parse_workload(mha, "t.json")));
}

TEST_CASE("Verify training: FSDP, data x tensor, sharded optimizer", "[verify][training]") {
  CHECK(passes(step(R"({"F": 2})", R"({"fsdp": ["F"]})", 2)));
  CHECK(passes(step(R"({"F": 2})", R"({"fsdp": ["F"]})", 2, {2, false}, R"(, "overlap": {"fsdp_prefetch": false})")));
  CHECK(passes(step(R"({"D": 2, "T": 2})", R"({"data": ["D"], "tensor": ["T"]})", 2)));
  CHECK(passes(step(R"({"D": 2, "T": 2})", R"({"data": ["D"], "tensor": ["T"], "sequence_parallel": true})", 2,
                    {2, false}, R"(, "overlap": {"gradient_reduction": false})")));
  CHECK(passes(step(R"({"D": 2, "F": 2})", R"({"data": ["D"], "fsdp": ["F"], "sharded_optimizer": true})", 4)));
  CHECK(passes(step(R"({"F": 2, "T": 2})", R"({"fsdp": ["F"], "tensor": ["T"], "sequence_parallel": true})", 2)));
  // Tensor parallelism over two mesh axes (either order), FSDP over a third.
  for (const char* axes : {R"(["X", "Y"])", R"(["Y", "X"])"}) {
    const std::string model = R"({"layers": 2, "d_model": 16, "heads": 4, "ffn": 32, "vocab": 8, "seq_len": 8})";
    const std::string text = R"({"hardware": "tpu-v5p", "mesh": {"X": 2, "Y": 2, "Z": 2}, "training": {"model": )" +
                             model + R"(, "global_batch": 2, "recompute": "selective", "parallelism": {"tensor": )" +
                             axes + R"(, "fsdp": ["Z"], "sequence_parallel": true}}})";
    INFO(axes);
    CHECK(passes(workloads::parse_workload(text, "t.json")));
  }
}

TEST_CASE("Verify training: mesh axes over part of a DGX node (Megatron's rank order) or of a torus axis",
          "[verify][training]") {
  // T = GPUs {0, 1}, ...; P the next factor of 2 in the node; D the rest of the
  // node and both nodes (GPUs 0, 4, 8, 12).
  const std::string model =
      R"({"layers": 2, "d_model": 16, "heads": 4, "kv_heads": 4, "ffn": 32, "vocab": 8, "seq_len": 8, "gated": true})";
  for (const char* mesh : {R"({"T": 2, "P": 2, "D": 4})", R"({"T": 4, "D": 4})"}) {
    INFO(mesh);
    const std::string pipeline = std::string(mesh).find('P') != std::string::npos ? R"(, "pipeline": "P")" : "";
    const std::string text = R"({"hardware": "h100-dgx", "topology": {"nodes": 2}, "mesh": )" + std::string(mesh) +
                             R"(, "training": {"model": )" + model +
                             R"(, "global_batch": 16, "parallelism": {"tensor": ["T"], "sequence_parallel": true, )"
                             R"("data": ["D"], "sharded_optimizer": true)" +
                             pipeline + "}}}";
    CHECK(passes(workloads::parse_workload(text, "t.json")));
  }
  // A TPU torus axis split between mesh axes (T = x:2, P = x:2@2, F = the rest).
  const std::string tpu = R"({"hardware": "tpu-v5p", "topology": {"shape": [8, 2, 2]}, "mesh": {"T": 2, "P": 2, "F": 8},
      "training": {"model": )" +
                          model +
                          R"(, "global_batch": 16, "parallelism": {"tensor": ["T"], "sequence_parallel": true,
      "pipeline": "P", "fsdp": ["F"]}}})";
  CHECK(passes(workloads::parse_workload(tpu, "t.json")));
}

TEST_CASE("Verify training: pipelines (1F1B, GPipe, interleaved) pass both layers through the sends",
          "[verify][training]") {
  CHECK(passes(step(R"({"P": 2})", R"({"pipeline": "P"})", 2, {2, true})));
  CHECK(passes(step(R"({"P": 2})", R"({"pipeline": "P", "schedule": "gpipe"})", 2, {2, false})));
  CHECK(passes(
      step(R"({"P": 2, "T": 2})", R"({"pipeline": "P", "tensor": ["T"], "sequence_parallel": true})", 2, {2, true})));
  CHECK(passes(
      step(R"({"P": 2})", R"({"pipeline": "P", "schedule": "interleaved", "virtual_stages": 2})", 2, {4, true})));
  CHECK(passes(step(R"({"P": 2, "D": 2})", R"({"pipeline": "P", "data": ["D"]})", 4, {4, false})));
  // Uneven stages: 1 and 3 layers, and the default split of 5 over 2 stages of 2 chunks.
  CHECK(passes(step(R"({"P": 2})", R"({"pipeline": "P", "stage_layers": [1, 3]})", 2, {4, true})));
  CHECK(passes(
      step(R"({"P": 2})", R"({"pipeline": "P", "schedule": "interleaved", "virtual_stages": 2})", 2, {5, true})));
}

TEST_CASE("Verify training: full and selective recompute", "[verify][training]") {
  CHECK(passes(step(R"({"T": 2})", R"({"tensor": ["T"]})", 1, {2, true}, R"(, "recompute": "full")")));
  CHECK(passes(step(R"({"T": 2})", R"({"tensor": ["T"], "sequence_parallel": true})", 1, {1, false},
                    R"(, "recompute": "full")")));
  CHECK(passes(step(R"({"F": 2})", R"({"fsdp": ["F"]})", 2, {1, true}, R"(, "recompute": "full")")));
  CHECK(passes(step(R"({"T": 2})", R"({"tensor": ["T"]})", 1, {1, true}, R"(, "recompute": "selective")")));
}

TEST_CASE("Verify training: a lowering broken on purpose fails", "[verify][training]") {
  SECTION("a tensor-parallel all-reduce dropped") {
    workloads::Workload w = step(R"({"T": 2})", R"({"tensor": ["T"]})", 1);
    erase(w, "F0.L0.out.reduce");
    fails(w, "F0.L0.add_ln2", "partial sums over the tensor-parallel group");
  }
  SECTION("a matmul's n changed") {
    workloads::Workload w = step(R"({"T": 2})", R"({"tensor": ["T"]})", 1);
    w.ops[index_of(w, "F0.L0.up")].matmul().n *= 2;
    fails(w, "F0.L0.up", "the op has m=8 k=16 n=64");
  }
  SECTION("an attention product's batch changed") {
    workloads::Workload w = step(R"({"T": 2})", R"({"tensor": ["T"]})", 1);
    w.ops[index_of(w, "B0.L0.qk.dk")].matmul().batch = 4;
    fails(w, "B0.L0.qk.dk", "batch=2, the op has");
  }
  SECTION("sequence parallelism: the backward's gather of the norm output dropped") {
    workloads::Workload w = step(R"({"T": 2})", R"({"tensor": ["T"], "sequence_parallel": true})", 1);
    erase(w, "B0.L0.ag1.again");
    fails(w, "B0.L0.qkv.dw", "cover different tokens");
  }
  SECTION("sequence parallelism: the norm gains' all-reduce dropped") {
    workloads::Workload w = step(R"({"T": 2})", R"({"tensor": ["T"], "sequence_parallel": true})", 1);
    erase(w, "B0.L0.norm_grads.reduce");
    fails(w, "L0 grad g_ln1", "partial sums over the tensor-parallel group's tokens");
    fails(w, "L0 grad g_ln2", "partial sums");
  }
  SECTION("a collective's size changed") {
    workloads::Workload w = step(R"({"T": 2})", R"({"tensor": ["T"], "sequence_parallel": true})", 1);
    w.ops[index_of(w, "F0.L0.ag2")].collective().bytes /= 2;
    fails(w, "F0.L0.ag2", "the op has 128 bytes");
  }
  SECTION("a tensor-parallel reduction over the wrong axis") {
    workloads::Workload w = step(R"({"D": 2, "T": 2})", R"({"data": ["D"], "tensor": ["T"]})", 2);
    workloads::Op& op = w.ops[index_of(w, "B0.L0.up.reduce")];
    op.collective().mesh_axes = {0};
    fails(w, "B0.L0.add_ln2.bwd", "partial sums over the tensor-parallel group");
  }
  SECTION("FSDP: the backward's weight gather dropped") {
    workloads::Workload w = step(R"({"F": 2})", R"({"fsdp": ["F"]})", 2);
    erase(w, "B0.L0.gather");
    fails(w, "B0.L0.down.dx", "no FSDP gather brought them");
  }
  SECTION("FSDP: the gradient reduce-scatter dropped") {
    workloads::Workload w = step(R"({"F": 2})", R"({"fsdp": ["F"]})", 2);
    erase(w, "B0.L0.reduce");
    fails(w, "L0 grad Wdown", "differs from the unsharded layer");
  }
  SECTION("data parallelism: the gradient all-reduce dropped") {
    workloads::Workload w = step(R"({"D": 2, "T": 2})", R"({"data": ["D"], "tensor": ["T"]})", 2);
    erase(w, "dp.L0");
    fails(w, "L0 grad Wqkv", "differs from the unsharded layer");
  }
  SECTION("a pipeline send dropped") {
    workloads::Workload w = step(R"({"P": 2})", R"({"pipeline": "P"})", 2, {2, true});
    erase(w, "F0.send.0to1");
    fails(w, "F0.L1.ln1", "no send delivered one");
    fails(w, "L1 output (forward)", "");
  }
  SECTION("a backward kernel missing") {
    workloads::Workload w = step(R"({"T": 2})", R"({"tensor": ["T"]})", 1);
    erase(w, "B0.L0.down.dw");
    fails(w, "L0 grad Wdown", "holds no dWdown");
  }
}

TEST_CASE("Verify training: too big or unmodelled steps are one clear error", "[verify][training]") {
  const auto error = [](const workloads::Workload& w) {
    try {
      verify::check_training_verifiable(w);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const workloads::Workload big = workloads::parse_workload(R"({"hardware": "tpu-v5p", "mesh": {"T": 4}, "training": {
    "model": {"layers": 2, "d_model": 1024, "heads": 8, "ffn": 4096, "vocab": 8, "seq_len": 1024},
    "global_batch": 1, "parallelism": {"tensor": ["T"]}}})",
                                                            "big.json");
  const std::string e = error(big);
  CHECK(e.starts_with("big.json:/training: --verify would hold about "));
  CHECK(e.find("shrink d_model, ffn, seq_len") != std::string::npos);
  CHECK_THROWS_AS(verify::verify_training(big), InputError);
  const workloads::Workload biases =
      workloads::parse_workload(R"({"hardware": "tpu-v5p", "mesh": {"T": 2}, "training": {
    "model": {"layers": 1, "d_model": 16, "heads": 4, "ffn": 32, "vocab": 8, "seq_len": 8, "biases": true},
    "global_batch": 1, "parallelism": {"tensor": ["T"]}}})",
                                "b.json");
  CHECK(error(biases) ==
        "b.json:/training: --verify executes bias-free layers (RMSNorm with a gain, as LLaMA's): give the model "
        "\"biases\": false, or run without --verify");
  CHECK(error(step(R"({"T": 2})", R"({"tensor": ["T"]})", 1)) == "no error");
}
