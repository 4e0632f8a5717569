#pragma once
// One call from a parsed workload to its simulated results.
#include <cstdint>
#include <string>
#include <vector>

#include "base/collective_kind.hpp"
#include "base/tick.hpp"
#include "sim/collectives/closed_form.hpp"
#include "workloads/workload.hpp"

namespace meshsim::driver {

struct OpResult {
  std::string name;
  CollectiveKind kind = CollectiveKind::AllGather;
  std::vector<std::string> mesh_axes;  // as written in the op
  std::vector<std::string> hw_axes;    // the hardware axes (size > 1) they span
  std::uint64_t bytes = 0;    // V (collectives) or payload (send)
  Tick begin;        // every chip could start the op (its dependencies done on all chips)
  Tick first_start;  // the first chip started it
  Tick end;          // its last byte arrived
  collectives::ClosedForm closed_form;
  std::uint64_t transfers = 0;
  std::uint64_t link_bytes = 0;  // sum over transfers of bytes (bytes x hops)
  std::string sharding_before, sharding_after;
  Tick time() const { return end - begin; }
};

struct LinkLoad {
  std::string name;  // "(0,0)+x"
  std::uint64_t bytes = 0;
  Tick busy;
};

struct RunResult {
  std::vector<OpResult> ops;
  Tick makespan;
  std::uint64_t events = 0;
  std::uint64_t transfers = 0;
  std::uint64_t link_bytes = 0;
  bool capacity_respected = false;
  std::vector<LinkLoad> busiest_links;  // most bytes first
};

struct SimulateOptions {
  std::size_t busiest_links = 0;  // how many to report
};

RunResult simulate(const workloads::Workload& w, const SimulateOptions& options = {});

}  // namespace meshsim::driver
