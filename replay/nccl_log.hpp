#pragma once
// What NCCL says it chose: the algorithm and protocol of each collective, from
// the line its tuner logs at every launch (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=TUNING;
// printed by the communicator's rank 0).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace meshsim::replay {

// NCCL's names, as its own log spells them: algorithm TREE, RING, COLLNET_DIRECT,
// COLLNET_CHAIN, NVLS, NVLS_TREE or PAT; protocol LL, LL128 or SIMPLE.
struct NcclChoice {
  std::string algorithm, protocol;
};

// One line of NCCL's log, in either form NCCL has printed:
//   "... NCCL INFO AllReduce: 4096 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..1}" (2.19 on)
//   "... NCCL INFO 4096 Bytes -> Algo 0 proto 0 time 12.3"   (before: tuner enum numbers)
// None for any other line.
std::optional<NcclChoice> parse_nccl_tuning_line(std::string_view line);

// Asks NCCL, through its environment and before it first runs, to log its choices
// to a new scratch file, and reads them back op by op. It stays out of the way when
// the user set NCCL_DEBUG or NCCL_DEBUG_FILE (then nothing is read). Construct it
// before MPI starts (its threads, and MPI's own use of NCCL, read the environment)
// and before the CUDA backend first calls NCCL; one per process. Under mpirun each
// process reads its own file: NCCL logs a collective's choice from the communicator's
// rank 0, and chip 0 (MPI rank 0, which reports) is rank 0 of its group in every op.
class NcclTuningLog {
 public:
  NcclTuningLog();
  ~NcclTuningLog();
  NcclTuningLog(const NcclTuningLog&) = delete;
  NcclTuningLog& operator=(const NcclTuningLog&) = delete;

  bool active() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  // The last choice logged since the previous call (none if NCCL logged none).
  std::optional<NcclChoice> next();

 private:
  std::string path_;
  std::uint64_t offset_ = 0;
};

}  // namespace meshsim::replay
