// meshsim run: simulate a workload (JSON), an XLA HLO dump or a Chakra trace and
// print a table per op, a training step's breakdown, JSON, a trace, critical
// paths; --verify executes the lowered program; --engine simgrid and all run
// the cross-check (docs/WORKLOAD.md, docs/OUTPUT.md).
#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "driver/simulate.hpp"
#include "frontends/load.hpp"
#include "reports/report.hpp"
#include "tools/meshsim/commands.hpp"
#include "tools/meshsim/hardware_commands.hpp"
#include "tools/meshsim/limit_options.hpp"
#include "tools/meshsim/progress.hpp"
#include "verify/training_verifier.hpp"
#include "verify/verifier.hpp"
#include "workloads/workload.hpp"

namespace meshsim::cli {

namespace {

// A whole string as a finite decimal number (no leading '+', no trailing text).
std::optional<double> parse_number(std::string_view text) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

// --trace-window FROM:TO (microseconds) as ticks; throws Error when malformed or
// when TO, rounded to picoseconds, is not after FROM.
std::pair<meshsim::Tick, meshsim::Tick> parse_window(const std::string& text) {
  const std::string usage = "--trace-window: expected FROM:TO in microseconds with 0 <= FROM < TO, got '" + text + "'";
  const auto colon = text.find(':');
  if (colon == std::string::npos) throw meshsim::Error(usage);
  const std::optional<double> from = parse_number(std::string_view(text).substr(0, colon));
  const std::optional<double> to = parse_number(std::string_view(text).substr(colon + 1));
  if (!from || !to || !(*from >= 0) || !(*to > *from) || *to > 1e12) throw meshsim::Error(usage);
  const meshsim::Tick a = meshsim::tick_from_seconds(*from * 1e-6), b = meshsim::tick_from_seconds(*to * 1e-6);
  if (b <= a)
    throw meshsim::Error("--trace-window: FROM and TO are the same picosecond, got '" + text + "'");
  return {a, b};
}

// Throws Error when the output paths collide with each other or with the workload.
void check_outputs(const std::string& workload, const std::string& json, const std::string& trace) {
  const bool json_file = !json.empty() && json != "-";
  if (json_file && same_file(json, workload))
    throw meshsim::Error("--json: '" + json + "' is the workload file; it would be overwritten");
  if (!trace.empty() && same_file(trace, workload))
    throw meshsim::Error("--trace: '" + trace + "' is the workload file; it would be overwritten");
  if (json_file && !trace.empty() && same_file(json, trace))
    throw meshsim::Error("--trace: '" + trace + "' is also the --json output; give them different files");
}

// --trace FILE: a .json, .pftrace or .pb file name.
void check_trace_path(const std::string& path) {
  const bool ok = (path.ends_with(".json") && path.size() > 5) || (path.ends_with(".pftrace") && path.size() > 8) ||
                  (path.ends_with(".pb") && path.size() > 3);
  if (!ok)
    throw meshsim::Error("--trace: expected a file name ending in .json, .pftrace or .pb, got '" + path + "'");
}

// What `run` is given on the command line.
struct RunState {
  std::string workload_path, json_path;
  std::size_t links = 0;
  bool quiet = false;
  std::string hlo_hardware, hlo_topology;
  std::vector<int> hlo_devices;
  std::int64_t trip_count = 0;  // 0: not given
  std::vector<int> import_wrap;
  std::string comm_groups;
  bool no_reduce = false;
  unsigned threads = 0;
  bool critical = false;
  std::string trace_path, trace_detail = "hops", trace_window;
  std::vector<std::uint32_t> trace_chips;
  std::size_t trace_max_events = 5'000'000;
  CLI::Option* trace_option = nullptr;
  std::string engine = "native";
  std::vector<std::string> simgrid_config;
  bool verify = false;
  meshsim::driver::Limits limits;
  std::string calibration_path;
};

}  // namespace

namespace {

// The run itself, on what the command line gave.
int run_workload(RunState& st) {
  return guarded([&]() -> int {
    if (st.engine == "native" && !st.simgrid_config.empty())
      throw meshsim::Error("--simgrid-cfg: only with --engine simgrid or all");
    if (st.engine != "native") {
      const char* native_only = st.trace_option->count() > 0 ? "--trace"
                                : st.critical                ? "--critical-path"
                                : st.links > 0               ? "--links"
                                                             : nullptr;
      if (native_only) throw meshsim::Error(std::string(native_only) + ": only with --engine native");
    }
    if (st.trace_option->count() > 0) check_trace_path(st.trace_path);
    check_outputs(st.workload_path, st.json_path, st.trace_path);
    std::pair<meshsim::Tick, meshsim::Tick> window;
    if (!st.trace_window.empty()) window = parse_window(st.trace_window);
    meshsim::frontends::ProgramOptions program;
    program.hardware = st.hlo_hardware;
    program.topology = st.hlo_topology;
    program.wraparound = st.import_wrap;
    program.devices = st.hlo_devices;
    if (st.trip_count > 0) program.trip_count = st.trip_count;
    program.comm_groups = st.comm_groups;
    program.verify = st.verify;
    meshsim::frontends::Program loaded = meshsim::frontends::load_program(st.workload_path, program);
    const std::string imported = loaded.summary;  // an import's summary line
    meshsim::workloads::Workload w = std::move(loaded.workload);
    meshsim::tool::apply_calibration_file(w, st.calibration_path);
    // A training step that --verify cannot execute is refused before simulating.
    if (st.verify && w.training) meshsim::verify::check_training_verifiable(w);
    if (st.critical && w.training)
      throw meshsim::Error("--critical-path: a training step has thousands of ops; its per-stage breakdown says "
                           "where the time goes, and --trace FILE --trace-chips 0 shows one chip's timeline");
    meshsim::driver::SimulateOptions options;
    options.busiest_links = st.links;
    options.simgrid_config = st.simgrid_config;
    options.critical_path = st.critical;
    options.reduce = !st.no_reduce;
    options.threads = st.threads;
    options.limits = st.limits;
    options.trace_path = st.trace_path;
    options.trace.detail = st.trace_detail == "ops"     ? meshsim::traces::Detail::Ops
                           : st.trace_detail == "steps" ? meshsim::traces::Detail::Steps
                                                        : meshsim::traces::Detail::Hops;
    options.trace.chips = st.trace_chips;
    options.trace.max_events = st.trace_max_events;
    if (!st.trace_window.empty()) {
      options.trace.from = window.first;
      options.trace.to = window.second;
    }
    meshsim::cli::Progress progress(st.quiet);
    options.progress = progress.hook();
    const bool json_to_stdout = st.json_path == "-";
    meshsim::driver::RunContext run(w);  // the system, built once, for the runs and their reports
    if (st.engine == "all") {
      const meshsim::driver::RunResult native = meshsim::driver::simulate(w, run, options);
      options.engine = meshsim::driver::EngineKind::SimGrid;
      const meshsim::driver::RunResult simgrid = meshsim::driver::simulate(w, run, options);
      progress.clear();
      if (!st.quiet && !json_to_stdout)
        std::fputs(meshsim::reports::format_comparison(w, run, native, simgrid).c_str(), stdout);
      if (!st.json_path.empty())
        write_output(st.json_path, meshsim::reports::format_comparison_json(w, run, native, simgrid));
    } else {
      if (st.engine == "simgrid") options.engine = meshsim::driver::EngineKind::SimGrid;
      const meshsim::driver::RunResult result = meshsim::driver::simulate(w, run, options);
      progress.clear();
      if (!result.trace_warning.empty()) std::fprintf(stderr, "meshsim: warning: %s\n", result.trace_warning.c_str());
      if (!st.quiet && !json_to_stdout)
        std::fputs((imported + meshsim::reports::format_table(w, run, result)).c_str(), stdout);
      if (!st.json_path.empty()) write_output(st.json_path, meshsim::reports::format_json(w, run, result));
    }
    if (st.verify && w.training) {
      const meshsim::verify::Report report = meshsim::verify::verify_training(w);
      std::fputs(("\n" + meshsim::verify::format_training_report(report)).c_str(), json_to_stdout ? stderr : stdout);
      if (!report.ok())
        return fail(st.workload_path +
                    ": verification failed: the lowered training step does not "
                    "compute the unsharded layers' activations and gradients");
    } else if (st.verify) {
      const meshsim::verify::Report report = meshsim::verify::verify(w);
      std::fputs(("\n" + meshsim::verify::format_report(report)).c_str(), json_to_stdout ? stderr : stdout);
      if (!report.ok())
        return fail(st.workload_path +
                    ": verification failed: the lowered program does not compute "
                    "the unsharded result");
    }
    return 0;
  });
}

}  // namespace

Subcommand add_run_command(CLI::App& app) {
  const auto s = std::make_shared<RunState>();
  CLI::App* run = app.add_subcommand("run", "Simulate a workload and print a table per op");
  run->add_option(
         "WORKLOAD", s->workload_path,
         "Workload JSON file (format: docs/WORKLOAD.md), an XLA HLO text dump (docs/HLO.md), or one rank's file "
         "of a Chakra execution trace, PREFIX.<rank>.et[.gz] (docs/CHAKRA.md); the last two with --hardware and "
         "--topology")
      ->required();
  run->add_option("--hardware", s->hlo_hardware,
                  "An HLO dump's or a Chakra trace's hardware: a TPU preset (tpu-v5e, ...); for a trace also a GPU "
                  "preset (h100-dgx, ...)")
      ->option_text("PRESET");
  run->add_option("--topology", s->hlo_topology,
                  "An HLO dump's or a Chakra trace's system: a TPU slice's shape, e.g. 4x4 or 4x4x4 (device d is chip "
                  "d, x fastest); a GPU cluster's node count, e.g. 2")
      ->option_text("SHAPE");
  run->add_option("--devices", s->hlo_devices,
                  "An HLO dump's device order or a Chakra trace's rank order: the chip of device (rank) 0, 1, ... "
                  "(comma-separated)")
      ->delimiter(',')
      ->option_text("CHIP,...");
  run->add_option("--trip-count", s->trip_count,
                  "An HLO dump's while loops that give no known_trip_count run N trips (default: such a loop is an "
                  "error)")
      ->check(CLI::Range(1, 1 << 20))
      ->option_text("N");
  run->add_option("--wraparound", s->import_wrap,
                  "An HLO dump's or a Chakra trace's TPU slice: per axis 1 (a ring) or 0 (a line), e.g. 1,1 "
                  "(default: the preset's for the shape)")
      ->delimiter(',')
      ->option_text("W,...");
  run->add_option("--comm-groups", s->comm_groups,
                  "A Chakra trace's process groups, as ASTRA-sim takes them: JSON {\"<pg_name>\": [rank, ...], ...}")
      ->option_text("FILE");
  run->add_option("--json", s->json_path,
                  "Also write the results as JSON to FILE ('-' for stdout; fields: docs/OUTPUT.md)")
      ->option_text("FILE");
  run->add_option("--links", s->links, "Also list the N busiest link directions (bytes, busy time)")
      ->option_text("N")
      ->check(CLI::Range(0, 100000));
  run->add_flag("-q,--quiet", s->quiet, "Do not print the table (use with --json)");
  run->add_flag("--no-reduce", s->no_reduce,
                "Simulate every task, even of groups identical to another that shares nothing with it (the same "
                "results, byte for byte: docs/MODEL.md, \"Exact reductions\")");
  run->add_option("--threads", s->threads,
                  "Threads for the simulation: 1, or 2 to split a program into two parts simulated side by side "
                  "whenever it can be (the same results, byte for byte: docs/ARCHITECTURE.md, \"Two threads\"); "
                  "default: 2 for a run of 2^20 tasks or more on a machine with two cores, when its windows hold "
                  "4,096 tasks or more")
      ->option_text("N")
      ->check(CLI::Range(1, 2));
  run->add_flag("--critical-path", s->critical,
                "Also print each op's critical path: the hops and computes its last byte waited for, and the time "
                "on the wire, in hop latency, queued behind other transfers and computing");
  s->trace_option =
      run->add_option(
             "--trace", s->trace_path,
             "Write a Perfetto trace (open it in ui.perfetto.dev): per chip its ops, compute and every link "
             "direction, hop by hop. FILE.json: Chrome JSON; FILE.pftrace (or .pb): Perfetto protobuf, ~5x smaller")
          ->option_text("FILE");
  run->add_option("--trace-detail", s->trace_detail,
                  "ops: op and compute slices and link counters; steps: + collective steps; hops: + every hop "
                  "transfer and flow arrows (default)")
      ->check(CLI::IsMember({"ops", "steps", "hops"}))
      ->needs(s->trace_option);
  run->add_option("--trace-chips", s->trace_chips, "Trace only these chip ids (comma-separated)")
      ->delimiter(',')
      ->option_text("ID,...")
      ->needs(s->trace_option);
  run->add_option("--trace-window", s->trace_window, "Trace only what overlaps FROM:TO microseconds")
      ->option_text("FROM:TO")
      ->needs(s->trace_option);
  run->add_option("--trace-max-events", s->trace_max_events,
                  "Stop the trace at N events, with a warning (default 5000000)")
      ->option_text("N")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 40))
      ->needs(s->trace_option);
  run->add_option("--engine", s->engine,
                  "native (default): meshsim's hop-by-hop engine; simgrid: the same transfers as flows on SimGrid "
                  "(docs/CROSSCHECK.md); all: both, side by side per op with the difference in percent")
      ->check(CLI::IsMember({"native", "simgrid", "all"}));
  run->add_option(
         "--simgrid-cfg", s->simgrid_config,
         "An extra SimGrid setting, as its --cfg takes it (e.g. network/model:LV08); repeatable. meshsim's own "
         "settings make a transfer alone on a link take latency + bytes / bandwidth (docs/CROSSCHECK.md)")
      ->option_text("KEY:VALUE");
  run->add_flag("--verify", s->verify,
                "Also execute the lowered program on small random data (every chip its own shard, real data "
                "movement and sums) and check every result against the unsharded computation; a training step: "
                "every transformer layer's forward and backward ops on microbatch 0, its outputs and gradients "
                "against the unsharded layers");
  meshsim::cli::add_limit_options(*run, s->limits);
  meshsim::tool::add_calibration_option(run, s->calibration_path);
  return {run, [s]() -> int { return run_workload(*s); }};
}

}  // namespace meshsim::cli
