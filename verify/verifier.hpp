#pragma once
// Proves a lowering numerically. Every dimension is shrunk to the smallest size
// its splits allow, every declared array is filled with seeded random values,
// and the lowered ops run chip by chip: each chip holds its real shard, a gather
// copies the blocks it receives from the chips of its group, a reduction adds
// them up, a local matmul multiplies the chip's shards. After every op whose
// result is complete (not partial sums), every chip's shard is compared with the
// matching block of the unsharded computation.
#include <cstdint>
#include <string>
#include <vector>

#include "workloads/workload.hpp"

namespace meshsim::verify {

struct OpCheck {
  std::string op;
  std::string status;   // "ok", "FAILED", "partial sums", "no data", "not run" (after a failure)
  double max_error = 0;  // max |shard - expected| over chips and elements
  double scale = 0;      // max |expected|
  std::string detail;
};

struct Report {
  std::vector<OpCheck> ops;
  std::vector<std::string> problems;  // arrays left as partial sums, ...
  std::vector<std::pair<std::string, std::uint64_t>> dims;  // the small sizes used
  bool ok() const;
};

Report verify(const workloads::Workload& w);
std::string format_report(const Report& r);

}  // namespace meshsim::verify
