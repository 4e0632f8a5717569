#pragma once
// A workload written as a Chakra execution trace, one file per chip, for ASTRA-sim
// and for meshsim's own import (docs/CHAKRA.md):
//  - a matmul or elementwise kernel: a COMP_NODE on each of its chips with
//    duration_micros (its roofline time, rounded to the nearest microsecond, at
//    least 1), num_ops (FLOPs) and tensor_size (HBM bytes);
//  - a collective: a COMM_COLL_NODE on each of its chips, comm_type, comm_size
//    (each rank's buffer as ASTRA-sim reads it: V for all-reduce and
//    reduce-scatter, V / group size for all-gather and all-to-all) and pg_name,
//    one process group per group of chips, listed in the comm-group file;
//  - a send: per pair a COMM_SEND_NODE on the source and a COMM_RECV_NODE on the
//    destination, with comm_src, comm_dst, comm_size and the op's index as comm_tag;
//  - dependencies: each node's data_deps are the nodes, on its chip, of the ops
//    its op waits for that run on that chip (through an op that has no node on
//    a chip it runs on, such as a send on its bystanders: what that op waits for).
#include <cstdint>
#include <string>

#include "workloads/workload.hpp"

namespace meshsim::chakra {

struct ExportReport {
  std::uint64_t ranks = 0, nodes = 0, groups = 0;
  std::uint64_t rounded = 0;  // collectives whose V does not divide by its group size (comm_size rounded up)
};

// Writes <prefix>.<chip>.et (.et.gz with `gzip`) for every chip and the
// comm-group file <prefix>.comm_groups.json; Error when a file cannot be written.
ExportReport export_trace(const workloads::Workload& w, const std::string& prefix, bool gzip);

}  // namespace meshsim::chakra
