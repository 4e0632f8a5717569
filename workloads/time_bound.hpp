#pragma once
// A lower bound of an op's simulated time from the workload alone, so that a run
// whose time could not fit the Tick range (2^62 ps) is refused at parse time
// rather than stopped during the simulation. Communication: the bytes every chip
// (or one chip, for a send) must receive or send, over all the link directions a
// chip has at the fastest link bandwidth. The simulated time can never be
// shorter; it may be much longer (the executor still stops at the first task
// that would pass the limit).
#include "workloads/workload.hpp"

namespace meshsim::workloads {

// Seconds; 0 for a matmul (the roofline check in driver/costs.cpp covers it).
double time_lower_bound_s(const Workload& w, const Op& op);

// Throws InputError at the first op whose lower bound passes kMaxTick.
void check_time_range(const Workload& w);
void check_time_range(const Workload& w, const Op& op);

}  // namespace meshsim::workloads
