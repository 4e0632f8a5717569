#pragma once
// The compute model of a lowered matmul: the roofline of its local shard shapes
// on the chip's peak rate for its dtype, scaled by the matmul efficiency.
#include <string>

#include "kernels/roofline.hpp"
#include "workloads/workload.hpp"

namespace meshsim::driver {

// Throws InputError (at the op) when the preset has no rate for the dtype.
kernels::Roofline matmul_cost(const workloads::Op& op, const workloads::Hardware& hw, const std::string& file);
double matmul_flops(const workloads::Op& op);  // per chip

}  // namespace meshsim::driver
