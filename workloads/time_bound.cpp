#include "workloads/time_bound.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "base/error.hpp"
#include "base/tick.hpp"

namespace meshsim::workloads {

double time_lower_bound_s(const Workload& w, const Op& op) {
  if (is_local(op.kind)) return 0;
  // A chip's incoming (or outgoing) bandwidth: a TPU has at most two link
  // directions per hardware axis; a GPU one NVLink and one NIC direction.
  double chip_bandwidth = 0;
  if (w.hardware.gpu) {
    chip_bandwidth = static_cast<double>(w.hardware.nvlink.bandwidth_bytes_per_s) +
                     static_cast<double>(w.hardware.nic.bandwidth_bytes_per_s);
  } else {
    for (const topology::AxisSpec& a : w.topology)
      if (a.size > 1) chip_bandwidth += 2.0 * static_cast<double>(w.hardware.ici.bandwidth_bytes_per_s);
  }
  if (chip_bandwidth <= 0) return 0;
  double n = 1;
  if (is_collective(op.kind))
    for (int a : op.collective().mesh_axes) n *= w.mesh[static_cast<std::size_t>(a)].size;  // P, the chips per group
  const double v = static_cast<double>(op.comm_bytes());
  double bytes = 0;  // what one chip must receive (send: what the source sends)
  switch (op.kind) {
    case OpKind::AllGather:  // every shard but its own
      bytes = n > 1 ? v * (n - 1) / n : 0;
      break;
    case OpKind::ReduceScatter:  // its reduced shard, at least once
      bytes = n > 1 ? v / n : 0;
      break;
    case OpKind::AllReduce:  // every element, reduced by the others, at least once
      bytes = n > 1 ? v : 0;
      break;
    case OpKind::AllToAll:  // a piece of every other chip's V/n
      bytes = n > 1 ? v * (n - 1) / (n * n) : 0;
      break;
    case OpKind::Send:
      bytes = op.send().src != op.send().dst ? v : 0;
      break;
    case OpKind::Matmul:
    case OpKind::Elementwise:
      break;
  }
  return bytes / chip_bandwidth;
}

void check_time_range(const Workload& w, const Op& op) {
  const double t = time_lower_bound_s(w, op);
  if (t >= kMaxTick.seconds())
    throw InputError(w.file, op.pointer,
                     fmt::format("this op needs at least {:.3g} s of simulated time, past the simulator's limit of "
                                 "{:.3g} s (2^62 ps); reduce the bytes",
                                 t, kMaxTick.seconds()));
}

void check_time_range(const Workload& w) {
  for (const Op& op : w.ops) check_time_range(w, op);
}

}  // namespace meshsim::workloads
