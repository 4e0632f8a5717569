#include "base/error.hpp"
#include "sim/collectives/collective.hpp"

namespace meshsim::collectives {

void build(ProgramBuilder& b, const Torus& t, Kind kind, std::span<const int> axes, std::uint64_t group_bytes,
           const OpPorts& ports, Schedule schedule, PlanCache* plans) {
  switch (kind) {
    case Kind::AllGather:
      return all_gather(b, t, axes, group_bytes, ports, schedule, plans);
    case Kind::ReduceScatter:
      return reduce_scatter(b, t, axes, group_bytes, ports, schedule, plans);
    case Kind::AllReduce:
      return all_reduce(b, t, axes, group_bytes, ports, schedule, plans);
    case Kind::AllToAll:
      return all_to_all(b, t, axes, group_bytes, ports);
    case Kind::Send:
    case Kind::Matmul:
    case Kind::Elementwise:
      break;
  }
  MESHSIM_ASSERT(false, "not a group collective");
}

}  // namespace meshsim::collectives
