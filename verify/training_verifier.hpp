#pragma once
// Proves a training step's lowering numerically (meshsim run --verify on a
// workload with a "training" section). The lowered ops of the first microbatch's
// transformer layers run on small random data in double precision, every chip
// holding its real shards: a matmul multiplies the chip's blocks (whose shapes
// must be the op's m, k, n and batch), a collective over the op's mesh axes
// moves or sums the blocks of each group (its size must be the op's bytes), a
// send hands each pair's block to its destination, an elementwise op applies
// its kernel (RMSNorm, residual add, SwiGLU or GeLU, causally masked softmax,
// and their backward passes). The verifier knows the math of each kernel name;
// the sequence, the shapes and the collectives come from the lowering. The layer
// outputs, the input gradients and the weight gradients (after the FSDP and
// data-parallel reductions, summed over the replicas' inputs) are compared with
// the unsharded layers. The embedding, head, loss and optimizer are skipped: the
// first layer gets a random input, the last a random output gradient.
#include <cstdint>
#include <string>

#include "verify/verifier.hpp"
#include "workloads/workload.hpp"

namespace meshsim::verify {

// One row per checked quantity ("L0 output", "L0 grad Wqkv", ...; status "ok" or
// "FAILED", max_error the max relative error, scale the largest reference
// value), one per op that failed (status "FAILED", detail why), and "skipped"
// rows for what is not executed. dims: the model's and the plan's sizes.
Report verify_training(const workloads::Workload& w);
std::string format_training_report(const Report& r);

// Throws InputError ("FILE:/training: ...") when --verify cannot check this
// training step: too big to execute in double precision, or a feature the
// verifier does not model (biases, mixture of experts, context parallelism,
// collective matmuls).
void check_training_verifiable(const workloads::Workload& w);

namespace detail {
// The unsharded reference layer's analytic gradients (inputs, every weight)
// against central finite differences of <dY, layer(X)>: the max relative error
// (tests hold it small, so the reference the lowering is compared with is right).
double reference_gradient_error(const workloads::ModelSpec& model, std::uint64_t microbatch, bool causal);
}  // namespace detail

}  // namespace meshsim::verify
