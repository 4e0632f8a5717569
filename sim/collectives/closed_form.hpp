#pragma once
// The cheat sheet's closed forms (../shared/seeds/000_*.txt), used to REPORT the
// expected time beside the simulated one and in tests. The simulator never uses
// them to produce a time.
//   AllGather, ReduceScatter: T = max(T_min * sum(X_i)/2, V / (W * N_axes))
//   AllReduce:                twice the ReduceScatter (RS then AG): 2V / (W * N_axes)
//   AllToAll:                 max(T_min * sum(X_i)/2, V / (4W)) on one bidirectional
//                             ring; over several axes the bandwidth term is
//                             max_i X_i * V / (4 W P) (the busiest axis's links)
//   Send:                     max(T_min * hops, bytes / (routes * W/2))
// W: bidirectional bandwidth of one link (2x the one-way value); N_axes: axes
// worked on in parallel; X_i: their sizes; P: chips per group; T_min: hop latency.
//
// Multislice (S slices in the group over the data-center network, one-way DCN
// bandwidth B per chip, a DCN step 2 link latencies L): the hierarchical
// decomposition, the ICI part by the cheat sheet over the ICI axes, plus
//   AllGather, ReduceScatter: (S-1) V / (P B), latency S/2 steps (a ring)
//   AllReduce:                twice that
//   AllToAll:                 (S-1) V / (S P B), one step
//   Send between slices:      bytes / (routes * B), each route crossing once
// (docs/MODEL.md, "Multislice"). The balanced schedule may overlap the two
// parts, so the simulated time may be below this sum, never below the lower bound.
#include <cstdint>
#include <span>
#include <string>

#include "base/tick.hpp"
#include "sim/collectives/collective.hpp"

namespace meshsim::collectives {

struct ClosedForm {
  double latency_s = 0;    // the latency-floor term
  double bandwidth_s = 0;  // the bandwidth term
  // The two terms add up rather than overlap: a pipeline of whole chunks, each
  // stored and forwarded at every link (NCCL's tree: the first chunk's way
  // through, then the other chunks through the busiest link; a send on a GPU
  // fabric: its route's latencies and first chunk, then the message through the
  // narrowest link), or phases that run one after the other (the hierarchical
  // all-reduce: the latency-bound phases' latencies and the others' bandwidth
  // terms).
  bool additive = false;
  double time_s() const {
    if (additive) return latency_s + bandwidth_s;
    return latency_s > bandwidth_s ? latency_s : bandwidth_s;
  }
  bool latency_bound() const { return latency_s > bandwidth_s; }
};

struct ClosedFormInput {
  Kind kind = Kind::AllGather;
  std::uint64_t bytes = 0;                  // V (group bytes), or the bytes of a send
  double link_bandwidth_one_way = 0;        // bytes/s per link direction
  Tick hop_latency;
  std::span<const int> axis_sizes;          // X_i of the axes spanned (collectives)
  int send_hops = 0;                        // Send only
  int send_routes = 0;                      // Send only
  // Multislice: slices in the group (a send: 2 when it crosses slices), 0 or 1: none.
  int slices = 0;
  double dcn_bandwidth_one_way = 0;  // bytes/s per chip and direction
  Tick dcn_hop_latency;              // per link (a step crosses two)
  Tick send_latency;                 // Send between slices: its route's latency
};

ClosedForm cheat_sheet(const ClosedFormInput& in);

}  // namespace meshsim::collectives
