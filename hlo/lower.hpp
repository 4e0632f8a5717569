#pragma once
// An XLA HLO module lowered into a meshsim workload (docs/HLO.md): the ENTRY
// computation's instructions in their scheduled order on every device, while
// loops unrolled by their known trip counts, calls inlined; dots (and fusions
// holding dots) as local matmuls, other fusions as HBM-bound kernels of their
// operands' and result's bytes; all-gather, all-reduce, reduce-scatter,
// all-to-all and collective-permute (and their async -start/-done pairs, which
// bound what overlaps) as collectives and sends: a collective whose groups are
// the chips along a set of the topology's axes as that axis collective, any
// other as a collective over its groups of chips (workloads::CollectiveOp::
// groups). Device d is chip d of the topology (the x axis fastest, as TPU device
// ids) unless the options give each device's chip. Everything else is skipped
// and counted.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hlo/hlo.hpp"
#include "workloads/imported.hpp"
#include "workloads/workload.hpp"

namespace meshsim::hlo {

// The system (a TPU preset, the slice's shape, its wraparound), and:
struct ImportOptions : workloads::ImportSystem {
  // The chip of each device id (a permutation of the chips); empty: device d
  // is chip d.
  std::vector<int> devices;
  // The trips of a while loop whose dump gives no known_trip_count; none: such
  // a loop is an error.
  std::optional<std::int64_t> trip_count;
};

struct ImportReport {
  std::uint64_t instructions = 0;  // visited (a loop's body once per trip)
  std::map<std::string, std::uint64_t> skipped;  // by opcode
  std::uint64_t matmuls = 0, kernels = 0, collectives = 0, sends = 0;
  std::uint64_t grouped = 0;  // of the collectives, those over groups that are not axes
  std::uint64_t trivial = 0;  // collectives over groups of one device: nothing to move
  std::uint64_t assumed_trips = 0;  // while loops run --trip-count times (no known_trip_count)
  // A module whose HloModule line gives no device count: the topology's chips,
  // as "replicas" or "partitions"; empty when the module gives its count.
  std::string assumed_devices;
  std::int64_t devices = 0;
  std::string summary() const;  // "lowered 12 matmuls, ...; skipped 40 instructions: 20 get-tuple-element, ..."
};

// InputError at the dump's line for what cannot be lowered: replica groups of
// different sizes, a while loop without a known trip count (and no
// `trip_count`), a module whose device count is not the topology's chip count;
// at the options for a bad preset or shape. A module that gives no device count
// (XLA's tests, torch_xla's dumps) runs on the topology's chips: as partitions
// when a collective has a channel_id (SPMD), else as replicas.
workloads::Workload import_module(const Module& m, const ImportOptions& o, ImportReport* report = nullptr);

// Whether the file's first non-blank line (not a // comment) starts with "HloModule".
bool is_hlo_file(const std::string& path);
// Whether the file is MLIR (StableHLO, MHLO): its first such line starts with
// "module" or "func.func". meshsim reads HLO text, not MLIR.
bool is_mlir_file(const std::string& path);

}  // namespace meshsim::hlo
