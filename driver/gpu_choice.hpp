#pragma once
// NCCL's choice of a GPU collective's algorithm and protocol (the selector
// beside the algorithms of sim/collectives/gpu.hpp), and the memo one run
// passes down so that each op's choice is made once.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "sim/collectives/closed_form.hpp"
#include "sim/collectives/gpu.hpp"
#include "topology/fabric.hpp"
#include "topology/torus.hpp"
#include "workloads/workload.hpp"

namespace meshsim::driver {

// A GPU collective's algorithm and NCCL protocol: the algorithm the workload
// names; else, for an all-reduce, the pair NCCL's cost model (nccl_model_s)
// says is fastest among the ring and the tree with each protocol and, in one
// NVLink domain that has it, NVLS with Simple; else the fastest by its closed
// form. The protocol: the one the workload names, else, for the ring and the
// tree, NCCL's model's pick; Simple for the others. InputError when the named
// algorithm or protocol does not apply.
struct GpuChoice {
  collectives::gpu::Algorithm algorithm;
  collectives::ClosedForm closed;
  collectives::gpu::Protocol protocol = collectives::gpu::Protocol::Simple;
};
GpuChoice gpu_algorithm(const workloads::Op& op, const workloads::Workload& w, const topology::Torus& torus,
                        const topology::Fabric& fabric);  // `fabric` is w.make_fabric()

// Per op of `w`, the class its tasks run as (sim::Executor::classify_ops): a GPU
// collective's protocol (collectives::gpu::Protocol), else 0; empty when every
// op is of class 0.
class RunContext;
std::vector<std::uint8_t> op_classes(const workloads::Workload& w, RunContext& run);

// What an op's GPU choice depends on: its kind, hardware axes, bytes, the
// algorithm and protocol it names and a send's ends.
using GpuChoiceKey = std::tuple<int, std::vector<int>, std::uint64_t, std::string, std::string, std::uint32_t, std::uint32_t>;

// gpu_algorithm (and a send's closed form) memoized for one system: the
// choice depends only on the system and the op's kind, hardware axes, bytes,
// the algorithm it names and a send's ends, so ops alike (a training step's
// thousands of layers) share one, and so do workloads on the system (a
// workload's group 0, its ops expanded one by one). Not for a workload whose
// hardware changes meanwhile.
class GpuChoices {
 public:
  // `torus` (the GPUs' grid) and `fabric` are the system's; they must outlive this.
  GpuChoices(const workloads::Workload& w, const topology::Torus& torus, const topology::Fabric& fabric);
  const GpuChoice& operator()(const workloads::Op& op);
  const topology::Fabric& fabric() const { return fabric_; }

 private:
  using Key = GpuChoiceKey;
  const workloads::Workload& w_;
  const topology::Torus& torus_;
  const topology::Fabric& fabric_;
  std::map<Key, GpuChoice> memo_;
};

}  // namespace meshsim::driver
