#pragma once
// Internal to workloads/: lowering a workload's typed ops (spec.hpp, OpsSpec)
// into the ops the engine runs. The Lowerer owns the ops: collectives on arrays
// (lower_ops.cpp) and matmuls and layers (lower_matmul.cpp), which lower to
// collectives plus local matmuls. Nothing here sees JSON: an error names the
// SourceRef the frontend (or a builder in memory) gave the value.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "workloads/spec.hpp"
#include "workloads/workload.hpp"

namespace meshsim::workloads::detail {

void check_array_name(const std::string& name, const SourceRef& where);
// A size the JSON frontend reads as a positive integer up to `max`; a spec built
// in memory is held to the same range, with the same message.
void check_positive(std::uint64_t v, std::uint64_t max, const SourceRef& where);
int mesh_axis_index(const Workload& w, const std::string& name);
std::string known_axes(const Workload& w);
std::uint64_t axes_product(const Workload& w, const std::vector<int>& axes);
std::vector<std::string> axis_names(const Workload& w, const std::vector<int>& axes);
std::string sharding_string(const Workload& w, const Array& a);
// One mesh axis shards at most one dim; every dim divides by its shards.
void check_layout(const Workload& w, const Array& a, const SourceRef& where);
// A sharding string ("A[I_X, J]") of `array` with `dims` as each dim's mesh axes.
std::vector<std::vector<int>> parse_layout(const Workload& w, const std::string& array,
                                           const std::vector<std::string>& dims, const NameRef& sharding);
Array lower_array(const Workload& w, const ArraySpec& spec);
// Mesh axes by name, each once, at least one (`list_at`: the list).
std::vector<int> resolve_axes(const Workload& w, const std::vector<NameRef>& axes, const SourceRef& list_at);
topology::ChipId resolve_chip(const Workload& w, const SendSpec::Chip& chip);

// Bytes of `a` within one group of the collective over `axes`: the global bytes
// divided by the shards on every other axis.
std::uint64_t group_bytes(const Workload& w, const Array& a, const std::vector<int>& axes);
// Bytes one chip holds of `a`.
std::uint64_t local_bytes(const Workload& w, const Array& a);
// The hardware axes (size > 1) that mesh axes span.
std::vector<int> hardware_axes(const Workload& w, const std::vector<int>& mesh_axes);

// The groups of a collective over mesh axes of which one takes part of a torus
// axis (MeshAxis::whole false): chips that differ only on those axes, each
// group's members in mixed radix over the axes' factors (CollectiveOp::factors).
struct FactorGroups {
  std::shared_ptr<const std::vector<std::vector<topology::ChipId>>> groups;
  std::vector<int> factors;
};
// Built once per (axes, chips): a training step has thousands of collectives
// over the same few axis sets of each stage.
class FactorGroupsCache {
 public:
  const FactorGroups& get(const Workload& w, const std::vector<int>& mesh_axes,
                          const std::vector<topology::ChipId>* chips);

 private:
  std::vector<std::vector<int>> coords_;  // every chip's mesh coordinates (built on first use)
  std::map<std::pair<std::vector<int>, const void*>, FactorGroups> built_;
};
// Sets the collective's mesh axes and what it runs over: their hardware axes,
// or (a mesh axis over part of a torus axis) their groups ring by factor, of
// the op's `chips` (null: every chip).
void set_comm_axes(const Workload& w, CollectiveOp& c, const std::vector<int>& mesh_axes,
                   const std::vector<topology::ChipId>* chips = nullptr, FactorGroupsCache* cache = nullptr);
// A collective step that a matmul or layer lowers to: `in` over mesh `axes`
// becomes `out`; V is `in`'s bytes within one group.
Op collective_step(const Workload& w, OpKind kind, const std::string& name, const std::string& group,
                   const std::string& pointer, const Array& in, const Array& out, const std::vector<int>& axes);

class Lowerer {
 public:
  explicit Lowerer(Workload& w) : w_(w) {}
  void declare(Array a, const SourceRef& where);
  // The op at `index` of the workload's list (its default name is "<kind>#<index>").
  void lower(const OpSpec& spec, std::size_t index);

 private:
  // Collectives and sends as written by the user (lower_ops.cpp).
  // `after`: the ops it waits for besides the producers of its input.
  void lower_collective(const CollectiveSpec& c, const SourceRef& where, Op op,
                        const std::vector<std::uint32_t>& after);
  void lower_send(const SendSpec& s, Op op, const std::vector<std::uint32_t>& after);
  // Matmuls and MLP blocks (lower_matmul.cpp).
  void lower_matmul(const MatmulOpSpec& m, const SourceRef& where, const std::string& name,
                    const std::vector<std::uint32_t>& after);
  void lower_mlp(const MlpSpec& m, const SourceRef& where, const std::string& name,
                 const std::vector<std::uint32_t>& after);
  void explain_mlp(const SourceRef& where, const std::string& name, const std::string& x, const std::string& w1,
                   const std::string& w2, const std::string& variant, const std::vector<std::uint32_t>& ops,
                   std::size_t at);

 public:  // used by the matmul lowering's helpers
  const Array& array(const std::string& name, const SourceRef& where) const;  // current version
  bool has_array(const std::string& name) const { return arrays_.count(name) > 0; }
  // Appends a lowered op: its deps are the producers of its inputs and `after`;
  // its output (if any) becomes the current version of that array name.
  std::uint32_t emit(Op op, const std::vector<std::uint32_t>& after);
  Workload& workload() { return w_; }

 private:
  Workload& w_;
  std::map<std::string, std::size_t> arrays_;       // name -> index in w_.arrays (current version)
  std::map<std::string, std::uint32_t> producers_;  // array -> last op that wrote it
  std::map<std::string, std::uint32_t> names_;      // workload op name -> its last lowered op
  std::set<std::string> step_names_;                // every lowered op's name (reports key on it)
};

}  // namespace meshsim::workloads::detail
