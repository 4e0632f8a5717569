#pragma once
// meshsim explain: for every matmul and layer, the cheat sheet's case, the
// shardings before and after, the communication inserted and why, and each
// step's closed-form cost with the numbers filled in.
#include <string>

#include "workloads/workload.hpp"

namespace meshsim::reports {

std::string format_explain(const workloads::Workload& w);

}  // namespace meshsim::reports
