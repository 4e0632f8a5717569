#pragma once
// Expands a workload's ops into the hop-by-hop program the engine executes: per
// op, one entry and one exit join per chip; an op's entry on chip c waits for the
// exits on chip c of the ops it depends on; the collective algorithms fill in the
// transfers between.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "sim/executor.hpp"
#include "sim/op_chips.hpp"
#include "sim/program.hpp"
#include "topology/fabric.hpp"
#include "topology/torus.hpp"
#include "workloads/workload.hpp"

namespace meshsim::driver {

struct Expanded {
  sim::Program program;
  std::vector<sim::Resource> resources;  // the links (torus slots or fabric links), then a compute unit per chip
  std::size_t links = 0;                 // resources below this are links
  std::vector<std::uint64_t> op_transfers;
  std::vector<std::uint64_t> op_link_bytes;  // bytes x hops
  std::vector<sim::OpChips> op_ports;        // per op: its chips and where its entry and exit joins are
  // Per op: for a send, the chips it moves bytes between (ascending), whose
  // entries alone say when it could start (OUTPUT.md, `start`); else empty.
  std::vector<std::vector<std::uint32_t>> send_chips;
  // Whether op `op`'s entry join at position `k` of its chips counts for its start.
  bool starts_op(sim::OpId op, std::uint32_t k) const {
    const std::vector<std::uint32_t>& own = send_chips[op];
    return own.empty() || std::binary_search(own.begin(), own.end(), op_ports[op].chip_at(k));
  }
  std::uint32_t chips = 0;
  // The network as a graph of nodes, for flow-level engines (SimGrid): chips are
  // nodes 0..chips-1, then a GPU fabric's switches (NVLink switch per node, leaf
  // per rail, spines) or a multislice system's data-center network (one node). resource_ends[r] is link r's (from, to), or a compute
  // unit's chip twice.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> resource_ends;
  std::uint32_t nodes = 0;
};

// Expanded::send_chips of `op`: a send's chips, ascending; empty for other kinds.
std::vector<std::uint32_t> send_chips(const workloads::Op& op);

class RunContext;

// How programs are built: with `copy_repeats` off, every round of a pipelined
// loop (NCCL's tree's chunks, the NVLS tree's loops) is built instead of copied
// (sim::ProgramBuilder::copy_repeats; the same program, which the tests check).
struct BuildOptions {
  bool copy_repeats = true;
};

// Refuses (InputError at the op, before building it) a program whose tasks would
// exceed kMaxTasks. `run`: the run's system, GPU choices and torus plans
// (run_context.hpp); without it, a context of w's own.
Expanded expand(const workloads::Workload& w, RunContext& run, const BuildOptions& options = {});
Expanded expand(const workloads::Workload& w, const BuildOptions& options = {});

// expand() in two parts, for expanding many workloads on one system (the ops of
// one workload one by one): the system's resources and network, and on a GPU
// fabric the fabric and the algorithm choices, are laid out once.
class Expander {
 public:
  // `w`: the system (hardware, topology); it must outlive the expander, and so
  // must `run` (the run's system, GPU choices and torus plans).
  Expander(const workloads::Workload& w, RunContext& run, const BuildOptions& options = {});
  ~Expander();
  Expander(const Expander&) = delete;
  Expander& operator=(const Expander&) = delete;
  // expand(w, run) for a workload `w` on this system (its ops may be any).
  Expanded operator()(const workloads::Workload& w) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

constexpr std::size_t kMaxTasks = std::size_t{1} << 27;

// An upper bound of the hop transfers `op` expands into, computed before building
// it so that a huge op is refused without first using the memory: on a GPU
// fabric (non-null `fabric`) from the chosen algorithm's rings, routes and chunk
// counts (collectives::gpu::transfer_bound), else the torus estimate. Throws
// InputError when a named GPU algorithm does not apply.
std::uint64_t estimate_transfers(const workloads::Op& op, const workloads::Workload& w, const topology::Torus& torus,
                                 const topology::Fabric* fabric);

// How big a run would be, estimated from the workload alone (no program built):
// hop transfers (an upper bound, estimate_transfers summed), tasks and edges (as
// expand() reserves them) and the memory the program and the executor's per-task
// state take (without traces or critical paths, which add per-task records).
struct RunSize {
  std::uint64_t transfers = 0;
  std::uint64_t tasks = 0;
  std::uint64_t edges = 0;
  std::uint64_t memory_bytes = 0;
  std::size_t biggest_op = 0;  // the op with the most transfers
  std::uint64_t biggest_op_transfers = 0;
  // The workload's identical independent groups, of which the estimate is one
  // (driver/groups.hpp: only group 0 is built and run); 1: the whole workload.
  std::uint64_t groups = 1;
  // The translations of the torus whose quotient is simulated
  // (driver/translations.hpp), of which the estimate is one chip's share; 1: none.
  std::uint64_t translations = 1;
  bool mirrored = false;  // they include the mirror of the nodes (driver::mirrors_unbuilt)
  // The largest op's transfers and joins in full: with translations it is
  // built whole to check its quotient, so it must fit the program's task limit.
  std::uint64_t biggest_op_tasks = 0;
};
// `full` (the whole workload's estimate) for the quotient by `translations`
// translations: their share of the transfers, tasks, edges and memory, and
// beside them the memory of the largest op, which the quotient's builder
// expands alone in full.
// `biggest_built`: false when the largest op's quotient is built without it
// (driver::turns_unbuilt).
RunSize translated_size(const RunSize& full, std::uint64_t translations, bool biggest_built = true);
// Saturates instead of overflowing. Throws InputError when a named GPU algorithm
// does not apply (as expand() would). `run` as expand()'s.
RunSize estimate_run(const workloads::Workload& w, RunContext& run);

// Bounds on a run, checked before anything is built (meshsim run --max-transfers,
// --max-memory). The defaults let the 4096-chip benchmark run and refuse what
// would need more than a few GiB.
struct Limits {
  std::uint64_t max_transfers = kMaxTasks;
  std::uint64_t max_memory_bytes = std::uint64_t{16} << 30;  // 16 GiB
};
// Whether `size` stays within `limits` and meshsim's own limit of kMaxTasks
// (transfers plus joins and computes; for a quotient, also the op built whole).
bool within_limits(const RunSize& size, const Limits& limits);
// Throws InputError (at the biggest op) when it does not, with the estimate and
// how to make the run smaller; `hint`, when not empty, is said first (e.g. that
// an option turned the exact reductions off).
void check_limits(const workloads::Workload& w, const RunSize& size, const Limits& limits,
                  const std::string& hint = {});

}  // namespace meshsim::driver
