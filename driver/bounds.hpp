#pragma once
// Lower bounds of communication ops (issue 17; docs/MODEL.md, "Lower bounds"):
// no schedule on these links can finish faster. Three bounds, the largest wins
// (a collective over explicit groups of chips has a fourth, traffic, below):
//  - ingress/egress: the bytes one chip must receive (or send) over the links it
//    has into (out of) the group;
//  - cut: the bytes that must cross the narrowest cut of the group (a plane
//    through the middle of one axis) over the links that cross it;
//  - latency: the hops (a GPU fabric: the route latency) to the farthest chip;
//  - traffic (on one slice; groups of chips, workloads::CollectiveOp::groups, and sends):
//    every byte crosses at least the hops to the chip it must reach (a shard its
//    group's farthest member, a reduced chunk from it; an all-to-all piece and a
//    send's bytes their destination), and the torus has so many links.
// Printed beside the cheat sheet's closed form; the simulated time is never
// below it (tested over every example and random shapes, ops and sizes).
#include <span>
#include <string>
#include <vector>

#include "sim/collectives/gpu.hpp"
#include "topology/fabric.hpp"
#include "topology/torus.hpp"
#include "workloads/workload.hpp"

namespace meshsim::driver {

struct LowerBound {
  double ingress_s = 0, cut_s = 0, latency_s = 0, traffic_s = 0;
  double time_s() const;
  const char* binding() const;  // "ingress", "cut", "traffic" or "latency"
};

// For a collective or send on a TPU torus (`fabric` null) or a GPU fabric, on a
// GPU fabric with the latencies NCCL's `protocol` sees (the op's).
// Local ops have no communication bound (all zero).
LowerBound lower_bound(const workloads::Op& op, const workloads::Workload& w, const topology::Torus& torus,
                       const topology::Fabric* fabric,
                       collectives::gpu::Protocol protocol = collectives::gpu::Protocol::Simple);

// The cuts of a GPU fabric's upper tiers: the bytes `kind` must move, summed
// over the op's groups, between each group's GPUs under one leaf unit (or one
// pod) and the rest of that group, in the busier direction, over that unit's
// cables to the spines (the pod's to the core); the slowest cut. 0 when every
// group stays in one unit.
double fabric_tier_cut_s(OpKind kind, double v, std::span<const std::vector<topology::ChipId>> groups,
                         const topology::Fabric& f);

}  // namespace meshsim::driver
