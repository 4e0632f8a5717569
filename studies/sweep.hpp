#pragma once
// meshsim sweep (a study): one workload run over ranges of bytes, mesh shapes, presets and
// GPU algorithms. A point is the base workload's spec (read by the JSON
// frontend, with the point's preset) with those values put in
// (workloads::apply_edits), built and checked by the same builder as `meshsim
// run` (so it is validated exactly like a file), simulated, and reported by
// the same report code (format_json).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/error.hpp"
#include "calibrate/calibration.hpp"
#include "calibrate/measured.hpp"
#include "driver/simulate.hpp"
#include "reports/report.hpp"
#include "workloads/spec.hpp"
#include "workloads/workload.hpp"

namespace meshsim::studies {

struct SweepSpec {
  std::string workload;               // a workload file; empty: the collective below
  std::string op_kind;                // with no file: all_gather, all_reduce, reduce_scatter, all_to_all
  std::vector<std::string> op_axes;   // its mesh axes (default: every mesh axis)
  std::vector<std::uint64_t> bytes;   // empty: as written
  std::vector<std::vector<int>> meshes;
  std::vector<std::string> presets;
  // "auto": no "algorithm" key (NCCL's choice for an all-reduce, else the fastest by closed form)
  std::vector<std::string> algorithms;
  std::string calibration;  // a calibration file: every point also simulated with it
};

struct SweepPoint {
  std::size_t index = 0;
  std::string preset;               // "": as written
  std::vector<int> mesh;            // empty: as written
  std::string algorithm;            // "": as written
  std::optional<std::uint64_t> bytes;
  bool calibrated = false;          // simulated with the sweep's calibration
  std::string label() const;        // "preset=tpu-v5e mesh=4x4 bytes=1024"
  workloads::WorkloadEdits edits() const;
};

// What one point gave, as `meshsim run --json` reports its workload.
struct PointResult {
  SweepPoint point;
  std::string preset;                // its hardware's preset
  std::vector<int> mesh;             // its mesh axes' sizes
  std::vector<reports::OpRecord> ops;
  std::string run;                   // the --json document (format_json)
};

class Sweep {
 public:
  // Reads and checks the base workload (errors as `meshsim run` gives them) and
  // lists the points: presets outermost, then meshes, algorithms, bytes.
  explicit Sweep(SweepSpec spec);
  const std::vector<SweepPoint>& points() const { return points_; }
  const SweepSpec& spec() const { return spec_; }
  // The point's workload, parsed and validated (and calibrated for a calibrated
  // point); an InputError names the point.
  workloads::Workload workload(const SweepPoint& p) const;
  // The point's workload as JSON text (what `meshsim run` would read for it;
  // tests/tools/check_sweep.py holds it to the workload above).
  std::string workload_text(const SweepPoint& p) const;

 private:
  workloads::WorkloadSpec collective_spec(const SweepPoint& p) const;
  SweepSpec spec_;
  std::string file_;  // for errors: the workload path, or "sweep" for a collective from flags
  std::string text_;  // the workload file's text
  // The workload file read once per preset (a preset decides which hardware
  // and topology keys the file may have): its spec, or the error reading it for
  // that preset gave (each point of the preset reports it, naming the point).
  std::map<std::string, std::variant<workloads::WorkloadSpec, InputError>> specs_;
  std::vector<SweepPoint> points_;
  std::shared_ptr<const calibrate::Calibration> calibration_;
};

// The point simulated: its workload built (Sweep::workload) and run.
PointResult simulate_point(const Sweep& s, const SweepPoint& p, const driver::SimulateOptions& options);
// A result as text for the ranks of an MPI run to pass around, and back
// (exactly: every double reads back to the same double).
std::string encode_point(const PointResult& r);
PointResult decode_point(const SweepPoint& p, std::string_view text);

// "1024", "64K", "1M", "1G" (K = 2^10, as nccl-tests) as bytes; nullopt when malformed.
std::optional<std::uint64_t> parse_size(const std::string& text);
// --bytes FROM[:TO[:FACTOR]]: FROM, FROM*FACTOR, ... up to TO (FACTOR default 2).
std::vector<std::uint64_t> parse_bytes_range(const std::string& text);
// --mesh 16 or 8x16 (sizes of the mesh axes in order).
std::vector<int> parse_mesh_shape(const std::string& text);

// Reports of the gathered results (every rank's, in point order).
std::string format_sweep_table(const Sweep& s, const std::vector<PointResult>& results);
std::string preset_label(const PointResult& r);  // "tpu-v5e", "tpu-v5e calibrated"
std::string format_sweep_csv(const std::vector<PointResult>& results);
std::string format_sweep_json(const Sweep& s, const std::vector<PointResult>& results);

// Measured points to plot beside the simulation: "bytes,time_us" per line (a
// header line is allowed, "#" starts a comment), or any file `calibrate --from`
// reads (docs/CALIBRATION.md: points CSV or JSON, nccl-tests logs, on
// `hardware` for logs).
struct Measured {
  std::uint64_t bytes = 0;
  double time_us = 0;
};
// `keep` selects the points of such a file that belong to the plotted curve.
std::vector<Measured> read_measured(const std::string& path, const std::string& hardware = "",
                                    const std::function<bool(const calibrate::MeasuredPoint&)>& keep = {});

// Writes PREFIX.dat and PREFIX.gp and runs gnuplot to draw PREFIX.png and
// PREFIX.svg: time and bus bandwidth against bytes on log axes, the simulated
// points beside the closed form's latency and bandwidth terms and their max,
// the knee marked, and the measured points when given.
void plot_sweep(const std::string& prefix, const std::vector<PointResult>& results,
                const std::vector<Measured>& measured);

}  // namespace meshsim::studies
