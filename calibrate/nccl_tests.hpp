#pragma once
// The tables NVIDIA's nccl-tests print (all_reduce_perf, all_gather_perf,
// reduce_scatter_perf, alltoall_perf, sendrecv_perf, broadcast_perf, reduce_perf),
// read as measurements. What the parser relies on, from nccl-tests' own printing:
//
//   # Collective test starting: all_reduce_perf          (2025 on; the program's name)
//   # nThread 1 nGpus 8 minBytes 8 maxBytes ... validation: 1 graph: 0
//   # Using devices
//   #  Rank  0 Group  0 Pid  4242 on     node-a device  0 [0000:18:00] NVIDIA H100 80GB HBM3
//   #
//   #                                    out-of-place                       in-place
//   #       size  count  type  redop  root   time  algbw  busbw #wrong   time  algbw  busbw #wrong
//   #        (B) (elements)                  (us) (GB/s) (GB/s)           (us) (GB/s) (GB/s)
//          8388608  2097152  float  sum  -1  45.10  186.00  325.50  0  44.80  187.24  327.67  0
//   # Out of bounds values : 0 OK
//   # Avg bus bandwidth    : 123.4
//
// size is bytes (for all_gather the gathered total, for reduce_scatter and
// alltoall each rank's whole send buffer), time microseconds, algbw and busbw
// 10^9 bytes/s. The table header names the columns, so both column sets are read:
// the one every test prints since 2022 (size count type redop root, "#wrong": a
// count of wrong elements, N/A under -c 0) and the per-test sets of 2019-2022
// (all_gather: no redop, broadcast: root only, ...; "error": the largest
// deviation, judged by the "Out of bounds values" footer), with -C's "cputime",
// -I's per-iteration columns and -S's timestamps. The 2017-2018 tables ("bytes N",
// times in ms) are refused.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meshsim::calibrate {

// One data line of a table.
struct NcclTestsRow {
  std::uint64_t bytes = 0;  // the 'size' column
  std::uint64_t count = 0;
  std::string type, redop;                            // as printed; redop empty when the table has no redop column
  double out_of_place_us = 0, in_place_us = 0;        // in_place 0 when the table has none
  double out_of_place_busbw = 0, in_place_busbw = 0;  // GB/s as printed
  int line = 0;                                       // 1-based line number in the file
};

// One test: its table and what the lines before it say.
struct NcclTestsLog {
  // all_reduce, all_gather, reduce_scatter, all_to_all, send (sendrecv_perf),
  // broadcast or reduce; empty when the log does not say (before 2025).
  std::string collective;
  // The collective of the one nccl-tests program the file names elsewhere (a
  // command line echoed before the output, "> ./build/all_reduce_perf -b 8 ...");
  // empty when it names none or several.
  std::string named_program;
  // The algorithm and protocol the run forced (NCCL's "NCCL_ALGO set by
  // environment to Ring" / "NCCL_PROTO ..." lines before the table), as
  // meshsim names them (ring, tree, nvls, nvls_tree; simple, ll, ll128); empty:
  // NCCL's own choice, or a value meshsim cannot follow (a list, an exclusion).
  std::string algorithm, protocol;
  int ranks = 0;       // from the '#  Rank' lines (0 if none are printed)
  int nodes = 0;       // distinct host names among those lines (0 if none)
  std::string device;  // rank 0's device, e.g. "NVIDIA H100 80GB HBM3" ("" if none)
  std::vector<NcclTestsRow> rows;
};

// Parses one log: one NcclTestsLog per table, in order (a script may run several
// tests into one file). Lines outside the tables (NCCL INFO lines, blank lines,
// other comments) are skipped. Output tagged by mpirun (--tag-output:
// "[1,0]<stdout>:" before each line, and again wherever a process's writes
// split a line) is read as rank 0 printed it: the tags removed, other ranks'
// lines skipped. Malformed input throws InputError whose what() reads
// "FILE:LINE: message"; `file` is used only in messages. A run that reports wrong
// results (a non-zero #wrong, a FAILED "Out of bounds values", a "Test ... failure"
// line) is refused: its times are not measurements of a working system.
std::vector<NcclTestsLog> parse_nccl_tests(std::string_view text, const std::string& file);

// The meshsim name of an nccl-tests program or collective: "all_reduce_perf" (with
// or without a directory or a NAME_SUFFIX such as "_mpi"), "all_reduce" or NCCL's
// "AllReduce" -> "all_reduce"; "alltoall_perf" -> "all_to_all"; "sendrecv_perf" ->
// "send"; also broadcast and reduce. None for anything else (gather, scatter,
// hypercube, alltoallv, ...).
std::optional<std::string> nccl_tests_collective(std::string_view name);

}  // namespace meshsim::calibrate
