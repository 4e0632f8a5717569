#pragma once
// A Chakra execution trace (one file per rank, prefix.<rank>.et[.gz]) lowered
// into a workload on a TPU slice or a GPU cluster (docs/CHAKRA.md). Rank r runs
// on chip r (or the chip --devices gives it):
//  - COMP_NODE: a kernel on its rank's chip, of its duration_micros when that is
//    set, else the roofline of num_ops (at the bf16 rate) and tensor_size bytes
//    (HBM); is_cpu_op nodes are host work and skipped. The same kernel on
//    several ranks (one name and cost, waiting for the same ops) is one op;
//  - COMM_COLL_NODE: the k-th collective of a process group (pg_name, whose ranks
//    the comm-group JSON gives; "" or "0" when absent: every rank) on each of its
//    ranks is one collective over their chips: an axis collective when they are
//    the chips along a set of axes, else (TPU) a ring over the group. comm_size
//    is each rank's buffer, as ASTRA-sim reads it: V = comm_size for ALL_REDUCE
//    and REDUCE_SCATTER(_BLOCK), comm_size x ranks for ALL_GATHER (its input
//    shard) and ALL_TO_ALL;
//  - COMM_SEND_NODE / COMM_RECV_NODE: the k-th send from rank s to rank d with a
//    tag and the k-th receive of it are one send of comm_size bytes;
//  - data and control dependencies: an op waits, on each rank, for the ops its
//    nodes there depend on; METADATA, INVALID and the node types meshsim does not
//    simulate (memory, storage, checkpoint) pass their dependencies through.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "workloads/imported.hpp"
#include "workloads/workload.hpp"

namespace meshsim::chakra {

// The system (hardware: a TPU or GPU preset; shape: a TPU slice's, or a GPU
// cluster's node count or node grid; wraparound), and:
struct ImportOptions : workloads::ImportSystem {
  std::vector<int> devices;     // the chip of rank 0, 1, ...; empty: rank r is chip r
  std::string comm_groups;      // the comm-group JSON ({"1": [0, 2], ...}); empty: none
  // Merge the same kernel, collective or send of several ranks or groups into
  // one op (exact: import.cpp, Importer::merge); off: an op per node and group (tests).
  bool merge = true;
};

struct ImportReport {
  std::uint64_t ranks = 0, nodes = 0;
  std::uint64_t kernels = 0, collectives = 0, grouped = 0, sends = 0;  // nodes lowered
  std::uint64_t ops = 0;  // the ops they make (a kernel that several ranks run alike is one op)
  std::map<std::string, std::uint64_t> skipped;  // by reason ("cpu op", "METADATA_NODE", ...)
  std::string summary() const;  // "8 ranks, 120 nodes: lowered 64 kernels, 8 collectives, ...; skipped ..."
};

// The prefix and suffix of a rank file's name: "run/t.3.et.gz" -> {"run/t", ".et.gz"};
// nothing when the name is not <prefix>.<rank>.et or .et.gz.
std::optional<std::pair<std::string, std::string>> rank_file_parts(const std::string& path);

// Reads every rank's file (as many as the topology has chips) and lowers them.
// Error for a missing rank file or one more than the chips; InputError at the
// file and byte for what cannot be lowered (unknown node types, unmatched sends,
// collectives that disagree between ranks, unknown process groups, dependency
// cycles, ...); at the comm-group file's JSON pointer for a bad group.
workloads::Workload import_trace(const std::string& rank_file, const ImportOptions& o, ImportReport* report = nullptr);

}  // namespace meshsim::chakra
