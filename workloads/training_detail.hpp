#pragma once
// Internal to workloads/: the entry points the builder (build.cpp) calls to
// check and lower a training step.
#include <cstdint>

#include "base/error.hpp"
#include "workloads/training.hpp"
#include "workloads/training_formulas.hpp"
#include "workloads/workload.hpp"

namespace meshsim::workloads::detail {

// The most ops a training step may lower to (a 70B model's step with 32
// microbatches per replica is about 100,000).
constexpr std::uint64_t kMaxTrainingOps = std::uint64_t{1} << 21;
// The most bytes a step's ring steps may hold in chip pairs (each a send
// pairing every chip of its stage with its neighbour): 2 GiB.
constexpr std::uint64_t kMaxRingPairBytes = std::uint64_t{1} << 31;

// Sets t's closed forms (t.formulas); throws InputError at `where` when the
// model does not fit in HBM and allow_oom is off, or the step would lower to
// more than kMaxTrainingOps ops or more than kMaxRingPairBytes of ring steps.
void check_training(const Workload& w, Training& t, const SourceRef& where);
// Appends the step's ops to w.ops and fills t's per-op roles and stages (after
// check_training).
void lower_training(Workload& w, Training& t, const SourceRef& where);
// With replicated KV heads: the last tensor axes whose sizes multiply to the
// replicas of a head (t.kv_replicas consecutive tensor-parallel ranks hold
// it), over which its gradients are summed; empty when no such axes exist (the
// replicas are then explicit groups of chips: a TPU torus only).
std::vector<int> kv_replica_axes(const Workload& w, const Training& t);

}  // namespace meshsim::workloads::detail
