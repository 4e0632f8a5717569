#include "driver/expand.hpp"

#include <fmt/format.h>

#include "base/error.hpp"
#include "sim/collectives/collective.hpp"

namespace meshsim::driver {

Expanded expand(const workloads::Workload& w, const topology::Torus& torus) {
  Expanded out;
  const std::uint32_t chips = torus.num_chips();
  out.resources.assign(torus.num_link_slots(),
                       sim::Resource{w.hardware.ici.bandwidth_bytes_per_s, w.hardware.ici.latency,
                                     w.hardware.forward_chunk_bytes});
  sim::ProgramBuilder b;
  std::vector<std::vector<sim::TaskId>> exits;
  unsigned __int128 serial_ps = 0;  // upper bound of any schedule's length
  for (std::size_t i = 0; i < w.ops.size(); ++i) {
    const workloads::Op& op = w.ops[i];
    const sim::OpId id = b.add_op();
    std::vector<sim::TaskId> entry(chips), exit(chips);
    for (std::uint32_t c = 0; c < chips; ++c) entry[c] = b.join(id);
    for (std::uint32_t c = 0; c < chips; ++c) exit[c] = b.join(id);
    for (std::uint32_t c = 0; c < chips; ++c) {
      b.depend(entry[c], exit[c]);
      for (std::uint32_t dep : op.deps) b.depend(exits[dep][c], entry[c]);
    }
    const std::size_t first_task = b.num_tasks();
    const collectives::OpPorts ports{id, entry, exit};
    switch (op.kind) {
      case CollectiveKind::AllGather:
        collectives::all_gather(b, torus, op.hw_axes, op.bytes, ports);
        break;
      case CollectiveKind::ReduceScatter:
        collectives::reduce_scatter(b, torus, op.hw_axes, op.bytes, ports);
        break;
      case CollectiveKind::AllReduce:
        collectives::all_reduce(b, torus, op.hw_axes, op.bytes, ports);
        break;
      case CollectiveKind::AllToAll:
        collectives::all_to_all(b, torus, op.hw_axes, op.bytes, ports);
        break;
      case CollectiveKind::Send:
        collectives::send(b, torus, op.src, op.dst, op.bytes, ports);
        break;
    }
    if (b.num_tasks() > kMaxTasks)
      throw InputError(w.file, op.pointer,
                       fmt::format("the program needs {} tasks so far, more than the limit of {}", b.num_tasks(),
                                   kMaxTasks));
    std::uint64_t transfers = 0, link_bytes = 0;
    for (std::size_t t = first_task; t < b.num_tasks(); ++t) {
      const sim::Task& task = b.task(static_cast<sim::TaskId>(t));
      if (task.kind != sim::TaskKind::Transfer) continue;
      ++transfers;
      link_bytes += task.amount;
      serial_ps += static_cast<unsigned __int128>(
                       serialization_time(task.amount, w.hardware.ici.bandwidth_bytes_per_s).ps()) +
                   static_cast<unsigned __int128>(w.hardware.ici.latency.ps());
    }
    if (serial_ps >= static_cast<unsigned __int128>(kMaxTick.ps()))
      throw InputError(w.file, op.pointer,
                       fmt::format("simulated time could exceed the limit of {:.3g} s (2^62 ps); reduce the sizes",
                                   kMaxTick.seconds()));
    out.op_transfers.push_back(transfers);
    out.op_link_bytes.push_back(link_bytes);
    exits.push_back(std::move(exit));
  }
  out.program = std::move(b).finish();
  return out;
}

}  // namespace meshsim::driver
