#pragma once
// A workload, parsed and validated: every name resolved, every size checked. The
// format is documented in docs/WORKLOAD.md. Nothing beyond this point sees JSON.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "base/op_kind.hpp"
#include "topology/fabric.hpp"
#include "topology/gpu_preset.hpp"
#include "topology/preset.hpp"
#include "topology/system.hpp"
#include "topology/torus.hpp"
#include "workloads/training.hpp"

namespace meshsim::workloads {

// A local matmul's time as calibrated on real hardware (meshsim run --calibration;
// the form is kernels/calibrated_matmul.hpp's), for one dtype.
struct CalibratedMatmul {
  std::string dtype;
  double launch_s = 0, flops_per_s = 0, wave_flops_per_s = 0, hbm_bytes_per_s = 0;
  int sms = 0;  // 0: no wave term
};

// The levels of a fabric that the calibration terms apply to (docs/CALIBRATION.md):
// a TPU's ICI links and data-center network links, a GPU node's NVLink and the
// network beyond it (NICs and the switches' cables).
enum class FabricLevel : std::uint8_t { Ici, Dcn, Nvlink, Nic };
inline constexpr int kFabricLevels = 4;
std::string_view level_name(FabricLevel level);
std::optional<FabricLevel> parse_level(std::string_view name);
// The op kinds a fixed cost applies to: the collectives and send, in OpKind order.
inline constexpr int kCommKinds = 5;

struct Hardware {
  std::string preset;
  bool gpu = false;        // a switched GPU fabric (gpu_* fields) instead of a TPU torus (ici)
  topology::ChipSpec chip;
  topology::LinkSpec ici;  // TPU: one-way bandwidth per link, per-hop latency
  topology::LinkSpec dcn;  // TPU multislice: each chip's link out to the data-center network and in from it
  std::uint64_t forward_chunk_bytes = 0;
  double matmul_efficiency = 1.0;  // achieved / peak FLOP rate of local matmuls (calibration sets it)
  std::vector<CalibratedMatmul> calibrated_matmuls;  // replace the roofline's compute term per dtype
  // GPU fabric (topology/fabric.hpp)
  int gpus_per_node = 0;
  topology::LinkSpec nvlink, nic, spine;
  int spines = 1;
  // Unless the workload sets the spine bandwidth (then one cable of that bandwidth
  // per leaf and spine), every leaf has one NIC-rate cable per node up to the
  // spines, ceil(nodes / spines) to each (full bisection, as in a DGX SuperPod).
  bool spine_full_bisection = true;
  // Three tiers (docs/MODEL.md, "GPU fabrics"): nodes under one rail leaf and under
  // one pod's spines (0: all), and each tier's down / up bandwidth (>= 1).
  int leaf_nodes = 0, pod_nodes = 0;
  double leaf_oversubscription = 1, spine_oversubscription = 1;
  // NVLink SHARP: the fraction of the NVLink rate NVLS traffic achieves; 0: none
  // (topology::FabricSpec::nvls_efficiency).
  double nvls_efficiency = 0;
  // What NCCL's cost model knows of the machine (its preset's, docs/HARDWARE.md):
  // the GPUs' CUDA compute capability (80 Ampere, 90 Hopper, 100 Blackwell) and
  // whether the hosts' CPUs are AMD's; they set the LL protocol's bandwidth cap.
  int compute_capability = 0;
  bool amd_cpu = false;

  // Calibration terms (docs/CALIBRATION.md); the defaults change nothing.
  // Each level's links deliver `link_efficiency` of their peak bandwidth: the
  // link specs above hold the achieved rate (apply_link_efficiency), `peak` the
  // datasheet's (or the workload's) one-way bandwidth per link.
  std::array<double, kFabricLevels> link_efficiency{1.0, 1.0, 1.0, 1.0};
  struct Peaks {
    std::uint64_t ici = 0, dcn = 0, nvlink = 0, nic = 0, spine = 0;
  } peak;
  // A fixed cost per collective (and send) on a level, by kind: launch and
  // synchronisation, paid on every chip before its first transfer.
  std::array<std::array<Tick, kCommKinds>, kFabricLevels> fixed_cost{};
  Tick fixed_cost_of(FabricLevel level, OpKind kind) const {
    return is_local(kind) ? kZeroTick : fixed_cost[static_cast<std::size_t>(level)][static_cast<std::size_t>(kind)];
  }
};

// Sets the link specs' bandwidths to peak x efficiency (rounded; at least 1 B/s).
void apply_link_efficiency(Hardware& hw);
// A level's link efficiency when nothing sets it: its preset's (NVLink: the
// payload rate of NCCL's model, topology/gpu_preset.hpp), else 1.
double preset_link_efficiency(const Hardware& hw, FabricLevel level);
// NCCL's cap on the LL protocol's bus bandwidth (llMaxBws) for `nodes` nodes
// of this hardware: inside one node, the rate a GPU's kernel passes LL lines on
// (topology::FabricSpec::ll_bytes_per_s, simulated); across nodes, what its
// cost model allows for the network's host path (the model's only).
double nccl_ll_max_bytes_per_s(const Hardware& hw, int nodes);

// A part of a hardware axis that a mesh axis takes: the chips whose coordinate
// on `hw` is stride * i + r (i < size) for each r, i.e. digit
// (coordinate / stride) % size; a whole axis is {hw, 1, its size}.
struct AxisFactor {
  int hw = 0;
  int stride = 1;
  int size = 1;
  auto operator<=>(const AxisFactor&) const = default;
};

struct MeshAxis {
  std::string name;
  int size = 1;
  std::vector<int> hw_axes;  // the consecutive hardware axes it spans (on a TPU, wholly or in part)
  // What it takes of them, first fastest: whole axes, or on a TPU a factor of
  // one (the inner part first: docs/WORKLOAD.md); the chip's coordinate on the
  // mesh axis is their digits in mixed radix.
  std::vector<AxisFactor> factors;
  // Every factor a whole hardware axis (else its collectives run over explicit
  // groups of chips, ring by factor).
  bool whole = true;
};

// The largest array (and matmul output) a workload may hold, in bytes.
inline constexpr std::uint64_t kMaxArrayBytes = std::uint64_t{1} << 62;

// An array and its layout: which mesh axes split each dimension (major first: a
// dim split on [X, Y] has |X|*|Y| blocks, chip (x, y) holding block x*|Y| + y),
// and over which mesh axes each chip holds only an unreduced partial sum.
struct Array {
  std::string name;
  std::vector<std::string> dims;
  std::vector<std::uint64_t> sizes;
  std::string dtype;
  std::uint64_t element_bytes = 0;
  std::vector<std::vector<int>> shard_axes;  // mesh axis indices per dim, major first
  std::vector<int> partial_axes;             // mesh axes over which the values are partial sums
  std::uint64_t bytes() const;               // global size
  int dim_index(const std::string& dim) const;  // -1 when absent
};

// The lowered program's ops: what every op has (its name, dependencies, the
// layouts it reads and writes, its chips, its place in a training step), and what
// only its kind has, in a variant (Op::body) that the accessors check against
// Op::kind. An op is made for its kind (Op{OpKind::Matmul}); a collective may
// change into another collective (the body is the same), nothing else may.

// AllGather, ReduceScatter, AllReduce, AllToAll.
struct CollectiveOp {
  std::vector<int> mesh_axes;  // the mesh axes, as written
  std::vector<int> hw_axes;    // the hardware axes they span (size > 1 only)
  std::uint64_t bytes = 0;     // V (see docs/WORKLOAD.md)
  std::string algorithm;       // GPU: the algorithm asked for ("" = fastest)
  std::string protocol;        // GPU: NCCL's protocol asked for ("" = as NCCL's model picks)
  // Explicit groups of chips that are not the chips along a set of axes (an
  // imported program's replica groups): each group in ring order, disjoint, all
  // of one size; the op's `chips` is their union and mesh_axes and hw_axes are
  // empty (collectives::group_collective). Null: the groups are the chips along
  // hw_axes. Torus only.
  std::shared_ptr<const std::vector<std::vector<topology::ChipId>>> groups;
  // Groups over mesh axes that take part of a torus axis (MeshAxis::factors):
  // each group is the product of rings of these sizes, its members listed in
  // mixed radix over them (first fastest), and the collective runs a phase per
  // factor (collectives::group_collective); mesh_axes are kept. Empty: each
  // group is one ring.
  std::vector<int> factors;
};

// A point-to-point transfer: the one pair src -> dst, or several pairs at once,
// each sending `bytes` (a pipeline stage passing its activations to the next,
// every chip to its counterpart).
struct SendOp {
  std::uint64_t bytes = 0;  // the payload of each pair
  topology::ChipId src = 0, dst = 0;
  std::vector<std::pair<topology::ChipId, topology::ChipId>> pairs;  // empty: src -> dst
};

// Local shapes C[m, n] = A[m, k] . B[k, n] on every chip, `batch` independent
// products of that shape (attention's per-head products).
struct MatmulOp {
  std::uint64_t m = 0, k = 0, n = 0;
  std::uint64_t batch = 1;
  std::string dtype;  // without arrays (training steps): the element type
  // An fp32 matmul a TPU's MXU runs as bf16 passes (XLA's precision for f32
  // operands: DEFAULT one pass, HIGH three, HIGHEST six; JAX's "Matmul
  // precision" docs, XLA's BF16_BF16_F32_X3/X6 dot algorithms): the chip's bf16
  // rate over this many passes. 0: the dtype's own rate.
  std::uint32_t bf16_passes = 0;
};

// A memory-bound kernel (a norm, an activation, a softmax, a residual add, the
// optimizer update): the HBM bytes it reads and writes per chip; its time is those
// bytes over the HBM bandwidth. An imported kernel (a Chakra COMP node) also has
// its operations (at the chip's bf16 rate: the roofline of both) or its measured
// time, used as is when not zero.
struct ElementwiseOp {
  std::uint64_t hbm_bytes = 0;
  std::uint64_t flops = 0;
  Tick duration;
  std::string dtype;  // without arrays (training steps): the element type
};

struct Op {
  Op() = default;  // an all-gather
  explicit Op(OpKind k);

  std::string name;
  std::string pointer;  // JSON pointer of the op, for errors found later
  OpKind kind = OpKind::AllGather;
  std::vector<std::uint32_t> deps;  // earlier ops this one waits for
  std::string sharding_before, sharding_after;
  std::string group;  // the workload op it was lowered from (a matmul's steps share it)

  // What the op does to data (empty for bytes-only ops): the layouts it reads
  // (a matmul reads A and B, after free local slicing) and the layout it writes.
  // The numerical verifier (verify/) executes ops from these.
  std::vector<Array> inputs;
  std::vector<Array> outputs;  // zero or one

  // The chips the op runs on, ascending; null: every chip. A collective's set is
  // a union of whole groups over its axes; a send's holds its sources and
  // destinations. Ops parsed from JSON run on every chip.
  std::shared_ptr<const std::vector<topology::ChipId>> chips;

  // A training step's op: where it sits in the step (Part::None for the others).
  StepSite site;

  std::variant<CollectiveOp, SendOp, MatmulOp, ElementwiseOp> body;

  // The body of this op's kind; asking for another kind's is a bug (asserted).
  CollectiveOp& collective();
  const CollectiveOp& collective() const;
  SendOp& send();
  const SendOp& send() const;
  MatmulOp& matmul();
  const MatmulOp& matmul() const;
  ElementwiseOp& elementwise();
  const ElementwiseOp& elementwise() const;
  // What a collective or a send moves: V, or each pair's payload; 0 for local ops.
  std::uint64_t comm_bytes() const;
  // A collective's hardware axes; empty for the other kinds.
  const std::vector<int>& comm_axes() const;
  // A collective's explicit groups of chips (CollectiveOp::groups); null for the
  // other kinds and for groups along axes.
  const std::vector<std::vector<topology::ChipId>>* explicit_groups() const;
};

// Bytes per element of a dtype name (bf16, fp16, fp32, int8, fp8, int32); 0 when unknown.
std::uint64_t element_size(std::string_view dtype);

// The (src, dst) pairs of a send op.
std::vector<std::pair<topology::ChipId, topology::ChipId>> send_pairs(const Op& op);

// How a workload matmul was lowered, in words and numbers (meshsim explain).
struct MatmulExplanation {
  bool layer = false;     // an MLP block (its matmuls follow with their own entries)
  std::string name;       // the workload op
  int seed_case = 0;      // 1..4 of the cheat sheet; 0 for a contracting dim split on different axes
  std::string a_before, b_before, c_after;
  std::vector<std::string> lines;     // the reasoning, step by step
  std::vector<std::uint32_t> ops;     // the lowered ops, in order
};

struct Workload {
  std::string file;
  Hardware hardware;
  // Hardware axes x, y, z; with "slices" (multislice) a last, switched axis "dcn"
  // of that many slices (topology/torus.hpp). On GPUs the GPU within its node
  // (in_node), then the nodes; where a mesh axis takes part of one of them, it
  // is split into factors, inner first (docs/WORKLOAD.md).
  std::vector<topology::AxisSpec> topology;
  // The hardware axes' sizes as the topology has them, before mesh axes split
  // any: the coordinates a send's `from` and `to` give.
  std::vector<int> written_shape;
  bool twisted = false;                      // a twisted torus ("topology": {"twisted": true}; Torus)
  std::vector<MeshAxis> mesh;
  std::vector<Array> declared;  // the arrays as the workload declares them
  std::vector<Array> arrays;    // the last version of every array (declared, results, intermediates)
  std::vector<Op> ops;        // lowered ops, in a valid execution order
  std::vector<MatmulExplanation> explanations;
  std::shared_ptr<const Training> training;  // a training step (the "training" section); null otherwise
  // GPU: "topology": {"nodes": [N0, N1, ...]}, the nodes laid out as a grid (node
  // index n0 + N0 n1 + N0 N1 n2): hardware axes gpu, node0, node1, ...; with
  // {"nodes": N} (false) the axes are gpu and node. Where mesh axes split them,
  // gpu0, gpu1, ... and node0, node1, ... (gpu_axis_name).
  bool node_grid = false;

  // Chip coordinates and, for TPUs, the links. For GPUs the hardware axes are the
  // GPU within its node (the in_node axes: axis 0, or its factors) and the node
  // axes (chip = gpu + G * node); the links are the fabric's, one fat tree of
  // all the nodes.
  topology::Torus make_torus() const;
  topology::Fabric make_fabric() const;  // GPU workloads only
  // The machine, built once per run: the torus, or the GPUs' grid and fabric.
  topology::System make_system() const;
};

// The name of a GPU workload's hardware axis: "gpu" (0), then "node" or, on a
// node grid, "node0", "node1", ...; where mesh axes split the GPUs of a node,
// "gpu0", "gpu1", ...; the nodes, "node0", "node1", ...
std::string gpu_axis_name(const Workload& w, int axis);

// Throws InputError ("FILE:/json/pointer: message") on any malformed or
// inconsistent input.
Workload parse_workload(std::string_view text, const std::string& file);

// Every chip's coordinate on every mesh axis (indexed [chip][mesh axis]): a mesh
// axis spanning hardware axes a0, a1 (a0 first) has coordinate c0 + |a0| * c1, as
// the lowering lays shards out. `torus` is w.make_torus().
std::vector<std::vector<int>> mesh_coordinates(const Workload& w, const topology::Torus& torus);
// Reads and parses a file; an unreadable file is an Error.
Workload load_workload(const std::string& path);

// Limits applied while parsing.
constexpr std::uint32_t kMaxChips = 262144;
constexpr int kMaxAxisSize = 4096;

}  // namespace meshsim::workloads
