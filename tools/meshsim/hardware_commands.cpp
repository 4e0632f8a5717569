#include "tools/meshsim/hardware_commands.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>

#include "base/error.hpp"
#include "calibrate/calibration.hpp"
#include "calibrate/fit_fabric.hpp"
#include "calibrate/measured.hpp"
#include "kernels/cuda/device.hpp"
#include "kernels/cuda/watchdog.hpp"
#include "replay/calibrate_from.hpp"
#include "replay/hardware.hpp"
#include "replay/plan.hpp"
#include "tools/meshsim/commands.hpp"
#include "tools/meshsim/parallel.hpp"

namespace meshsim::tool {

namespace {

using cli::same_file;
using cli::write_output;

// Throws Error when an output would overwrite an input or the other output.
void check_outputs(const char* command, const std::vector<std::pair<const char*, std::string>>& inputs,
                   const std::vector<std::pair<const char*, std::string>>& outputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const auto& [flag, path] = outputs[i];
    if (path.empty()) continue;
    for (const auto& [what, input] : inputs)
      if (!input.empty() && same_file(path, input))
        throw Error(fmt::format("{}: {} '{}' is the {}; it would be overwritten", command, flag, path, what));
    for (std::size_t j = 0; j < i; ++j)
      if (!outputs[j].second.empty() && same_file(path, outputs[j].second))
        throw Error(fmt::format("{}: {} '{}' is also the {} output; give them different files", command, flag, path,
                                outputs[j].first));
  }
}

struct Options {
  CLI::App* replay = nullptr;
  CLI::App* calibrate = nullptr;
  CLI::App* compare = nullptr;
  std::string workload, out, trace, calibration, hardware, measurements;
  bool dry_run = false, quick = false, warm_l2 = false;
  int gpus = 8;
  kernels::cuda::Repeat repeat;
  std::vector<std::string> dtypes = {"bf16", "fp32"};
  std::vector<std::string> from;  // calibrate --from: measured points, no GPU
  int nodes = 0;
  std::string collective, algorithm, protocol;  // of nccl-tests logs
};

calibrate::NcclTestsContext log_context(const Options& o) {
  return {o.hardware, o.nodes, o.collective, o.algorithm, o.protocol};
}

// --nodes, --collective, --algorithm and --protocol: what an nccl-tests log may not say.
void add_log_options(CLI::App* app, Options& o, const std::string& with) {
  app->add_option("--nodes", o.nodes,
                  with +
                      "the nodes nccl-tests logs ran on (default: the hosts their rank lines "
                      "name)")
      ->check(CLI::Range(1, 32768));
  app->add_option("--collective", o.collective,
                  with +
                      "the collective of nccl-tests logs that do not name it (no '# Collective test starting' "
                      "line, no program name in the log or its file name)")
      ->check(CLI::IsMember({"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}));
  app->add_option("--algorithm", o.algorithm,
                  with +
                      "the NCCL algorithm the logs' runs forced (NCCL_ALGO; default: the NCCL_ALGO line of the "
                      "log, else NCCL's choice)")
      ->check(CLI::IsMember({"ring", "tree", "nvls", "nvls_tree"}));
  app->add_option("--protocol", o.protocol,
                  with +
                      "the NCCL protocol the logs' runs forced (NCCL_PROTO; default: the NCCL_PROTO line of the "
                      "log, else NCCL's choice)")
      ->check(CLI::IsMember({"simple", "ll", "ll128"}));
}

// Whether any of the nccl-tests log options was given.
bool any_log_option(const Options& o) {
  return o.nodes > 0 || !o.collective.empty() || !o.algorithm.empty() || !o.protocol.empty();
}

// The GPUs to use, or an Error saying plainly why there are none.
kernels::cuda::Probe usable_gpus(const char* command) {
  const kernels::cuda::Probe probe = kernels::cuda::probe();
  if (probe.gpus == 0) throw Error(fmt::format("{}: {}", command, probe.problem));
  return probe;
}

kernels::cuda::Repeat repeat_of(const Options& o) {
  kernels::cuda::Repeat r = o.repeat;
  r.cold_l2 = !o.warm_l2;
  return r;
}

// The tool's MPI ranks as the backend's coordinator (one GPU per process).
class MpiCoordinator final : public kernels::cuda::Coordinator {
 public:
  explicit MpiCoordinator(const cli::Parallel& par) : par_(par) {}
  int rank() const override { return par_.rank(); }
  int size() const override { return par_.size(); }
  void broadcast(std::string& bytes, int root) override { par_.broadcast(bytes, root); }
  double max(double mine) override { return par_.max(mine); }
  std::string first_error(const std::string& mine) override { return par_.first_error(mine); }

 private:
  const cli::Parallel& par_;
};

// Under mpirun: rank r drives GPU (local rank mod visible GPUs) of its node as
// device r of the plan. What can differ between ranks (their GPUs) is agreed
// on before anything runs, so all fail together and rank 0 alone says why.
replay::Measurements replay_ranks(const workloads::Workload& w, const replay::Plan& plan,
                                  const kernels::cuda::Repeat& repeat, const cli::Parallel& par,
                                  replay::NcclTuningLog& nccl_log) {
  const kernels::cuda::Probe probe = kernels::cuda::probe();
  std::string error = probe.gpus == 0 ? fmt::format("replay: rank {}: {}", par.rank(), probe.problem) : "";
  error = par.first_error(error);
  if (!error.empty()) throw Error(error);
  MpiCoordinator coordinator(par);
  std::optional<kernels::cuda::Session> session;
  try {
    session.emplace(coordinator, par.local_rank() % probe.gpus);
  } catch (const Error& e) {
    error = fmt::format("replay: rank {}: {}", par.rank(), e.what());
  }
  error = par.first_error(error);
  if (!error.empty()) throw Error(error);
  return replay::replay_on(w, plan, probe, repeat, &*session, par.size(), &nccl_log);
}

int run_replay(const Options& o) {
  const workloads::Workload w = workloads::load_workload(o.workload);
  const replay::Plan plan = replay::make_plan(w);
  if (o.dry_run) {
    std::fputs(replay::format_plan(w, plan).c_str(), stdout);
    std::fputs(replay::format_steps(w, replay::device_steps(w, plan, o.gpus), o.gpus).c_str(), stdout);
    return 0;
  }
  replay::NcclTuningLog nccl_log;  // before MPI starts and before NCCL first runs
  const cli::Parallel par;         // joins MPI when mpirun started this process
  std::string bad_limit;
  try {
    (void)kernels::cuda::nccl_init_limit();  // read by the backend; checked here first
  } catch (const std::runtime_error& e) {
    bad_limit = par.size() > 1 ? fmt::format("replay: rank {}: {}", par.rank(), e.what())
                               : fmt::format("replay: {}", e.what());
  }
  bad_limit = par.first_error(bad_limit);  // each node's ranks have their own environment
  // Under mpirun a failure is agreed on (every rank fails alike) and rank 0
  // says why (the ranks' rule of exit codes: cli::guarded_rank).
  if (!bad_limit.empty()) return cli::shared_failure(par, bad_limit);
  replay::Measurements m;
  if (par.size() > 1) {
    try {
      m = replay_ranks(w, plan, repeat_of(o), par, nccl_log);
    } catch (const Error& e) {
      return cli::shared_failure(par, e.what());
    }
    if (par.rank() != 0) return cli::kReportedByRank0;  // rank 0 writes, prints and fails if stopped
  } else {
    m = replay::replay(w, plan, usable_gpus("replay"), repeat_of(o), &nccl_log);
  }
  std::fputs(replay::format_replay(w, m, par.size(), repeat_of(o)).c_str(), stdout);
  if (!o.out.empty()) write_output(o.out, replay::format_measurements(m));
  if (!o.trace.empty()) write_output(o.trace, replay::format_replay_trace(w, m));
  if (m.stopped)
    throw Error(fmt::format("replay: a GPU failure ended the replay early (see 'skipped:' above){}",
                            o.out.empty() ? "" : fmt::format("; the ops measured before it are in {}", o.out)));
  return 0;
}

int run_calibrate(const Options& o) {
  replay::NcclTuningLog nccl_log;  // before MPI starts and before NCCL first runs
  {
    const cli::Parallel par;
    if (par.size() > 1)
      return cli::shared_failure(par,
                                 "calibrate: runs in one process on the GPUs it sees (one node); start it without mpirun");
  }
  const kernels::cuda::Probe probe = usable_gpus("calibrate");
  replay::SuiteOptions suite;
  suite.dtypes = o.dtypes;
  suite.quick = o.quick;
  std::vector<std::string> log;
  replay::Measurements m = replay::run_suite(probe, repeat_of(o), suite, log, &nccl_log);
  m.file = o.measurements.empty() ? "(measurements)" : o.measurements;
  for (const std::string& l : log) std::fputs(("measured " + l + "\n").c_str(), stdout);
  for (const std::string& s : m.skipped) std::fputs(("skipped: " + s + "\n").c_str(), stdout);
  if (!o.measurements.empty()) write_output(o.measurements, replay::format_measurements(m));
  std::vector<std::string> not_fitted;
  calibrate::Calibration cal = replay::fit_suite(m, not_fitted);
  cal.file = o.out;
  for (const std::string& s : not_fitted) std::fputs(("not fitted: " + s + "\n").c_str(), stdout);
  write_output(o.out, calibrate::format_calibration(cal));
  std::fputs(fmt::format("wrote {}\n", o.out).c_str(), stdout);
  // A failure that ended the GPU session: what was measured before it is written
  // and fitted, and the command still fails (the suite is incomplete).
  if (m.stopped)
    throw Error(fmt::format("calibrate: a GPU failure ended the suite early (see 'skipped:' above); the {} points "
                            "measured before it are fitted into {}",
                            m.gemm.size() + m.copy.size() + m.collectives.size(), o.out));
  return 0;
}

int run_calibrate_from(const Options& o) {
  replay::FittedFiles fitted = replay::calibrate_from(o.from, log_context(o));
  fitted.calibration.file = o.out;
  write_output(o.out, calibrate::format_calibration(fitted.calibration));
  std::fputs((fitted.report + fmt::format("wrote {}\n", o.out)).c_str(), stdout);
  return 0;
}

int run_compare(const Options& o) {
  if (!calibrate::is_measurements_file(o.measurements)) {
    const std::vector<calibrate::MeasuredPoint> points = calibrate::load_points(o.measurements, log_context(o));
    std::optional<calibrate::Calibration> cal;
    if (!o.calibration.empty()) cal = calibrate::load_calibration(o.calibration);
    std::fputs(calibrate::format_point_comparison(points, cal ? &*cal : nullptr).c_str(), stdout);
    return 0;
  }
  if (any_log_option(o))
    throw Error("compare: --nodes, --collective, --algorithm and --protocol describe nccl-tests logs");
  const replay::Measurements m = replay::load_measurements(o.measurements);
  std::optional<calibrate::Calibration> cal;
  if (!o.calibration.empty()) cal = calibrate::load_calibration(o.calibration);
  std::fputs(replay::format_comparison(m, cal ? &*cal : nullptr, o.hardware).c_str(), stdout);
  return 0;
}

void add_repeat(CLI::App* app, Options& o) {
  app->add_option("--warmups", o.repeat.warmups, "Untimed runs before the timed ones (default 2)")
      ->check(CLI::Range(0, 1000));
  app->add_option("--repetitions", o.repeat.repetitions, "Timed runs per op; the median and spread are reported "
                                                         "(default 5)")
      ->check(CLI::Range(1, 10000));
  app->add_flag("--warm-l2", o.warm_l2,
                "Time with warm caches (as nccl-tests does); by default the L2 cache is flushed before every timed "
                "run, so inputs come from HBM");
}

}  // namespace

std::function<std::optional<int>()> add_hardware_commands(CLI::App& app) {
  auto o = std::make_shared<Options>();
  o->replay = app.add_subcommand(
      "replay", "Replay a workload on the visible GPUs: every local matmul a cuBLAS GEMM, every collective the NCCL "
                "call it lowers to, timed per op; under mpirun one GPU per rank (docs/HARDWARE.md)");
  o->replay->add_option("WORKLOAD", o->workload, "Workload JSON file (format: docs/WORKLOAD.md)")->required();
  o->replay->add_flag("--dry-run", o->dry_run,
                      "Print the plan (every rank's GEMMs and NCCL calls, the communicators) and what --gpus GPUs "
                      "would replay; needs no GPU");
  o->replay->add_option("--gpus", o->gpus, "With --dry-run: the GPUs to plan for (default 8)")
      ->check(CLI::Range(0, 1 << 20));
  o->replay->add_option("--out", o->out, "Write the measurements JSON to FILE")->option_text("FILE");
  o->replay->add_option("--trace", o->trace, "Write a Chrome JSON trace of the replay (ui.perfetto.dev)")
      ->option_text("FILE.json");
  add_repeat(o->replay, *o);

  o->calibrate = app.add_subcommand(
      "calibrate", "Measure the visible GPUs (GEMM grid, HBM copies, collective sweeps with >= 2 GPUs) and fit the "
                   "model's parameters into a calibration file");
  o->calibrate->add_option("--out", o->out, "The calibration JSON to write")->option_text("FILE")->required();
  o->calibrate->add_option("--measurements", o->measurements, "Also write the measurements JSON (for compare)")
      ->option_text("FILE");
  o->calibrate->add_option("--dtypes", o->dtypes, "GEMM dtypes to measure (default bf16,fp32)")
      ->delimiter(',')
      ->check(CLI::IsMember({"bf16", "fp16", "fp32", "int8", "fp8"}));
  o->calibrate->add_flag("--quick", o->quick, "A smaller GEMM grid");
  o->calibrate->add_option("--from", o->from,
                           "Fit the fabric terms (hop latency, link efficiency, fixed cost per collective) to "
                           "measurements made elsewhere, by simulating them; no GPU needed: points (CSV or JSON) or "
                           "nccl-tests logs (docs/CALIBRATION.md)")
      ->option_text("FILE ...");
  o->calibrate->add_option("--hardware", o->hardware, "With --from: the GPU preset nccl-tests logs ran on")
      ->option_text("PRESET");
  add_log_options(o->calibrate, *o, "With --from: ");
  add_repeat(o->calibrate, *o);

  o->compare = app.add_subcommand(
      "compare", "Compare measurements (from replay --out or calibrate --measurements) with the simulator before "
                 "and after calibration: per op or point, errors in percent and their median");
  o->compare->add_option("MEASURED", o->measurements,
                         "Measurements: a JSON file of replay --out or calibrate --measurements, or points (CSV, JSON) "
                         "or an nccl-tests log as calibrate --from reads them (docs/CALIBRATION.md)")
      ->required();
  add_log_options(o->compare, *o, "For an nccl-tests log: ");
  o->compare->add_option("--calibration", o->calibration, "The calibration for the 'after' column")
      ->option_text("FILE");
  o->compare->add_option("--hardware", o->hardware, "GPU preset of the 'before' model of a suite (default: by "
                                                    "device name), or the preset an nccl-tests log ran on")
      ->option_text("PRESET");

  return [o]() -> std::optional<int> {
    if (o->replay->parsed()) {
      check_outputs("replay", {{"workload file", o->workload}}, {{"--out", o->out}, {"--trace", o->trace}});
      if (!o->trace.empty() && !(o->trace.size() > 5 && o->trace.ends_with(".json")))
        throw Error("replay: --trace: expected a file name ending in .json, got '" + o->trace + "'");
      if (!o->dry_run && o->replay->count("--gpus") > 0)
        throw Error("replay: --gpus only applies with --dry-run (a replay uses the visible GPUs)");
      if (o->dry_run && (!o->out.empty() || !o->trace.empty()))
        throw Error("replay: --dry-run measures nothing; --out and --trace need a replay");
      return run_replay(*o);
    }
    if (o->calibrate->parsed()) {
      check_outputs("calibrate", {}, {{"--out", o->out}, {"--measurements", o->measurements}});
      if (!o->from.empty()) {
        if (!o->measurements.empty() || o->quick || o->calibrate->count("--dtypes") > 0)
          throw Error("calibrate: --from fits measurements made elsewhere; --measurements, --dtypes and --quick "
                      "are for measuring the visible GPUs");
        return run_calibrate_from(*o);
      }
      if (!o->hardware.empty() || any_log_option(*o))
        throw Error(
            "calibrate: --hardware, --nodes, --collective, --algorithm and --protocol describe --from's "
            "nccl-tests logs");
      return run_calibrate(*o);
    }
    if (o->compare->parsed()) return run_compare(*o);
    return std::nullopt;
  };
}

void add_calibration_option(CLI::App* run, std::string& path) {
  run->add_option("--calibration", path,
                  "Simulate with the parameters fitted on real hardware (meshsim calibrate): HBM bandwidth, matmul "
                  "times per dtype, link bandwidth and step latency")
      ->option_text("FILE");
}

void apply_calibration_file(workloads::Workload& w, const std::string& path) {
  if (path.empty()) return;
  calibrate::apply_calibration(w, calibrate::load_calibration(path));
}

}  // namespace meshsim::tool
