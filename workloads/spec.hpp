#pragma once
// The typed spec of a run, and the builder that turns it into a Workload.
//
// A workload is the system (hardware, topology, mesh) and what runs on it (a
// training step, or ops). Frontends read text into these structs: the JSON
// workload (workload.cpp), a search spec and its plans (search/), the importers'
// systems (imported.cpp), calibration's measured points. The builder functions
// below check everything that is not a matter of JSON types (sizes, limits,
// mesh against topology, the plan against the model) and lower the result;
// an error names the SourceRef of the value at fault, which is the JSON pointer
// the value has (or would have) in a workload file. Nothing here sees JSON.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
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

// A collective of `bytes` (V, docs/WORKLOAD.md) over mesh axes by name, on
// every chip, independent of the ops so far (as a bytes-only op of a JSON
// workload); named "<kind>#<index>"; `where` is the op, its "axes" for an
// unknown axis.
void add_collective(Workload& w, OpKind kind, std::uint64_t bytes, const std::vector<std::string>& axes,
                    const SourceRef& where);

}  // namespace meshsim::workloads
