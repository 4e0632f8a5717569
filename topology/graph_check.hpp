#pragma once
// Cross-checks a Torus with Boost.Graph: the link graph is strongly connected and
// the routed hop count of every checked pair equals its BFS distance (between
// slices of a multislice system: the route is the two DCN links).
#include <cstddef>

#include "topology/torus.hpp"

namespace meshsim::topology {

struct GraphCheck {
  bool connected = false;
  std::size_t pairs_checked = 0;
  std::size_t route_mismatches = 0;  // pairs whose routed hops differ from BFS distance
};

// BFS from `max_sources` evenly spread sources (all chips when it is >= num_chips).
GraphCheck check_with_bfs(const Torus& torus, std::size_t max_sources);

}  // namespace meshsim::topology
