#pragma once
// The typed spec of a run, and the builder that turns it into a Workload.
//
// A workload is the system (hardware, topology, mesh) and what runs on it (a
// training step, or ops). Frontends read text into these structs (the JSON
// workload: workload.cpp, json_workload.hpp); the search's plans, a sweep's
// points (studies/), the importers' systems (imported.cpp) and calibration's
// measured points are made as these structs in memory. The builder functions
// below check everything that is not a matter of JSON types (sizes, limits,
// mesh against topology, the plan against the model) and lower the result;
// an error names the SourceRef of the value at fault, which is the JSON pointer
// the value has (or would have) in a workload file. Nothing here sees JSON.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/error.hpp"
#include "base/op_kind.hpp"
#include "workloads/training.hpp"
#include "workloads/workload.hpp"

namespace meshsim::workloads {

// A preset's hardware (topology/preset.hpp, topology/gpu_preset.hpp); null for
// an unknown name.
std::optional<Hardware> preset_hardware(std::string_view name);

// "topology": a TPU slice, or a GPU cluster's nodes. Absent (`given` false): a
// TPU slice shaped as the mesh, a GPU cluster of as many nodes as the mesh fills.
struct TopologySpec {
  bool given = false;
  SourceRef where;
  // TPU
  std::vector<int> shape;
  SourceRef shape_at;
  std::optional<std::vector<bool>> wraparound;  // one per axis; null: the preset's rule for the shape
  SourceRef wraparound_at;
  bool twisted = false;
  std::optional<SourceRef> twisted_at;  // given
  int slices = 1;
  std::optional<SourceRef> slices_at;   // given
  // GPU: the nodes, or their grid (first axis fastest)
  std::vector<int> nodes;
  bool node_grid = false;
  SourceRef nodes_at;
};

struct MeshAxisSpec {
  std::string name;
  int size = 1;
  SourceRef where;
};

struct MeshSpec {
  std::vector<MeshAxisSpec> axes;
  SourceRef where;
};

// Sets w's hardware, topology and mesh (mesh axes over consecutive hardware
// axes, docs/WORKLOAD.md); w.file names the workload in errors.
void build_system(Workload& w, Hardware hardware, const TopologySpec& topology, const MeshSpec& mesh);

// A strategy's mesh axes as written: one name (a string) or a list.
struct AxisRef {
  std::string name;
  SourceRef where;
};
struct StrategySpec {
  bool given = false;
  SourceRef where;
  std::vector<AxisRef> axes;
};

// The "training" section (docs/TRAINING.md) as written: the model is whole
// (a preset with its overrides), names of mesh axes are not yet resolved.
struct TrainingSpec {
  SourceRef where;
  ModelSpec model;
  SourceRef model_at;
  std::uint64_t global_batch = 0;         // sequences; or
  std::uint64_t global_batch_tokens = 0;  // tokens (a whole number of sequences)
  SourceRef batch_at;
  std::uint64_t microbatch = 1;
  std::string dtype = "bf16";
  std::uint64_t gradient_bytes = 2;
  bool causal = true;
  bool allow_oom = false;
  Recompute recompute = Recompute::None;
  Overlap overlap;
  std::optional<SourceRef> overlap_tensor_at;  // given
  struct Plan {
    bool given = false;  // "parallelism"
    SourceRef where;
    StrategySpec data, fsdp, tensor, expert, context, pipeline;
    bool sequence_parallel = false;
    std::optional<SourceRef> sequence_parallel_at;
    Schedule schedule = Schedule::OneFOneB;
    std::optional<SourceRef> schedule_at;
    std::uint64_t virtual_stages = 1;
    std::optional<SourceRef> virtual_stages_at;
    // Uneven stages: the layers of each model chunk in layer order (p x v
    // counts; p with one chunk a stage), or Megatron's layers of the first and
    // the last stage (0: not given), the others' split evenly.
    std::vector<std::uint64_t> stage_layers;
    std::optional<SourceRef> stage_layers_at;
    std::uint64_t first_stage_layers = 0, last_stage_layers = 0;
    std::optional<SourceRef> first_stage_layers_at, last_stage_layers_at;
    bool sharded_optimizer = false;
    std::optional<SourceRef> sharded_optimizer_at;
  } parallelism;
};

// Lowers one step of `spec` onto w's system (build_system first): w.training
// and w.ops. InputError when the plan does not fit the model or the mesh, or the
// step does not fit in HBM and allow_oom is off.
void build_training(Workload& w, const TrainingSpec& spec);
// build_training in two steps, for a caller that decides on the closed forms
// before the ops are lowered (the search prunes by memory): the step checked on
// w's system, with its closed forms (Training::formulas), and its limits
// checked (HBM unless allow_oom, the op count); then its ops appended to w.
Training plan_training(const Workload& w, const TrainingSpec& spec);
void add_training(Workload& w, Training t, const SourceRef& where);

// A name as written (an array, a mesh axis, an earlier op, a dtype) and where.
struct NameRef {
  std::string name;
  SourceRef where;
};

// "arrays": one array as declared (docs/WORKLOAD.md).
struct ArraySpec {
  std::string name;
  SourceRef where;  // the array's object
  struct Dim {
    std::string name;
    std::uint64_t size = 0;  // elements, 1 to 2^40
    SourceRef where;         // its size
  };
  std::vector<Dim> shape;  // in order
  SourceRef shape_at;
  NameRef dtype;
  std::optional<NameRef> sharding;  // "A[I_X, J]"; null: replicated
};

// A collective on a declared array or of `bytes` (V) over mesh axes.
struct CollectiveSpec {
  OpKind kind = OpKind::AllGather;  // all_gather, reduce_scatter, all_reduce or all_to_all
  std::vector<NameRef> axes;        // mesh axes
  SourceRef axes_at;
  std::optional<NameRef> array;             // one of array
  std::optional<std::uint64_t> bytes;       // or bytes
  SourceRef bytes_at;
  std::optional<NameRef> dim, out;          // with array: the dim scattered to, the result's name
  std::optional<NameRef> algorithm, protocol;
};

// Bytes from one chip to another (hardware coordinates).
struct SendSpec {
  std::uint64_t bytes = 0;
  SourceRef bytes_at;
  struct Chip {
    std::vector<std::int64_t> coordinates;
    std::vector<SourceRef> coordinate_at;
    SourceRef where;
  } from, to;
};

// C = A . B of two declared 2-D arrays, optionally resharded to `out_sharding`.
struct MatmulOpSpec {
  NameRef a, b, out;
  std::optional<NameRef> out_sharding;
};

// `repeat` MLP blocks y = (x . w1) . w2, each mapping x back to its layout.
struct MlpSpec {
  NameRef x, w1, w2, out;
  std::optional<NameRef> variant;  // column_row (default) or gather_middle
  std::int64_t repeat = 1;         // 1 to 1000
  SourceRef repeat_at;
};

// One op as written: its name (absent: "<kind>#<index>"), the earlier ops it
// waits for, and what it is.
struct OpSpec {
  SourceRef where;
  std::optional<NameRef> name;
  std::vector<NameRef> after;
  std::variant<CollectiveSpec, SendSpec, MatmulOpSpec, MlpSpec> what;
};

// A workload written as ops: its arrays, then its ops in order.
struct OpsSpec {
  std::vector<ArraySpec> arrays;
  std::vector<OpSpec> ops;
  SourceRef ops_at;
};

// Lowers `spec` onto w's system (build_system first): w.arrays, w.declared,
// w.ops and the matmuls' explanations. InputError names the SourceRef of the
// value at fault.
void build_ops(Workload& w, const OpsSpec& spec);

// A whole workload as written: its system, then a training step or ops.
struct WorkloadSpec {
  std::string file;    // names the workload in errors
  Hardware hardware;   // the preset with the values written over it
  TopologySpec topology;
  MeshSpec mesh;
  std::optional<TrainingSpec> training;
  OpsSpec ops;  // when there is no training step
};

// build_system, then build_training or build_ops, and the time limits checked.
Workload build_workload(const WorkloadSpec& spec);

// A preset by name, or an InputError at `preset.where` listing the known ones.
Hardware resolve_preset(const NameRef& preset);

// What a sweep point changes in a workload of ops (studies/sweep.hpp).
struct WorkloadEdits {
  std::string preset;                  // "": as written (read by the frontend, which resolves presets)
  std::vector<int> mesh;               // the mesh axes' sizes; empty: as written. The topology then
                                       // follows the mesh (as when it is not given).
  std::string algorithm;               // "": as written; "auto": none (NCCL's or the default choice)
  std::optional<std::uint64_t> bytes;  // every op written with "bytes"
};
// Whether a sweep's --algorithm NAME is set on an op of this kind: ring (GPU)
// and the torus schedules balanced and equal on all-gathers, reduce-scatters
// and all-reduces; tree, nvls, nvls_tree and hierarchical on all-reduces;
// direct on all-to-alls and all-reduces; auto on every collective.
bool algorithm_fits(std::string_view algorithm, OpKind kind);
// The mesh, algorithm and bytes of `edits` put into `spec` (a value's
// SourceRef is where it would be written in the file). The mesh must have as
// many axes as spec's.
void apply_edits(WorkloadSpec& spec, const WorkloadEdits& edits);

// A collective of `bytes` (V, docs/WORKLOAD.md) over mesh axes by name, on
// every chip, independent of the ops so far (as a bytes-only op of a JSON
// workload); named "<kind>#<index>"; `where` is the op, its "axes" for an
// unknown axis.
void add_collective(Workload& w, OpKind kind, std::uint64_t bytes, const std::vector<std::string>& axes,
                    const SourceRef& where);

}  // namespace meshsim::workloads
