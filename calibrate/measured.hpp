#pragma once
// Measurements of collectives made elsewhere (docs/CALIBRATION.md): one point is
// one collective of one size on one system, with its measured time. They come
// from a documented CSV or JSON file of points or from nccl-tests logs, and
// meshsim fits its fabric terms to them by simulating each point
// (calibrate/fit_fabric.hpp). Errors are InputError "FILE:LINE: message" (CSV,
// logs) or "FILE:/json/pointer: message" (JSON).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/op_kind.hpp"
#include "workloads/workload.hpp"

namespace meshsim::calibrate {

struct MeasuredPoint {
  OpKind kind = OpKind::AllReduce;
  std::string hardware;     // a preset: tpu-v5e, h100-dgx, ...
  std::string topology;     // TPU: the slice shape "8x16"; GPU: the number of whole nodes "2"
  std::string axes;         // TPU: hardware axes joined by '+' ("y", "x+y"); GPU: all, gpu or node
  std::uint64_t bytes = 0;  // V as docs/WORKLOAD.md defines it for the kind (nccl-tests' "size"; x P for all_to_all)
  // GPU: the NCCL algorithm and protocol the measurement forced (ring, tree,
  // nvls, nvls_tree; simple, ll, ll128); empty: NCCL's own choice.
  std::string algorithm, protocol;
  double time_s = 0;        // measured (a median)
  double spread_s = 0;      // optional: its spread (reported, not weighted)
  std::string file, pointer;  // where it was read: a line number ("12") or a JSON pointer ("/points/3")
  std::string where() const;  // "FILE:POINTER"
};

// The workload that runs the point alone on its system (the point's hardware
// preset, its topology, one op over its axes). InputError (at the point) when
// the point names an unknown preset, an impossible shape or axes.
workloads::Workload point_workload(const MeasuredPoint& p);

// A CSV file: a header line naming the columns kind, hardware, topology, axes,
// bytes, time_s and optionally spread_s (any order), then one point per line;
// blank lines and lines starting with '#' are skipped.
std::vector<MeasuredPoint> parse_points_csv(std::string_view text, const std::string& file);
// A JSON file: {"points": [{"kind": ..., "hardware": ..., "topology": ..., "axes": ...,
// "bytes": ..., "time_s": ..., "spread_s": ...}, ...]}.
std::vector<MeasuredPoint> parse_points_json(std::string_view text, const std::string& file);

// nccl-tests logs: every table row of every test in the file is a point (the
// out-of-place time), on `hardware` with `nodes` whole nodes (0: as many as the
// log's rank lines name hosts; 1 when it names none) and all the GPUs. A
// table's collective: its "# Collective test starting" line, else `collective`,
// else the one nccl-tests program the log names ("> ./build/all_reduce_perf"),
// else the one collective the file's name names ("..._all_reduce_ring.out");
// its algorithm and protocol: `algorithm` and `protocol`, else the NCCL_ALGO and
// NCCL_PROTO the log says the run set.
struct NcclTestsContext {
  std::string hardware;
  int nodes = 0;
  std::string collective;           // all_reduce, all_gather, reduce_scatter, all_to_all
  std::string algorithm, protocol;  // as a workload's op names them
};
std::vector<MeasuredPoint> points_from_nccl_tests(std::string_view text, const std::string& file,
                                                  const NcclTestsContext& context);

// By content: JSON ('{' first), an nccl-tests log (a '#' line naming nThread or
// the table's columns), else CSV. An unreadable file is an Error.
std::vector<MeasuredPoint> load_points(const std::string& path, const NcclTestsContext& context);

// Whether the file is one of meshsim's own measurement files (replay --out,
// calibrate --measurements; replay::Measurements reads them) rather than a file
// load_points reads: true for any JSON but a file of points ({"points": ...}
// without "meshsim_measurements"), malformed JSON included, whose reader then
// names what is wrong. An unreadable file is an Error.
bool is_measurements_file(const std::string& path);

}  // namespace meshsim::calibrate
