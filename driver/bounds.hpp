#pragma once
// Lower bounds of communication ops (issue 17; docs/MODEL.md, "Lower bounds"):
// no schedule on these links can finish faster. Three bounds, the largest wins:
//  - ingress/egress: the bytes one chip must receive (or send) over the links it
//    has into (out of) the group;
//  - cut: the bytes that must cross the narrowest cut of the group (a plane
//    through the middle of one axis) over the links that cross it;
//  - latency: the hops (a GPU fabric: the route latency) to the farthest chip.
// Printed beside the cheat sheet's closed form; the simulated time is never
// below it (tested over every example and random shapes, ops and sizes).
#include <string>

#include "topology/fabric.hpp"
#include "topology/torus.hpp"
#include "workloads/workload.hpp"

namespace meshsim::driver {

struct LowerBound {
  double ingress_s = 0, cut_s = 0, latency_s = 0;
  double time_s() const;
  const char* binding() const;  // "ingress", "cut" or "latency"
};

// For a collective or send on a TPU torus (`fabric` null) or a GPU fabric.
// Local ops have no communication bound (all zero).
LowerBound lower_bound(const workloads::Op& op, const workloads::Workload& w, const topology::Torus& torus,
                       const topology::Fabric* fabric);

}  // namespace meshsim::driver
