// The builder (workloads/spec.hpp): a spec built in memory gives the workload
// its JSON form parses to, field by field, and a spec no JSON could express (a
// mesh axis twice, a size of 0) is one error at the value's pointer.
#include <catch2/catch.hpp>

#include <functional>
#include <string>

#include "base/error.hpp"
#include "workloads/imported.hpp"
#include "workloads/spec.hpp"
#include "workloads/workload.hpp"
#include "unit/workloads/digest.hpp"

using namespace meshsim;
using namespace meshsim::workloads;
using meshsim::test::workload_digest;

namespace {

const SourceRef kRoot{"w.json", ""};

MeshSpec mesh_of(std::initializer_list<std::pair<const char*, int>> axes) {
  MeshSpec m;
  m.where = kRoot.child("mesh");
  for (const auto& [name, size] : axes) m.axes.push_back({name, size, m.where.child(name)});
  return m;
}

TopologySpec tpu_slice(std::vector<int> shape) {
  TopologySpec t;
  t.given = true;
  t.where = kRoot.child("topology");
  t.shape = std::move(shape);
  t.shape_at = t.where.child("shape");
  return t;
}

TopologySpec gpu_nodes(std::vector<int> nodes) {
  TopologySpec t;
  t.given = true;
  t.where = kRoot.child("topology");
  t.node_grid = nodes.size() > 1;
  t.nodes = std::move(nodes);
  t.nodes_at = t.where.child("nodes");
  return t;
}

StrategySpec strategy(const SourceRef& plan, const char* name, std::vector<std::string> axes) {
  StrategySpec s;
  s.given = true;
  s.where = plan.child(name);
  for (std::size_t i = 0; i < axes.size(); ++i) s.axes.push_back({axes[i], s.where.child(i)});
  return s;
}

// LLaMA-3-8B-like, small enough to lower in milliseconds.
TrainingSpec small_step() {
  TrainingSpec t;
  t.where = kRoot.child("training");
  t.model_at = t.where.child("model");
  t.model.name = "custom";
  t.model.layers = 4, t.model.d_model = 512, t.model.heads = 8, t.model.kv_heads = 8, t.model.head_dim = 64;
  t.model.ffn = 2048, t.model.vocab = 2048, t.model.seq_len = 512;
  t.global_batch = 32;
  t.batch_at = t.where.child("global_batch");
  return t;
}

constexpr const char* kModel =
    R"("model": {"layers": 4, "d_model": 512, "heads": 8, "ffn": 2048, "vocab": 2048, "seq_len": 512})";

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("builder: a training step built in memory is the one its JSON gives", "[spec]") {
  SECTION("TPU: FSDP x TP with sequence parallelism and collective matmuls") {
    Workload built;
    built.file = "w.json";
    build_system(built, *preset_hardware("tpu-v5e"), tpu_slice({4, 4}), mesh_of({{"F", 4}, {"T", 4}}));
    TrainingSpec t = small_step();
    auto& p = t.parallelism;
    p.given = true;
    p.where = t.where.child("parallelism");
    p.fsdp = strategy(p.where, "fsdp", {"F"});
    p.tensor = strategy(p.where, "tensor", {"T"});
    p.sequence_parallel = true;
    t.overlap.tensor = true;
    build_training(built, t);
    const Workload parsed = parse_workload(
        std::string(R"({"hardware": "tpu-v5e", "topology": {"shape": [4, 4]}, "mesh": {"F": 4, "T": 4},
          "training": {)") + kModel + R"(, "global_batch": 32, "overlap": {"tensor": true},
          "parallelism": {"fsdp": ["F"], "tensor": ["T"], "sequence_parallel": true}}})",
        "w.json");
    CHECK(built.ops.size() == parsed.ops.size());
    CHECK(workload_digest(built) == workload_digest(parsed));
  }
  SECTION("GPU: a pipeline over a grid of nodes, interleaved") {
    Workload built;
    built.file = "w.json";
    build_system(built, *preset_hardware("h100-dgx"), gpu_nodes({2, 2}), mesh_of({{"T", 8}, {"P", 2}, {"D", 2}}));
    TrainingSpec t = small_step();
    auto& p = t.parallelism;
    p.given = true;
    p.where = t.where.child("parallelism");
    p.tensor = strategy(p.where, "tensor", {"T"});
    p.pipeline = strategy(p.where, "pipeline", {"P"});
    p.data = strategy(p.where, "data", {"D"});
    p.schedule = Schedule::Interleaved;
    p.schedule_at = p.where.child("schedule");
    p.virtual_stages = 2;
    p.virtual_stages_at = p.where.child("virtual_stages");
    p.sharded_optimizer = true;
    build_training(built, t);
    const Workload parsed = parse_workload(
        std::string(R"({"hardware": "h100-dgx", "topology": {"nodes": [2, 2]}, "mesh": {"T": 8, "P": 2, "D": 2},
          "training": {)") + kModel + R"(, "global_batch": 32,
          "parallelism": {"tensor": ["T"], "pipeline": "P", "data": ["D"], "schedule": "interleaved",
                          "virtual_stages": 2, "sharded_optimizer": true}}})",
        "w.json");
    CHECK(workload_digest(built) == workload_digest(parsed));
  }
}

TEST_CASE("builder: a collective by bytes is the JSON's bytes-only op", "[spec]") {
  Workload built;
  built.file = "w.json";
  build_system(built, *preset_hardware("tpu-v5p"), tpu_slice({4, 4, 8}), mesh_of({{"x", 4}, {"y", 4}, {"z", 8}}));
  add_collective(built, OpKind::AllReduce, 1 << 20, {"x", "z"}, kRoot.child("ops").child(std::size_t{0}));
  add_collective(built, OpKind::AllGather, 4096, {"y"}, kRoot.child("ops").child(std::size_t{1}));
  const Workload parsed = parse_workload(
      R"({"hardware": "tpu-v5p", "topology": {"shape": [4, 4, 8]}, "mesh": {"x": 4, "y": 4, "z": 8},
          "ops": [{"kind": "all_reduce", "bytes": 1048576, "axes": ["x", "z"]},
                  {"kind": "all_gather", "bytes": 4096, "axes": ["y"]}]})",
      "w.json");
  CHECK(workload_digest(built) == workload_digest(parsed));
}

TEST_CASE("builder: an imported program's system is the one the workload JSON gives", "[spec]") {
  // What empty_workload built by writing and parsing JSON before the builder.
  const Workload tpu = empty_workload({"tpu-v4", {4, 4, 8}, {1, 0, 1}}, false, "test");
  Workload parsed = parse_workload(R"({"hardware": "tpu-v4", "topology": {"shape": [4, 4, 8],
    "wraparound": [true, false, true]}, "mesh": {"X": 4, "Y": 4, "Z": 8},
    "ops": [{"kind": "all_reduce", "bytes": 1, "axes": ["X"]}]})", "--topology");
  parsed.ops.clear();
  CHECK(workload_digest(tpu) == workload_digest(parsed));
  const Workload gpu = empty_workload({"h100-dgx", {2, 3}, {}}, true, "test");
  parsed = parse_workload(R"({"hardware": "h100-dgx", "topology": {"nodes": [2, 3]},
    "mesh": {"G": 8, "N0": 2, "N1": 3}, "ops": [{"kind": "all_reduce", "bytes": 1, "axes": ["G"]}]})", "--topology");
  parsed.ops.clear();
  CHECK(workload_digest(gpu) == workload_digest(parsed));
  CHECK(error_of([] { empty_workload({"tpu-v5e", {4, 5000}, {}}, false, "test"); }) ==
        "--topology:/topology/shape/1: expected an integer in [1, 4096], got 5000");
}

TEST_CASE("builder: what no JSON can say is refused at the value's pointer", "[spec]") {
  const auto system = [](MeshSpec mesh, TopologySpec topo, const char* hw = "tpu-v5e") {
    return error_of([&] {
      Workload w;
      w.file = "w.json";
      build_system(w, *preset_hardware(hw), topo, mesh);
    });
  };
  MeshSpec twice = mesh_of({{"X", 4}, {"X", 4}});
  CHECK(system(twice, tpu_slice({4, 4})) == "w.json:/mesh/X: mesh axis X is given twice");
  CHECK(system(mesh_of({{"X", 0}}), tpu_slice({4})) == "w.json:/mesh/X: expected an integer in [1, 262144], got 0");
  CHECK(system(mesh_of({{"9X", 4}}), tpu_slice({4})) ==
        "w.json:/mesh/9X: mesh axis name '9X' must be a letter followed by letters or digits");
  CHECK(system(mesh_of({{"X", 4}}), tpu_slice({4, 0})) == "w.json:/topology/shape/1: expected an integer in [1, 4096], got 0");
  CHECK(system(mesh_of({}), tpu_slice({4})) == "w.json:/mesh: expected at least one mesh axis, e.g. {\"X\": 16}");
  CHECK(system(mesh_of({{"G", 8}}), gpu_nodes({}), "h100-dgx") ==
        "w.json:/topology/nodes: expected one number of nodes (or a list: a grid of nodes), got 0 numbers");
  TopologySpec empty_grid = gpu_nodes({});
  empty_grid.node_grid = true;
  CHECK(system(mesh_of({{"G", 8}}), empty_grid, "h100-dgx") ==
        "w.json:/topology/nodes: expected 1 to 3 node axes (the nodes as a grid, first axis fastest), got 0");
  TopologySpec wrap = tpu_slice({4, 4});
  wrap.wraparound = std::vector<bool>{true};
  wrap.wraparound_at = wrap.where.child("wraparound");
  CHECK(system(mesh_of({{"X", 16}}), wrap) ==
        "w.json:/topology/wraparound: expected 2 values (one per axis of the shape), got 1");

  const auto step = [](const TrainingSpec& t) {
    return error_of([&] {
      Workload w;
      w.file = "w.json";
      build_system(w, *preset_hardware("tpu-v5e"), tpu_slice({4, 4}), mesh_of({{"X", 4}, {"Y", 4}}));
      build_training(w, t);
    });
  };
  TrainingSpec two_stage_axes = small_step();
  two_stage_axes.parallelism.given = true;
  two_stage_axes.parallelism.where = two_stage_axes.where.child("parallelism");
  two_stage_axes.parallelism.pipeline = strategy(two_stage_axes.parallelism.where, "pipeline", {"X", "Y"});
  CHECK(step(two_stage_axes) == "w.json:/training/parallelism/pipeline: expected one mesh axis name (a string)");
  TrainingSpec unknown = small_step();
  unknown.parallelism.given = true;
  unknown.parallelism.where = unknown.where.child("parallelism");
  unknown.parallelism.fsdp = strategy(unknown.parallelism.where, "fsdp", {"X", "Z"});
  CHECK(step(unknown) == "w.json:/training/parallelism/fsdp/1: unknown mesh axis 'Z' (mesh axes: X, Y)");
  TrainingSpec no_heads = small_step();
  no_heads.model.heads = 0;
  CHECK(step(no_heads) == "w.json:/training/model: every dimension of the model is a positive integer");
  TrainingSpec no_batch = small_step();
  no_batch.global_batch = 0;
  CHECK(step(no_batch) == "w.json:/training/global_batch: expected a positive integer, got 0");
  TrainingSpec fp32 = small_step();
  fp32.dtype = "fp32";
  CHECK(step(fp32) == "w.json:/training/dtype: training dtype 'fp32': expected bf16 or fp16");

  Workload w;
  w.file = "w.json";
  build_system(w, *preset_hardware("tpu-v5e"), tpu_slice({4, 4}), mesh_of({{"X", 4}, {"Y", 4}}));
  CHECK(error_of([&] { add_collective(w, OpKind::AllGather, 1024, {"Y", "Q"}, kRoot.child("ops").child(std::size_t{0})); }) ==
        "w.json:/ops/0/axes/1: unknown mesh axis 'Q' (mesh axes: X, Y)");
  CHECK(error_of([&] { add_collective(w, OpKind::AllGather, 0, {"Y"}, kRoot.child("ops").child(std::size_t{0})); }) ==
        "w.json:/ops/0/bytes: expected a positive integer, got 0");
  CHECK(error_of([&] { add_collective(w, OpKind::AllGather, ~std::uint64_t{0}, {"Y"}, kRoot.child("ops").child(std::size_t{0})); }) ==
        "w.json:/ops/0/bytes: 18446744073709551615 is too large (at most 4611686018427387904)");
}

namespace {

NameRef named(const std::string& name, const SourceRef& where) { return {name, where}; }

ArraySpec array_spec(const char* name, std::vector<std::pair<const char*, std::uint64_t>> shape, const char* dtype,
                     const char* sharding) {
  ArraySpec a;
  a.name = name;
  a.where = kRoot.child("arrays").child(name);
  a.shape_at = a.where.child("shape");
  for (const auto& [dim, size] : shape) a.shape.push_back({dim, size, a.shape_at.child(dim)});
  a.dtype = named(dtype, a.where.child("dtype"));
  if (sharding) a.sharding = named(sharding, a.where.child("sharding"));
  return a;
}

OpSpec op_at(std::size_t index, const char* name = nullptr) {
  OpSpec op;
  op.where = kRoot.child("ops").child(index);
  if (name) op.name = named(name, op.where.child("name"));
  return op;
}

// The arrays and ops of the JSON below, built in memory.
OpsSpec four_kinds() {
  OpsSpec s;
  s.ops_at = kRoot.child("ops");
  s.arrays.push_back(array_spec("A", {{"I", 1024}, {"J", 2048}}, "bf16", "A[I_X, J_Y]"));
  s.arrays.push_back(array_spec("B", {{"J", 2048}, {"K", 512}}, "bf16", "B[J_Y, K]"));
  s.arrays.push_back(array_spec("W1", {{"J", 2048}, {"F", 4096}}, "bf16", "W1[J, F_Y]"));
  s.arrays.push_back(array_spec("W2", {{"F", 4096}, {"J", 2048}}, "bf16", "W2[F_Y, J]"));
  OpSpec mm = op_at(0, "mm");
  mm.what = MatmulOpSpec{named("A", mm.where.child("a")), named("B", mm.where.child("b")),
                         named("C", mm.where.child("out")), named("C[I_X, K]", mm.where.child("out_sharding"))};
  s.ops.push_back(mm);
  OpSpec gather = op_at(1);
  CollectiveSpec c;
  c.kind = OpKind::AllGather;
  c.axes_at = gather.where.child("axes");
  c.axes = {named("X", c.axes_at.child(std::size_t{0}))};
  c.array = named("C", gather.where.child("array"));
  c.out = named("Cfull", gather.where.child("out"));
  gather.what = c;
  gather.after = {named("mm", gather.where.child("after").child(std::size_t{0}))};
  s.ops.push_back(gather);
  OpSpec mlp = op_at(2, "layer");
  MlpSpec m;
  m.x = named("A", mlp.where.child("x"));
  m.w1 = named("W1", mlp.where.child("w1"));
  m.w2 = named("W2", mlp.where.child("w2"));
  m.out = named("Y", mlp.where.child("out"));
  m.repeat = 2;
  m.repeat_at = mlp.where.child("repeat");
  mlp.what = m;
  s.ops.push_back(mlp);
  OpSpec send = op_at(3);
  SendSpec p;
  p.bytes = 65536;
  p.bytes_at = send.where.child("bytes");
  p.from.where = send.where.child("from");
  p.from.coordinates = {0, 0};
  p.from.coordinate_at = {p.from.where.child(std::size_t{0}), p.from.where.child(std::size_t{1})};
  p.to.where = send.where.child("to");
  p.to.coordinates = {3, 1};
  p.to.coordinate_at = {p.to.where.child(std::size_t{0}), p.to.where.child(std::size_t{1})};
  send.what = p;
  s.ops.push_back(send);
  return s;
}

constexpr const char* kFourKinds = R"({"hardware": "tpu-v5e", "topology": {"shape": [4, 4]}, "mesh": {"X": 4, "Y": 4},
  "arrays": {"A": {"shape": {"I": 1024, "J": 2048}, "dtype": "bf16", "sharding": "A[I_X, J_Y]"},
             "B": {"shape": {"J": 2048, "K": 512}, "dtype": "bf16", "sharding": "B[J_Y, K]"},
             "W1": {"shape": {"J": 2048, "F": 4096}, "dtype": "bf16", "sharding": "W1[J, F_Y]"},
             "W2": {"shape": {"F": 4096, "J": 2048}, "dtype": "bf16", "sharding": "W2[F_Y, J]"}},
  "ops": [{"name": "mm", "kind": "matmul", "a": "A", "b": "B", "out": "C", "out_sharding": "C[I_X, K]"},
          {"kind": "all_gather", "axes": ["X"], "array": "C", "out": "Cfull", "after": ["mm"]},
          {"name": "layer", "kind": "mlp", "x": "A", "w1": "W1", "w2": "W2", "out": "Y", "repeat": 2},
          {"kind": "send", "bytes": 65536, "from": [0, 0], "to": [3, 1]}]})";

std::string ops_error(const OpsSpec& s) {
  return error_of([&] {
    Workload w;
    w.file = "w.json";
    build_system(w, *preset_hardware("tpu-v5e"), tpu_slice({4, 4}), mesh_of({{"X", 4}, {"Y", 4}}));
    build_ops(w, s);
  });
}

}  // namespace

TEST_CASE("builder: arrays and ops built in memory are the workload their JSON gives", "[spec]") {
  Workload built;
  built.file = "w.json";
  build_system(built, *preset_hardware("tpu-v5e"), tpu_slice({4, 4}), mesh_of({{"X", 4}, {"Y", 4}}));
  build_ops(built, four_kinds());
  const Workload parsed = parse_workload(kFourKinds, "w.json");
  CHECK(built.ops.size() > 4);  // the matmul and the MLP lower to several ops
  CHECK(workload_digest(built) == workload_digest(parsed));
}

TEST_CASE("builder: ops no JSON could write are refused at the value's pointer", "[spec]") {
  OpsSpec s = four_kinds();
  s.arrays.push_back(s.arrays[0]);
  CHECK(ops_error(s) == "w.json:/arrays/A: array 'A' already exists");
  s = four_kinds();
  s.arrays[1].shape[0].size = 0;
  CHECK(ops_error(s) == "w.json:/arrays/B/shape/J: expected a positive integer, got 0");
  s = four_kinds();
  std::get<MlpSpec>(s.ops[2].what).repeat = 0;
  CHECK(ops_error(s) == "w.json:/ops/2/repeat: expected an integer in [1, 1000], got 0");
  s = four_kinds();
  std::get<SendSpec>(s.ops[3].what).to.coordinates[1] = 4;
  CHECK(ops_error(s) == "w.json:/ops/3/to/1: expected an integer in [0, 3], got 4");
  s = four_kinds();
  std::get<SendSpec>(s.ops[3].what).bytes = 0;
  CHECK(ops_error(s) == "w.json:/ops/3/bytes: expected a positive integer, got 0");
  s = four_kinds();
  auto& gather = std::get<CollectiveSpec>(s.ops[1].what);
  gather.bytes = 1024;
  CHECK(ops_error(s) == "w.json:/ops/1: give exactly one of 'array' (a declared array) or 'bytes' (V, in bytes)");
  gather.bytes.reset();
  gather.kind = OpKind::ReduceScatter;
  CHECK(ops_error(s) == "w.json:/ops/1: missing required field 'dim'");
  s.ops.clear();
  CHECK(ops_error(s) == "w.json:/ops: expected at least one op");
  // An error is one line, whatever the names hold.
  s = four_kinds();
  s.arrays[0].dtype.name = "bf16\n";
  CHECK(ops_error(s) == "w.json:/arrays/A/dtype: unknown dtype 'bf16\\n' (known: bf16, fp16, fp32, int8, fp8, int32)");
}
