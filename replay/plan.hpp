#pragma once
// The hardware replay's plan: a lowered workload (the same ops `meshsim run`
// simulates) as the calls each rank makes, one rank per chip of the mesh (rank =
// chip id): a cuBLAS GEMM for every local matmul, an NCCL call for every
// collective on the communicator of the rank's mesh-axis group (a collective over
// several mesh axes gets the communicator of their combined group, as a split
// communicator would give), AllToAll as grouped send/recv, a send as a send/recv
// pair on a two-rank communicator. Nothing here touches a device: kernels/cuda/
// executes the calls, `meshsim replay --dry-run` prints them.
#include <cstdint>
#include <string>
#include <vector>

#include "base/op_kind.hpp"
#include "workloads/workload.hpp"

namespace meshsim::replay {

// A communicator: its ranks in communicator-rank order (the op's mesh axes major
// first, as the shards of the gathered array are ordered).
struct Communicator {
  std::vector<std::uint32_t> ranks;
  std::vector<std::string> mesh_axes;  // as written in the first op that uses it
};

enum class CallKind { Gemm, AllGather, ReduceScatter, AllReduce, SendRecv, Send, Recv };
std::string_view call_kind_name(CallKind k);  // gemm, all_gather, ..., send_recv (AllToAll), send, recv

struct Call {
  std::uint32_t op = 0;  // index into Workload::ops
  CallKind kind = CallKind::Gemm;
  std::string dtype;     // element type ("bytes" when the op gives only a byte count)
  std::uint64_t element_bytes = 1;
  // GEMM: C[m,n] = A[m,k] . B[k,n]
  std::uint64_t m = 0, n = 0, k = 0;
  // NCCL: the communicator (index into Plan::communicators), this rank's position
  // in it, and the bytes of its send and receive buffers. SendRecv (AllToAll):
  // `peer_bytes` to and from every other rank of the communicator. Send/Recv: the
  // peer rank (a mesh rank).
  std::uint32_t communicator = 0;
  std::uint32_t comm_rank = 0;
  std::uint64_t send_bytes = 0, recv_bytes = 0, peer_bytes = 0;
  std::uint32_t peer = 0;
};

struct Plan {
  std::uint32_t ranks = 0;
  std::vector<Communicator> communicators;      // in order of first use
  std::vector<std::vector<Call>> calls;         // per rank, in op order
};

Plan make_plan(const workloads::Workload& w);

// The plan in words: the communicators, then every rank's calls.
std::string format_plan(const workloads::Workload& w, const Plan& plan);

}  // namespace meshsim::replay

#include "kernels/cuda/device.hpp"

namespace meshsim::replay {

// What one op becomes on `gpus` visible GPUs (rank r on GPU r): the device calls
// of the ranks it can replay, and a plain statement of what it leaves out. A
// collective's group is replayed only when all its ranks have a GPU; a GEMM on
// every rank that has one.
struct OpStep {
  std::uint32_t op = 0;
  std::vector<kernels::cuda::DeviceCall> calls;
  std::uint32_t ranks_replayed = 0;  // ranks whose calls are in `calls`
  std::uint32_t ranks = 0;           // ranks the op has calls on
  std::string skipped;               // empty when every rank is replayed
};
std::vector<OpStep> device_steps(const workloads::Workload& w, const Plan& plan, int gpus);
std::string format_steps(const workloads::Workload& w, const std::vector<OpStep>& steps, int gpus);

}  // namespace meshsim::replay
