// meshsim sweep: the command line of sweeps (sweep.hpp does the work).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <exception>
#include <new>
#include <optional>

#include "base/error.hpp"
#include "base/frames.hpp"
#include "driver/simulate.hpp"
#include "studies/sweep.hpp"
#include "tools/meshsim/commands.hpp"
#include "tools/meshsim/parallel.hpp"
#include "tools/meshsim/progress.hpp"
#include "topology/preset.hpp"

namespace meshsim::cli {

namespace {

using studies::Measured;
using studies::PointResult;
using studies::Sweep;
using studies::SweepPoint;
using studies::SweepSpec;

struct SweepOptions {
  std::string workload, op, bytes, csv, json, plot, measured, workloads_dir, calibration;
  std::vector<std::string> axes, meshes, presets, algorithms;
  bool quiet = false;
};

SweepSpec spec_of(const SweepOptions& o) {
  SweepSpec s;
  s.workload = o.workload;
  s.op_kind = o.op;
  s.op_axes = o.axes;
  if (!o.bytes.empty()) s.bytes = studies::parse_bytes_range(o.bytes);
  for (const std::string& m : o.meshes) s.meshes.push_back(studies::parse_mesh_shape(m));
  s.presets = o.presets;
  s.algorithms = o.algorithms;
  s.calibration = o.calibration;
  return s;
}

// Every point's outcome, on every rank (share_items), as frames (base/frames.hpp):
// "ok" and the point (studies::encode_point), or "error" and why; after its
// first failure a rank skips the rest of its points ("skipped").
std::vector<std::string> simulate_points(const Sweep& sweep, const Parallel& par, Progress& progress) {
  bool failed = false;
  std::vector<std::string> texts =
      share_items(par, sweep.points().size(), [&](std::size_t i, std::size_t done, std::size_t mine) {
        if (failed) return pack_texts({"skipped"});
        const SweepPoint& p = sweep.points()[i];
        progress.set_points(done, mine);
        std::string error;
        try {
          driver::SimulateOptions options;
          options.progress = progress.hook();
          return pack_texts({"ok", studies::encode_point(studies::simulate_point(sweep, p, options))});
        } catch (const InputError& e) {
          error = fmt::format("{} (sweep point {}: {})", e.what(), p.index, p.label());
        } catch (const Error& e) {
          error = e.what();
        } catch (const std::bad_alloc&) {
          error = fmt::format("out of memory (sweep point {}: {})", p.index, p.label());
        } catch (const std::exception& e) {  // never thrown past a rank: the others would wait for it
          error = fmt::format("internal error: {} (sweep point {}: {})", e.what(), p.index, p.label());
        }
        failed = true;
        return pack_texts({"error", error});
      });
  progress.clear();
  return texts;
}

int run_sweep(const SweepOptions& o) {
  // Everything a rank can get wrong on its own is checked on every rank before
  // any simulation and agreed on (each node reads its own files): the first
  // failure by rank fails every rank, and only rank 0 says so (the ranks' rule
  // of exit codes: guarded_rank, parallel.hpp).
  const std::unique_ptr<Parallel> par = join_ranks();
  if (!par) return 1;
  const bool root = par->rank() == 0;
  std::optional<Sweep> checked;
  std::vector<Measured> measured;
  const std::string early = agreed_error(*par, [&] {
    if (!o.measured.empty() && o.plot.empty()) throw Error("--measured: needs --plot PREFIX");
    if (!o.workload.empty()) {
      for (const auto& [flag, path] : {std::pair{"--csv", o.csv}, std::pair{"--json", o.json}})
        if (!path.empty() && path != "-" && same_file(path, o.workload))
          throw Error(fmt::format("{}: '{}' is the workload file; it would be overwritten", flag, path));
    }
    if (!o.csv.empty() && !o.json.empty() && o.csv != "-" && same_file(o.csv, o.json))
      throw Error("--json: '" + o.json + "' is also the --csv output; give them different files");
    if (o.csv == "-" && o.json == "-") throw Error("--json: only one of --csv and --json can go to stdout ('-')");
    checked.emplace(spec_of(o));
    for (const SweepPoint& p : checked->points()) (void)checked->workload(p);
    if (!o.measured.empty()) {
      // With --op on one preset and mesh, the points of that collective on that system
      // (a TPU mesh axis per hardware axis: X, Y, Z are x, y, z).
      std::function<bool(const calibrate::MeasuredPoint&)> keep;
      if (!o.op.empty() && o.presets.size() == 1 && o.meshes.size() == 1) {
        const std::vector<int> mesh = studies::parse_mesh_shape(o.meshes.front());
        std::vector<std::string> axes = o.axes;
        if (axes.empty())
          for (std::size_t i = 0; i < mesh.size(); ++i) axes.push_back(std::string(1, "XYZ"[i]));
        std::string shape, joined;
        for (std::size_t i = 0; i < mesh.size(); ++i) shape += (i ? "x" : "") + std::to_string(mesh[i]);
        for (std::size_t i = 0; i < axes.size(); ++i)
          joined += (i ? "+" : "") + std::string(1, static_cast<char>(std::tolower(axes[i].front())));
        const bool tpu = topology::find_preset(o.presets.front()) != nullptr;
        keep = [op = o.op, tpu, shape, joined](const calibrate::MeasuredPoint& p) {
          return kind_name(p.kind) == op && (!tpu || (p.topology == shape && p.axes == joined));
        };
      }
      measured = studies::read_measured(o.measured, o.presets.empty() ? std::string() : o.presets.front(), keep);
    }
  });
  if (!early.empty()) return shared_failure(*par, early);
  // A point's failure comes back in its text, and rank 0 says the first; what
  // else fails is the rank's own (the others write nothing).
  return guarded_rank(*par, false, [&] {
    const Sweep& sweep = *checked;

    const bool to_stdout = o.csv == "-" || o.json == "-";
    Progress progress(o.quiet || !root);
    const std::vector<std::string> texts = simulate_points(sweep, *par, progress);
    // A point's failure is in every rank's texts: rank 0 prints the first and
    // fails the job; the others end with 0 (see above).
    if (!root) return kReportedByRank0;
    std::vector<PointResult> results;
    std::string first_error;
    std::size_t error_point = SIZE_MAX;
    for (std::size_t i = 0; i < texts.size(); ++i) {
      const std::optional<std::vector<std::string>> entry = unpack_texts(texts[i]);
      MESHSIM_ASSERT(entry && !entry->empty(), "a point's outcome as simulate_points wrote it");
      if (entry->front() == "error" && entry->size() == 2 && i < error_point) {
        error_point = i;
        first_error = (*entry)[1];
      }
      if (entry->front() == "ok" && entry->size() == 2)
        results.push_back(studies::decode_point(sweep.points()[i], (*entry)[1]));
    }
    if (error_point != SIZE_MAX) return fail(first_error);
    std::sort(results.begin(), results.end(),
              [](const PointResult& a, const PointResult& b) { return a.point.index < b.point.index; });
    if (results.size() != sweep.points().size())
      throw Error(fmt::format("sweep: {} of {} points came back", results.size(), sweep.points().size()));

    if (!o.quiet && !to_stdout) std::fputs(studies::format_sweep_table(sweep, results).c_str(), stdout);
    if (!o.csv.empty()) write_output(o.csv, studies::format_sweep_csv(results));
    if (!o.json.empty()) write_output(o.json, studies::format_sweep_json(sweep, results));
    if (!o.workloads_dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(o.workloads_dir, ec);
      if (ec) throw Error(o.workloads_dir + ": cannot create folder: " + ec.message());
      for (const SweepPoint& p : sweep.points())
        write_output((std::filesystem::path(o.workloads_dir) / fmt::format("point_{}.json", p.index)).string(),
                   sweep.workload_text(p));
    }
    if (!o.plot.empty()) studies::plot_sweep(o.plot, results, measured);
    return 0;
  });
}

}  // namespace

Subcommand add_sweep_command(CLI::App& app) {
  auto o = std::make_shared<SweepOptions>();
  CLI::App* sweep = app.add_subcommand(
      "sweep",
      "Run a workload, or one collective given by flags, over ranges of bytes, mesh shapes, presets and GPU "
      "algorithms; print a table in the manner of nccl-tests and write CSV, JSON and plots. Under mpirun the points "
      "are shared between the ranks and rank 0 writes the results (identical to one process)");
  sweep->add_option("WORKLOAD", o->workload,
                    "Workload JSON file; a point is this workload with the swept values put in (docs/WORKLOAD.md)");
  sweep->add_option("--op", o->op, "Instead of a file: the collective to sweep (all_gather, all_reduce, "
                                   "reduce_scatter, all_to_all), with --preset, --mesh and --bytes")
      ->option_text("KIND");
  sweep->add_option("--axes", o->axes, "With --op: its mesh axes (the mesh axes are X, Y, Z; default: all)")
      ->delimiter(',')
      ->option_text("X,...");
  sweep->add_option("--bytes", o->bytes,
                    "Set the \"bytes\" of every op that has one to FROM, FROM*FACTOR, ... up to TO (sizes such as "
                    "1024, 64K, 1M, 1G with K = 1024; FACTOR default 2)")
      ->option_text("FROM[:TO[:FACTOR]]");
  sweep->add_option("--mesh", o->meshes,
                    "Mesh shapes to sweep, e.g. 16,4x4,8x16: the sizes of the mesh axes in order (a workload's "
                    "\"topology\" is then dropped: one hardware axis per mesh axis)")
      ->delimiter(',')
      ->option_text("SHAPE,...");
  sweep->add_option("--preset", o->presets, "Hardware presets to sweep, e.g. tpu-v5e,tpu-v6e (overrides kept)")
      ->delimiter(',')
      ->option_text("NAME,...");
  sweep->add_option("--algorithm", o->algorithms,
                    "GPU algorithms or TPU torus schedules to sweep: ring (set on all-gathers, reduce-scatters, all-reduces), tree, nvls, nvls_tree, hierarchical (all-reduces), direct (all-to-alls, all-reduces), auto (every collective: NCCL's choice for an all-reduce, else the fastest by closed form, or the balanced schedule); on a TPU torus balanced or equal (all-gathers, reduce-scatters, all-reduces: how several axes share the data)")
      ->delimiter(',')
      ->option_text("NAME,...");
  sweep->add_option("--csv", o->csv, "Write one row per point and op as CSV to FILE ('-' for stdout; fields: docs/SWEEPS.md)")
      ->option_text("FILE");
  sweep->add_option("--json", o->json, "Write the sweep as JSON to FILE ('-' for stdout): each point's "
                                       "`meshsim run --json` document")
      ->option_text("FILE");
  sweep->add_option("--plot", o->plot,
                    "Draw PREFIX.png and PREFIX.svg with gnuplot (time and bus bandwidth against bytes beside the "
                    "closed forms, knee marked); PREFIX.dat and PREFIX.gp are kept to redraw")
      ->option_text("PREFIX");
  sweep->add_option("--measured", o->measured,
                    "With --plot: measured points to draw too: lines 'bytes,time_us', or points (CSV, JSON) or an "
                    "nccl-tests log as calibrate --from reads them (docs/CALIBRATION.md; a log runs on --preset)")
      ->option_text("FILE");
  sweep->add_option("--calibration", o->calibration,
                    "Simulate every point twice, with the presets and with this calibration (meshsim calibrate): "
                    "the table, CSV, JSON and plot show both")
      ->option_text("FILE");
  sweep->add_option("--workloads", o->workloads_dir,
                    "Also write each point's workload to DIR/point_N.json (`meshsim run` on it gives the point's rows)")
      ->option_text("DIR");
  sweep->add_flag("-q,--quiet", o->quiet, "Do not print the table or the progress line");
  return {sweep, [o] { return run_sweep(*o); }};
}

}  // namespace meshsim::cli
