#pragma once
// The machine a run simulates, built once per run (workloads::Workload::
// make_system) and passed down: its chips on a grid of hardware axes, and its
// links, either those of a TPU torus (ICI along the axes, the data-center network
// between slices) or those of a switched GPU fabric (NVLink inside a node, a fat
// tree of NICs between the nodes). Whatever depends only on which machine it is
// asks the system, not the workload's hardware kind.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "topology/fabric.hpp"
#include "topology/torus.hpp"

namespace meshsim::topology {

class System {
 public:
  // A TPU slice (or slices): the torus's axes, names and links.
  explicit System(Torus torus);
  // GPUs: `grid` gives their coordinates (the GPU within its node on the
  // leading in_node axes, one or its factors, then the node axes; chip = gpu +
  // G * node), `fabric` the links, `axis_names` one name per grid axis.
  System(Torus grid, Fabric fabric, std::vector<std::string> axis_names);

  // A switched GPU fabric (else a TPU torus).
  bool switched() const { return fabric_.has_value(); }
  // The chips' coordinates; on a TPU also the links.
  const Torus& grid() const { return grid_; }
  // The GPU fabric; null on a TPU.
  const Fabric* fabric() const { return fabric_ ? &*fabric_ : nullptr; }
  std::uint32_t num_chips() const { return grid_.num_chips(); }
  int num_axes() const { return grid_.num_axes(); }
  // "x", "y", "z" (and "dcn" between slices) on a TPU; "gpu", then "node" (or
  // "node0", "node1", ... on a grid of nodes) on GPUs.
  const std::string& axis_name(int axis) const { return axis_names_[static_cast<std::size_t>(axis)]; }
  // The links a message from `src` to `dst` crosses: the torus's dimension-order
  // route, or the fabric's.
  std::vector<LinkId> route(ChipId src, ChipId dst) const;
  // The one-way bandwidth and latency of a link of route().
  const LinkSpec& link_spec(LinkId link) const;

 private:
  Torus grid_;
  std::optional<Fabric> fabric_;
  std::vector<std::string> axis_names_;
};

}  // namespace meshsim::topology
