#pragma once
// The expected costs printed beside simulated times: the roofline of a lowered
// matmul (its local shard shapes at the chip's peak rate for its dtype, scaled by
// the matmul efficiency) and the cheat sheet's closed form of a communication op.
// A GPU collective's algorithm is chosen in gpu_choice.hpp by NCCL's model
// (nccl_model.hpp); both are included here.
#include <map>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "driver/gpu_choice.hpp"
#include "driver/nccl_model.hpp"
#include "kernels/roofline.hpp"
#include "sim/collectives/closed_form.hpp"
#include "sim/collectives/gpu.hpp"
#include "sim/collectives/schedule.hpp"
#include "topology/system.hpp"
#include "topology/torus.hpp"
#include "workloads/workload.hpp"

namespace meshsim::driver {

// Throws InputError (at the op) when the preset has no rate for the dtype.
kernels::Roofline matmul_cost(const workloads::Op& op, const workloads::Hardware& hw, const std::string& file);
double matmul_flops(const workloads::Op& op);  // per chip
// An elementwise op: its HBM bytes over the HBM bandwidth (no compute term).
kernels::Roofline elementwise_cost(const workloads::Op& op, const workloads::Hardware& hw, const std::string& file);
// matmul_cost or elementwise_cost, by kind.
kernels::Roofline local_cost(const workloads::Op& op, const workloads::Hardware& hw, const std::string& file);
// The closed form of GPU algorithm `algorithm` with `protocol` for `op` on
// `fabric` (docs/MODEL.md, "GPU fabrics"): NCCL's ring and direct algorithms,
// the tree, NVLS and the NVLS tree, a send.
collectives::ClosedForm gpu_closed_form(const workloads::Op& op, const workloads::Workload& w,
                                        const topology::Torus& torus, const topology::Fabric& fabric,
                                        collectives::gpu::Algorithm algorithm,
                                        collectives::gpu::Protocol protocol = collectives::gpu::Protocol::Simple);
// The nodes a GPU collective spans in each group: the product of its node axes.
std::uint64_t op_nodes(const workloads::Op& op, const topology::Torus& torus);

// The fabric level a communication op reaches, its outermost: on a TPU, dcn for a
// collective over the slice axis or a send between slices, else ici; on a GPU
// fabric, nic for a collective over more than one node or a send between nodes,
// else nvlink.
workloads::FabricLevel comm_level(const workloads::Op& op, const topology::System& system);
// The hardware's fixed cost of the op's level and kind (zero for local ops and
// by default): a calibrated launch and synchronisation cost, on top of NCCL's
// base latency on a GPU (op_fixed_cost). Alone, a lower bound of what an op
// pays before its first transfer (search's bounds use it so).
Tick comm_fixed_cost(const workloads::Op& op, const workloads::Workload& w, const topology::System& system);
// What an op pays on every chip before its first transfer: comm_fixed_cost
// and, for a GPU collective (not a send), NCCL's base latency of the algorithm
// and protocol it runs (NVLS: nvls_fixed_cost; the NVLS tree:
// nvls_tree_fixed_cost). `gpu`: the workload's choices, null on a TPU.
Tick op_fixed_cost(const workloads::Op& op, const workloads::Workload& w, const topology::System& system,
                   GpuChoices* gpu);
// The same for a GPU collective (not a send) whose choice is at hand.
Tick op_fixed_cost(const workloads::Op& op, const workloads::Workload& w, const topology::System& system,
                   const GpuChoice& choice);

// A torus collective's multi-axis schedule: the one the op names, else balanced.
collectives::Schedule torus_schedule(const workloads::Op& op);

// On the system's torus, or on its GPU fabric.
collectives::ClosedForm communication_closed_form(const workloads::Op& op, const workloads::Workload& w,
                                                  const topology::System& system);
collectives::ClosedForm communication_closed_form(const workloads::Op& op, const workloads::Workload& w,
                                                  const topology::Torus& torus, const topology::Fabric& fabric);
collectives::ClosedForm torus_closed_form(const workloads::Op& op, const workloads::Workload& w,
                                          const topology::Torus& torus);

}  // namespace meshsim::driver
